#include "framework/io/safetensors.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <functional>
#include <optional>
#include <set>
#include <string_view>

#include "framework/autograd/tape.hpp"
#include "framework/io/atomic_file.hpp"
#include "framework/io/detail/input_file.hpp"
#include "framework/io/detail/text_cursor.hpp"
#include "framework/tensor/detail/tensor_impl.hpp"

// The file format stores little-endian values and loom copies them byte for byte.
static_assert(std::endian::native == std::endian::little,
              "loom's safetensors reader and writer assume a little-endian CPU");

namespace loom::io {

namespace {

constexpr std::size_t kLengthBytes = 8;
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;  // the reference implementation's limit
// A header's entries cost far more memory than its text (1.6 M empty tensors fit in 100 MB): bounded far above
// the few thousand tensors of a large model's file. save_safetensors refuses more too.
constexpr std::size_t kMaxTensors = 100'000;
constexpr std::string_view kMetadataKey = "__metadata__";

// ---- dtypes ----

/// How a dtype of the file is stored and which loom dtype it loads as (F16 and BF16 widen to f32).
struct FileDType {
  std::string_view name;
  std::size_t size;
  DType loads_as;
};

constexpr FileDType kFileDTypes[] = {
    {"F32", 4, DType::f32}, {"F64", 8, DType::f64}, {"I64", 8, DType::i64},
    {"BOOL", 1, DType::boolean}, {"F16", 2, DType::f32}, {"BF16", 2, DType::f32},
};

/// The file dtype loom writes for a loom dtype: BF16 for bf16, else the first entry that loads as it.
std::string_view file_dtype_name(DType dtype) {
  if (dtype == DType::bf16) return "BF16";
  return std::find_if(std::begin(kFileDTypes), std::end(kFileDTypes),
                      [&](const FileDType& d) { return d.loads_as == dtype; })
      ->name;
}

std::optional<FileDType> file_dtype(std::string_view name) {
  for (const FileDType& d : kFileDTypes)
    if (d.name == name) return d;
  return std::nullopt;
}

float half_to_float(std::uint16_t h) {
  const float sign = (h & 0x8000u) != 0 ? -1.0f : 1.0f;
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  if (exponent == 0x1f)
    return mantissa == 0 ? sign * std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  if (exponent == 0) return sign * std::ldexp(float(mantissa), -24);  // zero and subnormals
  return sign * std::ldexp(float(mantissa | 0x400), exponent - 25);
}

/// bfloat16 is the upper half of a float32.
// ---- UTF-8 and JSON strings ----

/// Offset of the first byte that is not part of well-formed UTF-8 (no overlong forms, no surrogates,
/// nothing above U+10FFFF), or nullopt when the text is valid.
std::optional<std::size_t> invalid_utf8_at(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
    const unsigned char lead = byte(i);
    std::size_t length = 0;
    unsigned char low = 0x80, high = 0xbf;  // allowed range of the second byte
    if (lead < 0x80) length = 1;
    else if (lead >= 0xc2 && lead <= 0xdf) length = 2;
    else if (lead >= 0xe0 && lead <= 0xef) {
      length = 3;
      if (lead == 0xe0) low = 0xa0;   // overlong
      if (lead == 0xed) high = 0x9f;  // surrogates
    } else if (lead >= 0xf0 && lead <= 0xf4) {
      length = 4;
      if (lead == 0xf0) low = 0x90;   // overlong
      if (lead == 0xf4) high = 0x8f;  // above U+10FFFF
    } else {
      return i;
    }
    if (i + length > text.size()) return i;
    for (std::size_t k = 1; k < length; ++k) {
      const unsigned char c = byte(i + k);
      if (c < (k == 1 ? low : 0x80) || c > (k == 1 ? high : 0xbf)) return i;
    }
    i += length;
  }
  return std::nullopt;
}

/// A JSON string literal escaped the way serde_json (the reference writer) escapes it, so loom's headers
/// match the reference byte for byte.
std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\u{:04x}", int(c));
        else out += c;
    }
  }
  return out + '"';
}

void append_utf8(std::string& out, std::uint32_t code_point) {
  if (code_point < 0x80) {
    out += char(code_point);
  } else if (code_point < 0x800) {
    out += char(0xc0 | code_point >> 6);
    out += char(0x80 | (code_point & 0x3f));
  } else if (code_point < 0x10000) {
    out += char(0xe0 | code_point >> 12);
    out += char(0x80 | ((code_point >> 6) & 0x3f));
    out += char(0x80 | (code_point & 0x3f));
  } else {
    out += char(0xf0 | code_point >> 18);
    out += char(0x80 | ((code_point >> 12) & 0x3f));
    out += char(0x80 | ((code_point >> 6) & 0x3f));
    out += char(0x80 | (code_point & 0x3f));
  }
}

// ---- header parsing: the JSON subset safetensors uses, parsed strictly and without recursion ----

/// One tensor entry of the header, as written (validated against the file afterwards).
struct Entry {
  std::string name;
  std::string dtype;
  std::vector<std::uint64_t> shape;
  std::uint64_t begin = 0, end = 0;
};

struct Header {
  std::vector<Entry> entries;  // in header order
  std::map<std::string, std::string> metadata;
};

class HeaderParser : private TextCursor {
 public:
  HeaderParser(std::string_view text, const std::string& path) : TextCursor(text), path_(path) {}

  Header parse() {
    Header header;
    skip_space();
    parse_object("the header", [&](const std::string& key) {
      if (key == kMetadataKey) {
        header.metadata = parse_metadata();
        return;
      }
      if (header.entries.size() == kMaxTensors)
        fail(fmt::format("more than {} tensors (the entries alone would take gigabytes)", kMaxTensors));
      header.entries.push_back(parse_entry(key));
    });
    skip_space();
    if (!at_end()) fail("unexpected characters after the header object (only spaces may pad it)");
    return header;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(fmt::format("load_safetensors: '{}': invalid header at byte {} of the file: {}", path_,
                            kLengthBytes + pos_, what));
  }

  /// A JSON object; `on_member(key)` parses the value after the ':'. Keys must be unique within the object.
  template <class OnMember>
  void parse_object(std::string_view what, OnMember on_member) {
    if (!consume('{')) fail(fmt::format("expected a JSON object for {}", what));
    std::set<std::string> keys;
    skip_space();
    if (consume('}')) return;
    while (true) {
      skip_space();
      const std::size_t key_at = pos_;
      std::string key = parse_string(fmt::format("a quoted key in {}", what));
      if (!keys.insert(key).second) {
        pos_ = key_at;
        fail(fmt::format("duplicate key {} in {}", json_string(key), what));
      }
      skip_space();
      if (!consume(':')) fail("expected ':' after a key");
      skip_space();
      on_member(key);
      skip_space();
      if (consume('}')) return;
      if (!consume(',')) fail(fmt::format("expected ',' or '}}' in {}", what));
    }
  }

  std::string parse_string(std::string_view what) {
    if (!consume('"')) fail(fmt::format("expected {}", what));
    std::string out;
    while (true) {
      if (at_end()) fail("unterminated string");
      const char c = text_[pos_];
      if (c == '"') break;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string (it must be escaped)");
      ++pos_;
      if (c != '\\') {
        out += c;  // the whole header was checked to be UTF-8 already
        continue;
      }
      const char escape = peek();
      ++pos_;
      switch (escape) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': append_utf8(out, parse_unicode_escape()); break;
        default: --pos_; fail("invalid escape sequence in a string");
      }
    }
    ++pos_;
    return out;
  }

  /// The code point of \uXXXX (the "\u" already consumed), joining a UTF-16 surrogate pair.
  std::uint32_t parse_unicode_escape() {
    const std::uint32_t first = parse_hex4();
    if (first >= 0xdc00 && first <= 0xdfff) fail("lone low surrogate in a \\u escape");
    if (first < 0xd800 || first > 0xdbff) return first;
    if (!consume('\\') || !consume('u')) fail("high surrogate not followed by a \\u low surrogate");
    const std::uint32_t second = parse_hex4();
    if (second < 0xdc00 || second > 0xdfff) fail("high surrogate not followed by a low surrogate");
    return 0x10000 + ((first - 0xd800) << 10) + (second - 0xdc00);
  }

  std::uint32_t parse_hex4() {
    std::uint32_t value = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = peek();
      int digit;
      if (c >= '0' && c <= '9') digit = c - '0';
      else if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
      else fail("expected four hex digits after \\u");
      value = value * 16 + std::uint32_t(digit);
      ++pos_;
    }
    return value;
  }

  std::uint64_t parse_integer(std::string_view what) {
    if (peek() == '-') fail(fmt::format("negative number in {}", what));
    if (peek() < '0' || peek() > '9') fail(fmt::format("expected a non-negative integer in {}", what));
    if (peek() == '0' && pos_ + 1 < text_.size() && text_[pos_ + 1] >= '0' && text_[pos_ + 1] <= '9')
      fail(fmt::format("leading zero in a number in {}", what));
    std::uint64_t value = 0;
    constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
    while (peek() >= '0' && peek() <= '9') {
      const unsigned digit = unsigned(peek() - '0');
      if (value > (kMax - digit) / 10) fail(fmt::format("number in {} does not fit in 64 bits", what));
      value = value * 10 + digit;
      ++pos_;
    }
    if (peek() == '.' || peek() == 'e' || peek() == 'E') fail(fmt::format("expected an integer in {}", what));
    return value;
  }

  std::vector<std::uint64_t> parse_integer_array(std::string_view what) {
    if (!consume('[')) fail(fmt::format("expected an array of integers for {}", what));
    std::vector<std::uint64_t> values;
    skip_space();
    if (consume(']')) return values;
    while (true) {
      skip_space();
      if (std::int64_t(values.size()) == kMaxRank) fail(fmt::format("{} has more than {} numbers", what, kMaxRank));
      values.push_back(parse_integer(what));
      skip_space();
      if (consume(']')) return values;
      if (!consume(',')) fail(fmt::format("expected ',' or ']' in {}", what));
    }
  }

  std::map<std::string, std::string> parse_metadata() {
    std::map<std::string, std::string> metadata;
    parse_object("\"__metadata__\"", [&](const std::string& key) {
      metadata[key] = parse_string("a string value in \"__metadata__\"");
    });
    return metadata;
  }

  Entry parse_entry(const std::string& name) {
    Entry entry;
    entry.name = name;
    const std::string what = fmt::format("tensor {}", json_string(name));
    bool seen_offsets = false, seen_dtype = false, seen_shape = false;
    parse_object(what, [&](const std::string& key) {
      if (key == "dtype") {
        seen_dtype = true;
        entry.dtype = parse_string(fmt::format("a string for the dtype of {}", what));
      } else if (key == "shape") {
        seen_shape = true;
        entry.shape = parse_integer_array(fmt::format("the shape of {}", what));
      } else if (key == "data_offsets") {
        seen_offsets = true;
        const std::size_t at = pos_;
        const auto offsets = parse_integer_array(fmt::format("the data_offsets of {}", what));
        if (offsets.size() != 2) {
          pos_ = at;
          fail(fmt::format("data_offsets of {} must be [begin, end], not {} numbers", what, offsets.size()));
        }
        entry.begin = offsets[0];
        entry.end = offsets[1];
      } else {
        fail(fmt::format("unknown field {} in {} (expected dtype, shape and data_offsets)", json_string(key), what));
      }
    });
    if (!seen_dtype || !seen_shape || !seen_offsets)
      fail(fmt::format("{} must have the fields dtype, shape and data_offsets", what));
    return entry;
  }

  const std::string& path_;
};

// ---- checking the header against the file ----

/// An entry checked against the file: its loom shape, file dtype and byte range.
struct Layout {
  std::string name;
  Shape shape;
  FileDType dtype;
  std::uint64_t begin, end;
};

std::string supported_dtypes() {
  std::vector<std::string_view> names;
  for (const FileDType& d : kFileDTypes) names.push_back(d.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

Layout check_entry(const Entry& entry, const std::string& path) {
  const std::string tensor = json_string(entry.name);
  const auto dtype = file_dtype(entry.dtype);
  check(dtype.has_value(), "load_safetensors: '{}': tensor {} has unsupported dtype {} (loom reads {})", path, tensor,
        json_string(entry.dtype), supported_dtypes());
  // Contiguous strides multiply the dimensions (treating 0 as 1) and must fit in int64, like the byte size.
  constexpr std::uint64_t kMax = std::uint64_t(std::numeric_limits<std::int64_t>::max());
  Shape shape;
  std::uint64_t extent = dtype->size;
  for (std::uint64_t d : entry.shape) {
    const std::uint64_t factor = std::max<std::uint64_t>(d, 1);
    check(extent <= kMax / factor, "load_safetensors: '{}': the shape {} of tensor {} is too large", path,
          entry.shape, tensor);
    extent *= factor;
    shape.push_back(std::int64_t(d));
  }
  const std::uint64_t bytes = std::uint64_t(numel(shape)) * dtype->size;
  check(entry.begin <= entry.end, "load_safetensors: '{}': tensor {} has data_offsets [{}, {}] that end before they begin",
        path, tensor, entry.begin, entry.end);
  check(entry.end - entry.begin == bytes,
        "load_safetensors: '{}': tensor {} of dtype {} and shape {} needs {} bytes but its data_offsets [{}, {}] span {}",
        path, tensor, dtype->name, entry.shape, bytes, entry.begin, entry.end, entry.end - entry.begin);
  return {entry.name, std::move(shape), *dtype, entry.begin, entry.end};
}

/// The entries in order of their data, checked to tile [0, data_bytes) exactly, as the reference requires.
std::vector<Layout> check_layout(const Header& header, std::uint64_t data_bytes, const std::string& path) {
  std::vector<Layout> layouts;
  for (const Entry& entry : header.entries) {
    layouts.push_back(check_entry(entry, path));
    const Layout& l = layouts.back();
    check(l.end <= data_bytes,
          "load_safetensors: '{}': tensor {} has data_offsets [{}, {}] beyond the {} bytes of data in the file "
          "(truncated?)", path, json_string(l.name), l.begin, l.end, data_bytes);
  }
  std::stable_sort(layouts.begin(), layouts.end(),
                   [](const Layout& a, const Layout& b) { return std::pair(a.begin, a.end) < std::pair(b.begin, b.end); });
  std::uint64_t covered = 0;
  const Layout* previous = nullptr;
  for (const Layout& l : layouts) {
    check(l.begin >= covered, "load_safetensors: '{}': the data of tensors {} and {} overlap ([{}, {}] and [{}, {}])",
          path, previous ? json_string(previous->name) : "", json_string(l.name), previous ? previous->begin : 0,
          covered, l.begin, l.end);
    check(l.begin == covered, "load_safetensors: '{}': bytes [{}, {}) of the data belong to no tensor (a gap before {})",
          path, covered, l.begin, json_string(l.name));
    covered = l.end;
    previous = &l;
  }
  check(covered == data_bytes, "load_safetensors: '{}': {} trailing bytes after the last tensor's data", path,
        data_bytes - covered);
  return layouts;
}

std::string error_text() { return std::strerror(errno); }


/// Reads a tensor's bytes (the file positioned at them) into a fresh loom tensor, widening F16 and BF16.
Tensor read_tensor(const Layout& l, const std::function<void(void*, std::size_t)>& read_exactly) {
  Tensor t = Tensor::zeros(l.shape, l.dtype.loads_as);
  const std::size_t bytes = std::size_t(l.end - l.begin);
  if (bytes == 0) return t;
  if (l.dtype.loads_as == DType::f32 && l.dtype.size == 2) {
    std::vector<std::uint16_t> halves(bytes / 2);
    read_exactly(halves.data(), bytes);
    float* out = t.data<float>();
    const bool bf16 = l.dtype.name == "BF16";
    for (std::size_t i = 0; i < halves.size(); ++i) out[i] = bf16 ? float(bfloat16::from_bits(halves[i])) : half_to_float(halves[i]);
    return t;
  }
  auto* raw = reinterpret_cast<unsigned char*>(t.impl().storage->data());
  read_exactly(raw, bytes);
  // A C++ bool must hold 0 or 1; another byte value from a hand-made file would be undefined behaviour.
  if (l.dtype.loads_as == DType::boolean)
    for (std::size_t i = 0; i < bytes; ++i) raw[i] = raw[i] != 0;
  return t;
}

}  // namespace

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  auto check_utf8 = [&](std::string_view text, std::string_view what) {
    check(!invalid_utf8_at(text).has_value(), "save_safetensors: '{}': {} {} is not valid UTF-8", path, what,
          json_string(text));
  };
  check(tensors.size() <= kMaxTensors, "save_safetensors: '{}': {} tensors are more than the {} a file may hold", path,
        tensors.size(), kMaxTensors);
  std::string header = "{";
  if (!metadata.empty()) {
    std::vector<std::string> members;
    for (const auto& [key, value] : metadata) {
      check_utf8(key, "the metadata key");
      check_utf8(value, "the metadata value");
      members.push_back(json_string(key) + ':' + json_string(value));
    }
    header += fmt::format("{}:{{{}}}", json_string(kMetadataKey), fmt::join(members, ","));
  }

  NoGradGuard no_grad;  // making a view contiguous is a copy, not something to differentiate
  std::set<std::string_view> names;
  std::vector<Tensor> contiguous;
  std::uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    check(!name.empty(), "save_safetensors: '{}': tensor names must not be empty", path);
    check(name != kMetadataKey, "save_safetensors: '{}': the name \"__metadata__\" is reserved for the metadata", path);
    check(names.insert(name).second, "save_safetensors: '{}': the name {} appears twice", path, json_string(name));
    check_utf8(name, "the tensor name");
    check(tensor.defined(), "save_safetensors: '{}': tensor {} is undefined", path, json_string(name));
    contiguous.push_back(tensor.contiguous());
    const std::uint64_t bytes = std::uint64_t(tensor.numel()) * dtype_size(tensor.dtype());
    if (header.size() > 1) header += ',';
    header += fmt::format("{}:{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}", json_string(name),
                          file_dtype_name(tensor.dtype()), fmt::join(tensor.shape(), ","), offset, offset + bytes);
    offset += bytes;
  }
  header += '}';
  header.resize((header.size() + kLengthBytes - 1) / kLengthBytes * kLengthBytes, ' ');
  check(header.size() <= kMaxHeaderBytes, "save_safetensors: '{}': the header is {} bytes, over the limit of {}", path,
        header.size(), kMaxHeaderBytes);

  std::string length(kLengthBytes, '\0');
  for (std::size_t i = 0; i < kLengthBytes; ++i) length[i] = char((std::uint64_t(header.size()) >> (8 * i)) & 0xff);
  std::vector<std::string_view> pieces{length, header};
  for (const Tensor& t : contiguous) {
    const std::size_t item = dtype_size(t.dtype());
    pieces.emplace_back(reinterpret_cast<const char*>(t.impl().storage->data()) + std::size_t(t.offset()) * item,
                        std::size_t(t.numel()) * item);
  }
  write_file_atomically("save_safetensors", path, pieces);
}

SafetensorsFile read_safetensors(const std::string& path) {
  const detail::InputFile file("load_safetensors", path);
  const std::uint64_t file_size = file.size();
  const std::function<void(void*, std::size_t)> read_exactly = [&](void* out, std::size_t bytes) {
    check(std::fread(out, 1, bytes, file.get()) == bytes, "load_safetensors: '{}': reading failed: {}", path,
          std::ferror(file.get()) ? error_text() : "unexpected end of file");
  };

  check(file_size >= kLengthBytes,
        "load_safetensors: '{}' is not a safetensors file: {} bytes is too short for the 8-byte header length", path,
        file_size);
  unsigned char length[kLengthBytes];
  read_exactly(length, kLengthBytes);
  std::uint64_t header_size = 0;
  for (std::size_t i = kLengthBytes; i-- > 0;) header_size = header_size << 8 | length[i];
  check(header_size <= kMaxHeaderBytes, "load_safetensors: '{}': the header length {} is over the limit of {} bytes",
        path, header_size, kMaxHeaderBytes);
  check(header_size <= file_size - kLengthBytes,
        "load_safetensors: '{}' is truncated: the header is {} bytes long but only {} bytes follow its length", path,
        header_size, file_size - kLengthBytes);

  std::string text(std::size_t(header_size), '\0');
  read_exactly(text.data(), text.size());
  if (const auto bad = invalid_utf8_at(text))
    throw Error(fmt::format("load_safetensors: '{}': invalid header at byte {} of the file: invalid UTF-8", path,
                            kLengthBytes + *bad));
  Header header = HeaderParser(text, path).parse();
  const std::vector<Layout> layouts = check_layout(header, file_size - kLengthBytes - header_size, path);

  SafetensorsFile result;
  result.metadata = std::move(header.metadata);
  for (const Layout& l : layouts) result.tensors.emplace_back(l.name, read_tensor(l, read_exactly));
  return result;
}

std::vector<std::pair<std::string, Tensor>> load_safetensors(const std::string& path) {
  return read_safetensors(path).tensors;
}

}  // namespace loom::io
