#include "framework/io/npy.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>

#include "framework/io/atomic_file.hpp"
#include "framework/io/detail/input_file.hpp"
#include "framework/io/detail/text_cursor.hpp"
#include "framework/kernels/dispatch.hpp"
#include "framework/kernels/strided.hpp"
#include "framework/tensor/detail/tensor_impl.hpp"
#include "framework/tensor/memory.hpp"

// The file format stores little-endian values and loom copies them byte for byte.
static_assert(std::endian::native == std::endian::little, "loom's .npy reader and writer assume a little-endian CPU");

namespace loom::io {

namespace {

constexpr std::string_view kMagic{"\x93NUMPY", 6};
constexpr std::size_t kAlignment = 64;  // NumPy aligns the data to 64 bytes so it can be memory-mapped

std::string_view descr_of(DType dtype) {
  switch (dtype) {
    case DType::f32: return "<f4";
    case DType::f64: return "<f8";
    case DType::i64: return "<i8";
    case DType::boolean: return "|b1";
    case DType::bf16: break;  // NumPy has none; save_npy refuses it
  }
  return "";
}

std::optional<DType> dtype_of_descr(std::string_view descr) {
  for (DType dtype : {DType::f32, DType::f64, DType::i64, DType::boolean})
    if (descr == descr_of(dtype)) return dtype;
  return std::nullopt;
}

/// Python's repr of a shape tuple: (), (5,), (2, 3).
std::string shape_repr(const Shape& shape) {
  if (shape.size() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape, ", "));
}

std::string error_text() { return std::strerror(errno); }


// ---- header parsing: the subset of Python literal syntax NumPy writes, parsed strictly ----

struct Header {
  std::string descr;
  bool fortran_order = false;
  Shape shape;
};

class HeaderParser : private TextCursor {
 public:
  HeaderParser(std::string_view text, const std::string& path) : TextCursor(text), path_(path) {}

  Header parse() {
    Header header;
    bool seen_descr = false, seen_order = false, seen_shape = false;
    skip_space();
    expect('{', "the header must be a dict literal starting with '{'");
    while (true) {
      skip_space();
      if (consume('}')) break;
      const std::string key = parse_string("a quoted key");
      skip_space();
      expect(':', "expected ':' after a key");
      skip_space();
      if (key == "descr") {
        mark_seen(seen_descr, key);
        header.descr = parse_string("a quoted string for 'descr' (structured dtypes are not supported)");
      } else if (key == "fortran_order") {
        mark_seen(seen_order, key);
        header.fortran_order = parse_bool();
      } else if (key == "shape") {
        mark_seen(seen_shape, key);
        header.shape = parse_shape();
      } else {
        fail(fmt::format("unexpected key '{}' (expected 'descr', 'fortran_order' and 'shape')", key));
      }
      skip_space();
      if (consume('}')) break;
      expect(',', "expected ',' or '}' after a value");
    }
    skip_space();  // NumPy pads with spaces and a final newline
    if (pos_ != text_.size()) fail("unexpected characters after the dict");
    if (!seen_descr || !seen_order || !seen_shape)
      fail("the dict must have the keys 'descr', 'fortran_order' and 'shape'");
    return header;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    constexpr std::size_t kShown = 200;  // a corrupt header can be long: quote only its start
    const std::string_view shown = text_.substr(0, kShown);
    throw Error(fmt::format("load_npy: '{}': malformed header at offset {}: {}; the header reads \"{}{}\"", path_,
                            pos_, what, shown, text_.size() > kShown ? "..." : ""));
  }

  void mark_seen(bool& seen, const std::string& key) const {
    if (seen) fail(fmt::format("key '{}' appears twice", key));
    seen = true;
  }

  void expect(char c, const char* what) {
    if (!consume(c)) fail(what);
  }

  std::string parse_string(const char* what) {
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail(fmt::format("expected {}", what));
    ++pos_;
    const std::size_t start = pos_;
    while (!at_end() && peek() != quote) {
      // NumPy never writes escapes; refusing them keeps the parser small and exact.
      if (peek() == '\\') fail("escape sequences are not supported in strings");
      if (peek() == '\n') break;
      ++pos_;
    }
    if (peek() != quote) fail("unterminated string");
    ++pos_;
    return std::string(text_.substr(start, pos_ - 1 - start));
  }

  bool parse_bool() {
    for (auto [word, value] : {std::pair{std::string_view("True"), true}, std::pair{std::string_view("False"), false}})
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    fail("expected True or False for 'fortran_order'");
  }

  Shape parse_shape() {
    expect('(', "expected a tuple for 'shape'");
    Shape shape;
    bool trailing_comma = false;
    while (true) {
      skip_space();
      if (consume(')')) break;
      if (std::int64_t(shape.size()) == kMaxRank) fail(fmt::format("'shape' has more than {} dimensions", kMaxRank));
      shape.push_back(parse_dimension());
      skip_space();
      trailing_comma = consume(',');
      if (!trailing_comma) {
        skip_space();
        expect(')', "expected ',' or ')' in 'shape'");
        break;
      }
    }
    // In Python "(3)" is the integer 3, not a tuple.
    if (shape.size() == 1 && !trailing_comma) fail("'shape' must be a tuple; a 1-D shape is written (n,)");
    return shape;
  }

  std::int64_t parse_dimension() {
    if (peek() == '-') fail("negative dimension in 'shape'");
    if (peek() < '0' || peek() > '9') fail("expected a non-negative integer in 'shape'");
    std::int64_t value = 0;
    constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
    while (peek() >= '0' && peek() <= '9') {
      const int digit = peek() - '0';
      if (value > (kMax - digit) / 10) fail("dimension in 'shape' does not fit in 64 bits");
      value = value * 10 + digit;
      ++pos_;
    }
    return value;
  }

  const std::string& path_;
};

/// Number of elements of `shape` and the byte size of its data, rejecting shapes whose strides or byte size
/// do not fit in 64 bits (contiguous strides multiply the dimensions, treating 0 as 1).
std::int64_t checked_bytes(const Shape& shape, std::size_t item_size, const std::string& path) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  std::int64_t extent = std::int64_t(item_size);
  for (std::int64_t d : shape) {
    const std::int64_t factor = std::max<std::int64_t>(d, 1);
    check(extent <= kMax / factor, "load_npy: '{}': shape {} is too large", path, shape);
    extent *= factor;
  }
  return numel(shape) * std::int64_t(item_size);
}

std::uint64_t little_endian(const unsigned char* bytes, std::size_t count) {
  std::uint64_t value = 0;
  for (std::size_t i = count; i-- > 0;) value = value << 8 | bytes[i];
  return value;
}

}  // namespace

void save_npy(const std::string& path, const Tensor& t) {
  check(t.defined(), "save_npy: '{}': the tensor is undefined", path);
  check(t.dtype() != DType::bf16, "save_npy: '{}': NumPy has no bfloat16; cast the bf16 tensor of shape {} to "
        "float32 first", path, t.shape());

  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr_of(t.dtype()),
                                 shape_repr(t.shape()));
  // Pad with spaces and a final newline so magic + version + length field + header is a multiple of 64. At most
  // kMaxRank dimensions always fit format 1.0's 2-byte header length.
  const std::size_t unpadded = kMagic.size() + 2 + 2 + dict.size() + 1;
  const std::string header = dict + std::string((kAlignment - unpadded % kAlignment) % kAlignment, ' ') + '\n';
  std::string prefix(kMagic);
  prefix += char(1);
  prefix += char(0);
  for (std::size_t i = 0; i < 2; ++i) prefix += char((header.size() >> (8 * i)) & 0xff);

  // Row-major bytes of the values: the storage itself when contiguous, else gathered through the strides.
  const std::size_t item = dtype_size(t.dtype());
  const std::size_t data_bytes = std::size_t(t.numel()) * item;
  std::vector<std::byte> gathered;
  const std::byte* data = t.impl().storage->data() + std::size_t(t.offset()) * item;
  if (!t.is_contiguous()) {
    check_fits_in_memory(t.numel(), item, "save_npy: '{}': gathering the view of shape {} into one buffer", path,
                         t.shape());
    gathered.resize(data_bytes);
    visit_dtype(t.dtype(), [&]<class T>() {
      const T* base = reinterpret_cast<const T*>(t.impl().storage->data());
      T* out = reinterpret_cast<T*>(gathered.data());
      for_each_strided(t.shape(), t.strides(), t.offset(),
                       [&](std::int64_t i, std::int64_t at) { out[i] = base[at]; });
    });
    data = gathered.data();
  }

  write_file_atomically("save_npy", path,
                        {prefix, header, std::string_view(reinterpret_cast<const char*>(data), data_bytes)});
}

Tensor load_npy(const std::string& path) {
  const detail::InputFile file("load_npy", path);
  const std::uint64_t file_size = file.size();

  auto read_exactly = [&](void* out, std::size_t bytes, const char* what) {
    check(std::fread(out, 1, bytes, file.get()) == bytes, "load_npy: '{}': reading {} failed: {}", path, what,
          std::ferror(file.get()) ? error_text() : "unexpected end of file");
  };

  // Magic string, version, header length (2 bytes in 1.0, 4 bytes in 2.0 and 3.0).
  unsigned char prefix[12];
  check(file_size >= 10, "load_npy: '{}' is not a .npy file: {} bytes is too short for the magic string and header",
        path, file_size);
  read_exactly(prefix, 8, "the magic string");
  check(std::string_view(reinterpret_cast<const char*>(prefix), kMagic.size()) == kMagic,
        "load_npy: '{}' is not a .npy file (it does not start with the magic string \\x93NUMPY)", path);
  const int major = prefix[6], minor = prefix[7];
  check(major >= 1 && major <= 3 && minor == 0,
        "load_npy: '{}': unsupported .npy format version {}.{} (expected 1.0, 2.0 or 3.0)", path, major, minor);
  const std::size_t length_field = major == 1 ? 2 : 4;
  check(file_size >= 8 + length_field, "load_npy: '{}' is truncated: it ends inside the header length", path);
  read_exactly(prefix + 8, length_field, "the header length");
  const std::uint64_t header_size = little_endian(prefix + 8, length_field);
  const std::uint64_t data_start = 8 + length_field + header_size;
  check(data_start <= file_size, "load_npy: '{}' is truncated: the header is {} bytes long but the file has {} bytes",
        path, header_size, file_size);

  // 1.0 and 2.0 headers are latin-1, 3.0 is UTF-8: the keys and values loom accepts are ASCII in both.
  std::string text(std::size_t(header_size), '\0');
  read_exactly(text.data(), text.size(), "the header");
  const Header header = HeaderParser(text, path).parse();

  check(header.descr.empty() || header.descr[0] != '>',
        "load_npy: '{}': big-endian data ('{}') is not supported; convert it with arr.astype(arr.dtype.newbyteorder('<'))",
        path, header.descr);
  const auto dtype = dtype_of_descr(header.descr);
  check(dtype.has_value(), "load_npy: '{}': unsupported dtype '{}' (loom reads '<f4', '<f8', '<i8' and '|b1')", path,
        header.descr);
  check(!header.fortran_order,
        "load_npy: '{}': Fortran-ordered data (fortran_order: True) is not supported; save a C-ordered array "
        "(np.ascontiguousarray)", path);

  // Check the size the header promises against the file before allocating anything.
  const std::int64_t data_bytes = checked_bytes(header.shape, dtype_size(*dtype), path);
  const std::uint64_t available = file_size - data_start;
  check(std::uint64_t(data_bytes) <= available,
        "load_npy: '{}' is truncated: shape {} of {} needs {} bytes of data but only {} follow the header", path,
        header.shape, *dtype, data_bytes, available);
  // Bytes after the data are ignored, as np.load does (np.save can append several arrays to one file).

  Tensor t = Tensor::zeros(header.shape, *dtype);
  if (data_bytes > 0) read_exactly(t.impl().storage->data(), std::size_t(data_bytes), "the data");
  if (*dtype == DType::boolean) {
    // A C++ bool must hold 0 or 1; a stray byte value from a hand-made file would be undefined behaviour.
    auto* bytes = reinterpret_cast<unsigned char*>(t.impl().storage->data());
    for (std::int64_t i = 0; i < data_bytes; ++i) bytes[i] = bytes[i] != 0;
  }
  return t;
}

}  // namespace loom::io
