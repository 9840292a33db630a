#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "framework/io/safetensors.hpp"
#include "tests/temp_files.hpp"

using namespace loom;
using namespace loom::testing;
namespace fs = std::filesystem;

namespace {

std::string fixture(const std::string& name) { return std::string(LOOM_FIXTURES_DIR) + "/safetensors/" + name; }

std::string length_prefix(std::uint64_t n) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = char((n >> (8 * i)) & 0xff);
  return bytes;
}

/// A safetensors file with this header text (as given, unpadded) and these data bytes.
std::string safetensors_file(const std::string& header, const std::string& data) {
  return length_prefix(header.size()) + header + data;
}

template <class T>
std::string raw_bytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

std::vector<std::string> names_of(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  std::vector<std::string> names;
  for (const auto& entry : tensors) names.push_back(entry.first);
  return names;
}

std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

/// The tensors of make_safetensors_fixtures.py's layout_tensors(), in the order the reference writes them.
std::vector<std::pair<std::string, Tensor>> layout_tensors() {
  return {
      {"step", Tensor::from_vector(std::vector<std::int64_t>{7, -1, std::int64_t(1) << 40}, Shape{3})},
      {"bias", Tensor::from_vector(std::vector<double>{0.5, -1.25, 3.0}, Shape{3})},
      {"dense/kernel", Tensor::from_vector(std::vector<float>{-1.5f, -0.5f, 0.5f, 1.5f}, Shape{2, 2})},
      {"emb\xc3\xa9 \"q\"\\\n\t\x01", Tensor::from_vector(std::vector<float>{2.5f}, Shape{1})},
      {"empty", Tensor::zeros(Shape{0, 3}, DType::f32)},
      {"scale", Tensor::scalar(0.25, DType::f32)},
      {"mask", Tensor::from_vector(std::vector<bool>{true, false, false, true}, Shape{2, 2})},
  };
}

}  // namespace

TEST_CASE("save_safetensors and load_safetensors round-trip f32, f64, i64 and bool", "[safetensors]") {
  TempDir dir("safetensors");
  const std::string path = dir.file("x.safetensors");
  const std::vector<std::pair<std::string, Tensor>> tensors = {
      {"z/f32", Tensor::from_vector(std::vector<float>{1.5f, -2.f, 3.25f, 0.f, 1e-30f, 7.f}, Shape{2, 3})},
      {"a/f64", Tensor::randn(Shape{3, 1, 4}, DType::f64, /*seed=*/3)},
      {"i64", Tensor::from_vector(std::vector<std::int64_t>{-1, 0, 1, std::int64_t(1) << 62}, Shape{4})},
      {"bool", Tensor::from_vector(std::vector<bool>{true, false, true, true, false, false}, Shape{3, 2})},
      {"scalar", Tensor::scalar(-4.5, DType::f64)},
      {"empty", Tensor::zeros(Shape{0, 3}, DType::f32)},
      {"empty_bool", Tensor::zeros(Shape{2, 0}, DType::boolean)},
      {"transposed", Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, Shape{2, 3}).transpose()},
  };
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "caf\xc3\xa9 \"x\"\n\x01"}};
  io::save_safetensors(path, tensors, metadata);

  const io::SafetensorsFile file = io::read_safetensors(path);
  CHECK(file.metadata == metadata);
  REQUIRE(names_of(file.tensors) == names_of(tensors));  // written in the given order, read in data order
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    INFO(tensors[i].first);
    const Tensor& want = tensors[i].second;
    const Tensor& got = file.tensors[i].second;
    CHECK(got.dtype() == want.dtype());
    CHECK(got.shape() == want.shape());
    CHECK(got.to_vector<double>() == want.to_vector<double>());
  }
  CHECK(file.tensors.back().second.to_vector<double>() == std::vector<double>{1, 4, 2, 5, 3, 6});
  CHECK(names_of(io::load_safetensors(path)) == names_of(tensors));

  // No metadata, no tensors.
  io::save_safetensors(path, {});
  const io::SafetensorsFile nothing = io::read_safetensors(path);
  CHECK(nothing.tensors.empty());
  CHECK(nothing.metadata.empty());
}

TEST_CASE("save_safetensors writes the same bytes as the reference implementation", "[safetensors]") {
  TempDir dir("safetensors");
  // The same tensors, in the order the reference sorts them, and one metadata key: the same file.
  io::save_safetensors(dir.file("layout.safetensors"), layout_tensors(), {{"format", "np"}});
  const std::string written = read_bytes(dir.file("layout.safetensors"));
  const std::string reference = read_bytes(fixture("layout.safetensors"));
  REQUIRE(reference.size() > 8);
  CHECK(written == reference);
  const std::string header = written.substr(8, written.size() - 8 - 76);  // 76 bytes of data
  CHECK(length_prefix(header.size()) == written.substr(0, 8));
  CHECK(header.size() % 8 == 0);  // padded with spaces to 8 bytes

  io::save_safetensors(dir.file("empty.safetensors"), {});
  CHECK(read_bytes(dir.file("empty.safetensors")) == read_bytes(fixture("empty.safetensors")));
  CHECK(read_bytes(fixture("empty.safetensors")) == length_prefix(8) + "{}      ");
}

TEST_CASE("load_safetensors reads files written by the reference implementation", "[safetensors]") {
  const io::SafetensorsFile file = io::read_safetensors(fixture("mixed.safetensors"));
  CHECK(file.metadata == std::map<std::string, std::string>{{"format", "np"}, {"note", "caf\xc3\xa9 \"quoted\"\n"}});
  // In order of the data, which the reference sorts by dtype, then name.
  REQUIRE(names_of(file.tensors) == std::vector<std::string>{"i64", "f64_empty", "f64_scalar", "f32", "f16", "bool"});
  const auto& t = file.tensors;

  CHECK(t[0].second.dtype() == DType::i64);
  CHECK(t[0].second.shape() == Shape{4, 1});
  CHECK(t[0].second.to_vector<std::int64_t>() == std::vector<std::int64_t>{-3, 0, 7, std::int64_t(1) << 62});
  CHECK(t[1].second.dtype() == DType::f64);
  CHECK(t[1].second.shape() == Shape{2, 0});
  CHECK(t[2].second.shape() == Shape{});
  CHECK(t[2].second.item<double>() == 3.25);
  CHECK(t[3].second.dtype() == DType::f32);
  CHECK(t[3].second.shape() == Shape{2, 3});
  CHECK(t[3].second.to_vector<float>() == std::vector<float>{-1.25f, -0.75f, -0.25f, 0.25f, 0.75f, 1.25f});
  CHECK(t[5].second.dtype() == DType::boolean);
  CHECK(t[5].second.to_vector<bool>() == std::vector<bool>{true, false, false, true, true});

  // F16 widens to f32 exactly: normal, largest, smallest subnormal, signed zero, infinity, NaN.
  CHECK(t[4].second.dtype() == DType::f32);
  const std::vector<float> f16 = t[4].second.to_vector<float>();
  REQUIRE(f16.size() == 7);
  CHECK(std::vector<float>(f16.begin(), f16.begin() + 6) ==
        std::vector<float>{1.0f, -2.5f, 65504.0f, std::ldexp(1.0f, -24), -0.0f, std::numeric_limits<float>::infinity()});
  CHECK(std::signbit(f16[4]));
  CHECK(std::isnan(f16[6]));

  CHECK(io::read_safetensors(fixture("empty.safetensors")).tensors.empty());
  const auto layout = io::load_safetensors(fixture("layout.safetensors"));
  CHECK(names_of(layout) == names_of(layout_tensors()));
}

TEST_CASE("load_safetensors widens BF16 to f32 and reads bool bytes other than 0 and 1 as true", "[safetensors]") {
  TempDir dir("safetensors");
  const std::string path = dir.file("h.safetensors");
  write_bytes(path, safetensors_file(R"({"b":{"dtype":"BF16","shape":[4],"data_offsets":[0,8]}})",
                                     raw_bytes(std::vector<std::uint16_t>{0x3f80, 0xc020, 0x0000, 0xff80})));
  CHECK(io::load_safetensors(path)[0].second.to_vector<float>() ==
        std::vector<float>{1.0f, -2.5f, 0.0f, -std::numeric_limits<float>::infinity()});
  write_bytes(path, safetensors_file(R"({"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})",
                                     std::string("\x00\x01\x07", 3)));
  CHECK(io::load_safetensors(path)[0].second.to_vector<bool>() == std::vector<bool>{false, true, true});
}

TEST_CASE("load_safetensors accepts any well-formed JSON header", "[safetensors]") {
  TempDir dir("safetensors");
  const std::string path = dir.file("h.safetensors");
  const std::string data = raw_bytes(std::vector<float>{1, 2, 3, 4, 5, 6});
  for (const char* header : {
           R"({"x":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})",
           " \t\r\n{ \"x\" : { \"data_offsets\" : [ 0 , 24 ] , \"shape\" : [ 2 , 3 ] , \"dtype\" : \"F32\" } } \n",
           R"({"x":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},"__metadata__":{}})",
           R"({"\u0078":{"dtype":"\u0046\u00332","shape":[2,3],"data_offsets":[0,24]}})",
       }) {
    INFO(header);
    write_bytes(path, safetensors_file(header, data));
    const auto tensors = io::load_safetensors(path);
    REQUIRE(tensors.size() == 1);
    CHECK(tensors[0].first == "x");
    CHECK(tensors[0].second.shape() == Shape{2, 3});
    CHECK(tensors[0].second.to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
  }
  // Escapes in names and metadata, a surrogate pair included; tensors listed out of data order.
  write_bytes(path, safetensors_file(R"({"__metadata__":{"k\n":"\"\\\/\b\f\r\t\u00e9\ud83d\ude00"},)"
                                     R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},)"
                                     R"("a\u0000":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})",
                                     raw_bytes(std::vector<float>{1, 2})));
  const io::SafetensorsFile file = io::read_safetensors(path);
  CHECK(file.metadata == std::map<std::string, std::string>{{"k\n", "\"\\/\b\f\r\t\xc3\xa9\xf0\x9f\x98\x80"}});
  CHECK(names_of(file.tensors) == std::vector<std::string>{std::string("a\0", 2), "b"});
}

TEST_CASE("load_safetensors rejects every truncation of a valid file", "[safetensors]") {
  TempDir dir("safetensors");
  const std::string path = dir.file("cut.safetensors");
  const std::string whole = read_bytes(fixture("mixed.safetensors"));
  REQUIRE(whole.size() > 100);
  for (std::size_t size = 0; size < whole.size(); ++size) {
    INFO("cut at " << size);
    write_bytes(path, whole.substr(0, size));
    REQUIRE_THROWS_WITH(io::load_safetensors(path),
                        Catch::Contains("load_safetensors") && Catch::Contains("cut.safetensors"));
  }
  write_bytes(path, whole.substr(0, 7));
  REQUIRE_THROWS_WITH(io::load_safetensors(path), Catch::Contains("too short"));
  write_bytes(path, whole.substr(0, 100));
  REQUIRE_THROWS_WITH(io::load_safetensors(path), Catch::Contains("truncated"));
  write_bytes(path, whole.substr(0, whole.size() - 1));
  REQUIRE_THROWS_WITH(io::load_safetensors(path), Catch::Contains("truncated"));
  write_bytes(path, whole + "x");
  REQUIRE_THROWS_WITH(io::load_safetensors(path), Catch::Contains("1 trailing bytes"));
}

TEST_CASE("load_safetensors rejects malformed headers", "[safetensors]") {
  TempDir dir("safetensors");
  const std::string path = dir.file("h.safetensors");
  struct Case {
    std::string header;
    const char* expected;
  };
  const std::string ok_entry = R"("x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
  for (const Case& c : std::vector<Case>{
           {"", "expected a JSON object"},
           {"[1]", "expected a JSON object"},
           {"{" + ok_entry, "expected ',' or '}'"},
           {"{" + ok_entry + "}}", "after the header object"},
           {"{" + ok_entry + std::string("}\0\0\0", 4), "after the header object"},
           {"{" + ok_entry + ",}", "expected a quoted key"},
           {"{x:1}", "expected a quoted key"},
           {R"({"x" {"dtype":"F32"}})", "expected ':'"},
           {"{" + ok_entry + "," + ok_entry + "}", "duplicate key \"x\""},
           {R"({"__metadata__":{},"__metadata__":{}})", "duplicate key \"__metadata__\""},
           {R"({"x":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}})", "duplicate key \"dtype\""},
           {R"({"__metadata__":{"a":"1","a":"2"}})", "duplicate key \"a\""},
           {R"({"__metadata__":{"a":1}})", "a string value"},
           {R"({"__metadata__":null})", "expected a JSON object"},
           {R"({"x":{"dtype":"F32","shape":[1]}})", "must have the fields"},
           {R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"extra":[]}})", "unknown field \"extra\""},
           {R"({"x":{"dtype":F32,"shape":[1],"data_offsets":[0,4]}})", "expected a string for the dtype"},
           {R"({"x":{"dtype":"F32","shape":1,"data_offsets":[0,4]}})", "expected an array"},
           {R"({"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "negative number"},
           {R"({"x":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}})", "expected an integer"},
           {R"({"x":{"dtype":"F32","shape":[1e0],"data_offsets":[0,4]}})", "expected an integer"},
           {R"({"x":{"dtype":"F32","shape":[01],"data_offsets":[0,4]}})", "leading zero"},
           {R"({"x":{"dtype":"F32","shape":[1 1],"data_offsets":[0,4]}})", "expected ',' or ']'"},
           {R"({"x":{"dtype":"F32","shape":[[1]],"data_offsets":[0,4]}})", "non-negative integer"},
           {R"({"x":{"dtype":"F32","shape":[18446744073709551616],"data_offsets":[0,4]}})", "64 bits"},
           {R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})", "must be [begin, end]"},
           {R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4]}})", "must be [begin, end]"},
           {R"({"x)", "unterminated string"},
           {"{\"x\ty\":{}}", "control character"},
           {R"({"x\q":{}})", "invalid escape"},
           {R"({"x\u12":{}})", "four hex digits"},
           {R"({"x\udc00":{}})", "lone low surrogate"},
           {R"({"x\ud800":{}})", "high surrogate"},
           {R"({"x\ud800\u0041":{}})", "high surrogate"},
           {"{\"x\xff\":{}}", "invalid UTF-8"},
           {"{\"x\xc0\xaf\":{}}", "invalid UTF-8"},      // overlong '/'
           {"{\"x\xed\xa0\x80\":{}}", "invalid UTF-8"},  // an encoded surrogate
           {"{\"x\xe2\x82\":{}}", "invalid UTF-8"},      // cut short
       }) {
    INFO(c.header);
    write_bytes(path, safetensors_file(c.header, std::string(4, '\0')));
    REQUIRE_THROWS_WITH(io::load_safetensors(path), Catch::Contains("h.safetensors") &&
                                                        Catch::Contains("invalid header at byte") &&
                                                        Catch::Contains(c.expected));
  }
  // The offset names the byte of the file: 8 for the length, then the header.
  write_bytes(path, safetensors_file("{\"x\":?}", ""));
  REQUIRE_THROWS_WITH(io::load_safetensors(path), Catch::Contains("at byte 13 of the file"));
}

TEST_CASE("load_safetensors rejects unsupported dtypes and inconsistent data offsets", "[safetensors]") {
  TempDir dir("safetensors");
  const std::string path = dir.file("d.safetensors");
  struct Case {
    std::string header;
    std::size_t data_bytes;
    const char* expected;
  };
  const auto entry = [](const char* name, const char* dtype, const char* shape, std::uint64_t begin, std::uint64_t end) {
    return fmt::format(R"("{}":{{"dtype":"{}","shape":{},"data_offsets":[{},{}]}})", name, dtype, shape, begin, end);
  };
  const auto one = [](const std::string& e) { return "{" + e + "}"; };
  const auto two = [](const std::string& a, const std::string& b) { return "{" + a + "," + b + "}"; };
  for (const Case& c : std::vector<Case>{
           {one(entry("x", "I32", "[1]", 0, 4)), 4, "unsupported dtype \"I32\""},
           {one(entry("x", "f32", "[1]", 0, 4)), 4, "unsupported dtype \"f32\""},
           {one(entry("x", "F32", "[2]", 0, 4)), 4, "needs 8 bytes but its data_offsets [0, 4] span 4"},
           {one(entry("x", "F32", "[1]", 4, 0)), 4, "end before they begin"},
           {one(entry("x", "F32", "[1]", 4, 8)), 8, "bytes [0, 4) of the data belong to no tensor"},
           {one(entry("x", "F32", "[1]", 0, 4)), 8, "4 trailing bytes"},
           {one(entry("x", "F32", "[1]", 0, 4)), 2, "beyond the 2 bytes of data"},
           {one(entry("x", "F32", "[2]", 18446744073709551608u, 0)), 8, "end before they begin"},
           {one(entry("x", "F64", "[4294967296,4294967296]", 0, 0)), 0, "too large"},
           {one(entry("x", "F64", "[0,4294967296,4294967296]", 0, 0)), 0, "too large"},
           {one(entry("x", "F32", "[9223372036854775807]", 0, 0)), 0, "too large"},
           {two(entry("a", "F32", "[2]", 0, 8), entry("b", "F32", "[1]", 4, 8)), 8,
            "the data of tensors \"a\" and \"b\" overlap"},
           {two(entry("a", "F32", "[1]", 0, 4), entry("b", "F32", "[1]", 0, 4)), 8, "overlap"},
           {two(entry("a", "F32", "[1]", 0, 4), entry("b", "F32", "[1]", 8, 12)), 12,
            "bytes [4, 8) of the data belong to no tensor (a gap before \"b\")"},
       }) {
    INFO(c.header);
    write_bytes(path, safetensors_file(c.header, std::string(c.data_bytes, '\0')));
    REQUIRE_THROWS_WITH(io::load_safetensors(path), Catch::Contains("d.safetensors") && Catch::Contains(c.expected));
  }

  // Header lengths over the 100 MB limit or beyond the file, checked before anything is allocated.
  write_bytes(path, length_prefix(100'000'001) + "{}");
  REQUIRE_THROWS_WITH(io::load_safetensors(path), Catch::Contains("over the limit"));
  write_bytes(path, length_prefix(std::numeric_limits<std::uint64_t>::max()) + "{}");
  REQUIRE_THROWS_WITH(io::load_safetensors(path), Catch::Contains("over the limit"));
  write_bytes(path, length_prefix(3) + "{}");
  REQUIRE_THROWS_WITH(io::load_safetensors(path), Catch::Contains("truncated"));

  REQUIRE_THROWS_WITH(io::load_safetensors(dir.file("missing.safetensors")),
                      Catch::Contains("missing.safetensors") && Catch::Contains("No such file"));
  REQUIRE_THROWS_WITH(io::load_safetensors(dir.path.string()), Catch::Contains("not a regular file"));
}

TEST_CASE("load_safetensors never crashes on corrupted bytes", "[safetensors]") {
  TempDir dir("safetensors");
  const std::string path = dir.file("fuzz.safetensors");
  const std::string whole = read_bytes(fixture("mixed.safetensors"));
  std::mt19937 random(12345);
  int loaded = 0, rejected = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string bytes = whole;
    const int flips = 1 + int(random() % 4);
    for (int i = 0; i < flips; ++i) {
      // Mostly the length and the header, where the structure is.
      const std::size_t at = random() % (trial % 4 == 0 ? bytes.size() : std::min<std::size_t>(bytes.size(), 420));
      bytes[at] = char(random() % 2 == 0 ? random() % 256 : "{}[]\",:0123456789 \\u"[random() % 20]);
    }
    write_bytes(path, bytes);
    try {
      io::read_safetensors(path);
      ++loaded;
    } catch (const Error& e) {
      ++rejected;
      REQUIRE(std::string(e.what()).find("fuzz.safetensors") != std::string::npos);
    }
  }
  CHECK(loaded + rejected == 3000);
  CHECK(rejected > 1000);
}

TEST_CASE("save_safetensors rejects empty, repeated, reserved and non-UTF-8 names", "[safetensors]") {
  TempDir dir("safetensors");
  const std::string path = dir.file("x.safetensors");
  const Tensor t = Tensor::ones(Shape{2});
  REQUIRE_THROWS_WITH(io::save_safetensors(path, {{"", t}}), Catch::Contains("save_safetensors") &&
                                                                 Catch::Contains("x.safetensors") &&
                                                                 Catch::Contains("must not be empty"));
  REQUIRE_THROWS_WITH(io::save_safetensors(path, {{"a", t}, {"b", t}, {"a", t}}),
                      Catch::Contains("the name \"a\" appears twice"));
  REQUIRE_THROWS_WITH(io::save_safetensors(path, {{"__metadata__", t}}), Catch::Contains("reserved"));
  REQUIRE_THROWS_WITH(io::save_safetensors(path, {{"a\xff", t}}), Catch::Contains("not valid UTF-8"));
  REQUIRE_THROWS_WITH(io::save_safetensors(path, {{"a", t}}, {{"k", "\xc0\xaf"}}), Catch::Contains("not valid UTF-8"));
  REQUIRE_THROWS_WITH(io::save_safetensors(path, {{"a", Tensor()}}), Catch::Contains("undefined"));
  CHECK(files_in(dir.path).empty());
}

namespace {

/// Limits the size of files this process may write, with SIGXFSZ ignored so writes past it fail with EFBIG
/// instead of killing the process; restores both when it goes out of scope.
struct FileSizeLimit {
  rlimit saved{};
  void (*saved_handler)(int);
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &saved);
    saved_handler = std::signal(SIGXFSZ, SIG_IGN);
    rlimit limited = saved;
    limited.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &limited);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &saved);
    std::signal(SIGXFSZ, saved_handler);
  }
};

}  // namespace

TEST_CASE("save_safetensors replaces the target atomically and leaves it untouched on failure", "[safetensors]") {
  TempDir dir("safetensors");
  const std::string path = dir.file("x.safetensors");
  io::save_safetensors(path, {{"a", Tensor::ones(Shape{2}, DType::f32)}});
  io::save_safetensors(path, {{"b", Tensor::full(Shape{3}, 7.0, DType::f64)}});  // overwrites
  const std::string before = read_bytes(path);
  CHECK(io::load_safetensors(path)[0].second.to_vector<double>() == std::vector<double>{7, 7, 7});
  CHECK(files_in(dir.path) == std::vector<std::string>{"x.safetensors"});

  // Writing fails half-way (the file size limit): the temporary is removed, the target keeps its bytes.
  {
    FileSizeLimit limit(64);
    REQUIRE_THROWS_WITH(io::save_safetensors(path, {{"big", Tensor::zeros(Shape{1000}, DType::f32)}}),
                        Catch::Contains("save_safetensors") && Catch::Contains("x.safetensors") &&
                            Catch::Contains("failed"));
  }
  CHECK(read_bytes(path) == before);
  CHECK(files_in(dir.path) == std::vector<std::string>{"x.safetensors"});

  // Invalid input: nothing is written.
  REQUIRE_THROWS(io::save_safetensors(path, {{"a", Tensor::ones(Shape{1})}, {"a", Tensor::ones(Shape{1})}}));
  CHECK(read_bytes(path) == before);

  // A folder that does not exist, or a path through a regular file: nothing is created.
  const std::string nowhere = dir.file("no/such/folder/y.safetensors");
  REQUIRE_THROWS_WITH(io::save_safetensors(nowhere, {}),
                      Catch::Contains("save_safetensors") && Catch::Contains(nowhere) &&
                          Catch::Contains("cannot create the temporary file"));
  REQUIRE_THROWS_WITH(io::save_safetensors(path + "/y.safetensors", {}), Catch::Contains("cannot create"));
  CHECK(read_bytes(path) == before);

  // The target is a non-empty folder: the rename fails, the temporary is removed, the folder stays.
  fs::create_directories(dir.path / "taken" / "inside");
  REQUIRE_THROWS_WITH(io::save_safetensors(dir.file("taken"), {{"a", Tensor::ones(Shape{2})}}),
                      Catch::Contains("save_safetensors") && Catch::Contains("renaming"));
  CHECK(files_in(dir.path) == std::vector<std::string>{"taken", "x.safetensors"});
  CHECK(fs::is_directory(dir.path / "taken" / "inside"));
  CHECK(read_bytes(path) == before);
}

TEST_CASE("load_safetensors bounds a header's ranks and its number of tensors", "[safetensors]") {
  TempDir dir("safetensors");
  const std::string path = dir.file("bounds.safetensors");
  const auto ones_shape = [](int rank) {
    std::string shape = "[";
    for (int i = 0; i < rank; ++i) shape += i == 0 ? "1" : ",1";
    return shape + "]";
  };
  const auto one_tensor = [&](int rank) {
    return safetensors_file(R"({"w":{"dtype":"F32","shape":)" + ones_shape(rank) + R"(,"data_offsets":[0,4]}})",
                            std::string(4, '\0'));
  };
  write_bytes(path, one_tensor(64));
  CHECK(io::load_safetensors(path).at(0).second.ndim() == 64);
  for (const int rank : {65, 5'000'000}) {  // 5 M dimensions are a 10 MB header: refused at the 65th
    write_bytes(path, one_tensor(rank));
    CHECK_THROWS_WITH(io::load_safetensors(path),
                      Catch::Contains("bounds.safetensors") && Catch::Contains("more than 64 numbers"));
  }
  // Empty tensors cost nothing in data but ~1 KB each in memory: more than 100,000 are refused.
  std::string header = "{";
  for (int i = 0; i <= 100'000; ++i)
    header += fmt::format(R"({}"t{}":{{"dtype":"F32","shape":[0],"data_offsets":[0,0]}})", i ? "," : "", i);
  write_bytes(path, safetensors_file(header + "}", ""));
  CHECK_THROWS_WITH(io::load_safetensors(path), Catch::Contains("more than 100000 tensors"));
}
