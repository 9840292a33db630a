#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "framework/io/npy.hpp"
#include "framework/ops/ops.hpp"
#include "tests/temp_files.hpp"

using namespace loom;
using namespace loom::testing;
namespace fs = std::filesystem;

namespace {

std::string fixture(const std::string& name) { return std::string(LOOM_FIXTURES_DIR) + "/npy/" + name; }

/// A .npy file with the given header dict (padded as NumPy does) and raw data bytes.
std::string npy_file(const std::string& dict, const std::string& data, int version = 1) {
  const std::size_t length_field = version == 1 ? 2 : 4;
  std::string header = dict;
  while ((10 - 2 + length_field + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string bytes = std::string("\x93NUMPY", 6) + char(version) + char(0);
  for (std::size_t i = 0; i < length_field; ++i) bytes += char((header.size() >> (8 * i)) & 0xff);
  return bytes + header + data;
}

std::string f32_bytes(const std::vector<float>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  return names;
}

}  // namespace

TEST_CASE("save_npy and load_npy round-trip f32, f64, i64 and bool", "[npy]") {
  TempDir dir("npy");
  const std::string path = dir.file("x.npy");

  SECTION("f32 2x3") {
    Tensor t = Tensor::from_vector(std::vector<float>{1.5f, -2.f, 3.25f, 0.f, 1e-30f, 7.f}, Shape{2, 3});
    io::save_npy(path, t);
    Tensor back = io::load_npy(path);
    CHECK(back.dtype() == DType::f32);
    CHECK(back.shape() == Shape{2, 3});
    CHECK(back.to_vector<float>() == t.to_vector<float>());
  }
  SECTION("f64") {
    Tensor t = Tensor::randn(Shape{3, 1, 4}, DType::f64, /*seed=*/3);
    io::save_npy(path, t);
    Tensor back = io::load_npy(path);
    CHECK(back.dtype() == DType::f64);
    CHECK(back.shape() == Shape{3, 1, 4});
    CHECK(back.to_vector<double>() == t.to_vector<double>());
  }
  SECTION("i64") {
    Tensor t = Tensor::from_vector(std::vector<std::int64_t>{-1, 0, 1, std::int64_t(1) << 62}, Shape{4});
    io::save_npy(path, t);
    Tensor back = io::load_npy(path);
    CHECK(back.dtype() == DType::i64);
    CHECK(back.shape() == Shape{4});
    CHECK(back.to_vector<std::int64_t>() == t.to_vector<std::int64_t>());
  }
  SECTION("bool") {
    Tensor t = Tensor::from_vector(std::vector<bool>{true, false, true, true, false, false}, Shape{3, 2});
    io::save_npy(path, t);
    Tensor back = io::load_npy(path);
    CHECK(back.dtype() == DType::boolean);
    CHECK(back.shape() == Shape{3, 2});
    CHECK(back.to_vector<bool>() == t.to_vector<bool>());
  }
  SECTION("scalar shape ()") {
    io::save_npy(path, Tensor::scalar(-4.5, DType::f64));
    Tensor back = io::load_npy(path);
    CHECK(back.shape() == Shape{});
    CHECK(back.item<double>() == -4.5);
  }
  SECTION("empty shape (0, 3)") {
    io::save_npy(path, Tensor::zeros(Shape{0, 3}, DType::f32));
    Tensor back = io::load_npy(path);
    CHECK(back.shape() == Shape{0, 3});
    CHECK(back.numel() == 0);
  }
}

TEST_CASE("save_npy writes a transposed view in the row-major order of its values", "[npy]") {
  TempDir dir("npy");
  Tensor t = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, Shape{2, 3}).transpose();
  REQUIRE_FALSE(t.is_contiguous());
  io::save_npy(dir.file("t.npy"), t);
  Tensor back = io::load_npy(dir.file("t.npy"));
  CHECK(back.shape() == Shape{3, 2});
  CHECK(back.to_vector<double>() == std::vector<double>{1, 4, 2, 5, 3, 6});

  // A strided slice of an offset view, and a broadcast (zero-stride) view.
  Tensor base = Tensor::arange(0.0, 12.0, 1.0, DType::f32).reshape({3, 4});
  io::save_npy(dir.file("s.npy"), base.slice(1, 1, 4, 2).slice(0, 1, 3));
  CHECK(io::load_npy(dir.file("s.npy")).to_vector<float>() == std::vector<float>{5, 7, 9, 11});
  io::save_npy(dir.file("b.npy"), Tensor::from_vector(std::vector<float>{1, 2}).broadcast_to({3, 2}));
  CHECK(io::load_npy(dir.file("b.npy")).to_vector<float>() == std::vector<float>{1, 2, 1, 2, 1, 2});
}

TEST_CASE("save_npy writes NumPy's format 1.0 layout", "[npy]") {
  TempDir dir("npy");
  io::save_npy(dir.file("x.npy"), Tensor::zeros(Shape{2, 3}, DType::f32));
  const std::string bytes = read_bytes(dir.file("x.npy"));
  REQUIRE(bytes.size() > 10);
  CHECK(bytes.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
  const std::size_t header_size = std::size_t(std::uint8_t(bytes[8])) | std::size_t(std::uint8_t(bytes[9])) << 8;
  const std::size_t data_start = 10 + header_size;
  CHECK(data_start % 64 == 0);
  CHECK(bytes.size() == data_start + 6 * 4);
  const std::string header = bytes.substr(10, header_size);
  CHECK(header.rfind("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 0) == 0);
  CHECK(header.back() == '\n');

  io::save_npy(dir.file("v.npy"), Tensor::zeros(Shape{5}, DType::boolean));
  CHECK(read_bytes(dir.file("v.npy")).find("{'descr': '|b1', 'fortran_order': False, 'shape': (5,), }") == 10);
  io::save_npy(dir.file("s.npy"), Tensor::scalar(1, DType::i64));
  CHECK(read_bytes(dir.file("s.npy")).find("{'descr': '<i8', 'fortran_order': False, 'shape': (), }") == 10);
}

TEST_CASE("load_npy reads files written by NumPy", "[npy]") {
  Tensor a = io::load_npy(fixture("f32_2x3.npy"));
  CHECK(a.dtype() == DType::f32);
  CHECK(a.shape() == Shape{2, 3});
  CHECK(a.to_vector<float>() == std::vector<float>{-1.25f, -0.75f, -0.25f, 0.25f, 0.75f, 1.25f});

  Tensor s = io::load_npy(fixture("f64_scalar.npy"));
  CHECK(s.dtype() == DType::f64);
  CHECK(s.shape() == Shape{});
  CHECK(s.item<double>() == 3.25);

  Tensor i = io::load_npy(fixture("i64_v2.npy"));  // format 2.0
  CHECK(i.dtype() == DType::i64);
  CHECK(i.shape() == Shape{4, 1});
  CHECK(i.to_vector<std::int64_t>() == std::vector<std::int64_t>{-3, 0, 7, std::int64_t(1) << 40});

  Tensor b = io::load_npy(fixture("bool_v3.npy"));  // format 3.0
  CHECK(b.dtype() == DType::boolean);
  CHECK(b.to_vector<bool>() == std::vector<bool>{true, false, false, true, true});
}

TEST_CASE("load_npy rejects big-endian and Fortran-ordered files", "[npy]") {
  REQUIRE_THROWS_WITH(io::load_npy(fixture("f32_big_endian.npy")),
                      Catch::Contains("f32_big_endian.npy") && Catch::Contains("big-endian") &&
                          Catch::Contains(">f4"));
  REQUIRE_THROWS_WITH(io::load_npy(fixture("f64_fortran.npy")),
                      Catch::Contains("f64_fortran.npy") && Catch::Contains("Fortran"));
}

TEST_CASE("load_npy rejects missing files, bad magic, unsupported versions and dtypes", "[npy]") {
  TempDir dir("npy");
  REQUIRE_THROWS_WITH(io::load_npy(dir.file("missing.npy")),
                      Catch::Contains("load_npy") && Catch::Contains("missing.npy") &&
                          Catch::Contains("No such file"));
  REQUIRE_THROWS_WITH(io::load_npy(dir.path.string()), Catch::Contains("not a regular file"));

  const std::string path = dir.file("bad.npy");
  const std::string valid = npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", f32_bytes({1, 2}));
  std::string bad = valid;
  bad[1] = 'X';
  write_bytes(path, bad);
  REQUIRE_THROWS_WITH(io::load_npy(path), Catch::Contains("bad.npy") && Catch::Contains("magic"));
  write_bytes(path, "PK\x03\x04 this is a zip file, not an array");
  REQUIRE_THROWS_WITH(io::load_npy(path), Catch::Contains("bad.npy") && Catch::Contains("magic"));

  for (auto [major, minor] : {std::pair{4, 0}, std::pair{0, 0}, std::pair{1, 1}}) {
    bad = valid;
    bad[6] = char(major);
    bad[7] = char(minor);
    write_bytes(path, bad);
    REQUIRE_THROWS_WITH(io::load_npy(path), Catch::Contains("bad.npy") &&
                                                Catch::Contains(fmt::format("version {}.{}", major, minor)));
  }

  for (const char* descr : {"<i4", "<f2", "|u1", "<c8", "f4"}) {
    write_bytes(path, npy_file(fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': (1,), }}", descr),
                               std::string(16, '\0')));
    REQUIRE_THROWS_WITH(io::load_npy(path), Catch::Contains("bad.npy") && Catch::Contains("unsupported dtype") &&
                                                Catch::Contains(descr));
  }
}

TEST_CASE("load_npy rejects truncated files", "[npy]") {
  TempDir dir("npy");
  const std::string path = dir.file("cut.npy");
  const std::string whole = read_bytes(fixture("f32_2x3.npy"));
  const std::size_t data_start = whole.size() - 6 * 4;
  struct Cut {
    std::size_t size;
    const char* expected;
  };
  for (Cut cut : {Cut{0, "too short"}, Cut{5, "too short"}, Cut{9, "too short"}, Cut{40, "truncated"},
                  Cut{data_start - 1, "truncated"}, Cut{data_start, "truncated"}, Cut{whole.size() - 1, "truncated"}}) {
    INFO("cut at " << cut.size);
    write_bytes(path, whole.substr(0, cut.size));
    REQUIRE_THROWS_WITH(io::load_npy(path), Catch::Contains("cut.npy") && Catch::Contains(cut.expected));
  }
  // A version 2.0 file cut inside its 4-byte header length.
  write_bytes(path, read_bytes(fixture("i64_v2.npy")).substr(0, 11));
  REQUIRE_THROWS_WITH(io::load_npy(path), Catch::Contains("cut.npy") && Catch::Contains("truncated"));
}

TEST_CASE("load_npy ignores bytes after the data, as np.load does", "[npy]") {
  TempDir dir("npy");
  const std::string path = dir.file("extra.npy");
  write_bytes(path, read_bytes(fixture("f32_2x3.npy")) + "trailing bytes");
  CHECK(io::load_npy(path).to_vector<float>() == std::vector<float>{-1.25f, -0.75f, -0.25f, 0.25f, 0.75f, 1.25f});
}

TEST_CASE("load_npy parses any well-formed header dict", "[npy]") {
  TempDir dir("npy");
  const std::string path = dir.file("h.npy");
  const std::string data = f32_bytes({1, 2, 3, 4, 5, 6});
  for (const char* dict : {
           "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
           "{'shape': (2, 3), 'descr': '<f4', 'fortran_order': False}",
           "{ 'fortran_order' :False,'shape':(2,3,),\"descr\":\"<f4\" , }",
           "\t{'descr':'<f4',\n'fortran_order': False,\r\n'shape': ( 2 , 3 )}",
       }) {
    INFO(dict);
    write_bytes(path, npy_file(dict, data));
    Tensor t = io::load_npy(path);
    CHECK(t.shape() == Shape{2, 3});
    CHECK(t.to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
  }
  write_bytes(path, npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", data));
  CHECK(io::load_npy(path).shape() == Shape{6});
  write_bytes(path, npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': ()}", data));
  CHECK(io::load_npy(path).shape() == Shape{});
  // Bool bytes other than 0 and 1 read as true.
  write_bytes(path, npy_file("{'descr': '|b1', 'fortran_order': False, 'shape': (3,)}", std::string("\x00\x01\x07", 3)));
  CHECK(io::load_npy(path).to_vector<bool>() == std::vector<bool>{false, true, true});
}

TEST_CASE("load_npy rejects malformed headers", "[npy]") {
  TempDir dir("npy");
  const std::string path = dir.file("h.npy");
  struct Case {
    const char* dict;
    const char* expected;
  };
  for (Case c : {
           Case{"", "dict literal"},
           Case{"['descr', '<f4']", "dict literal"},
           Case{"{'descr': '<f4', 'fortran_order': False}", "must have the keys"},
           Case{"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}", "unexpected key 'extra'"},
           Case{"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", "appears twice"},
           Case{"{'descr': '<f4' 'fortran_order': False, 'shape': (1,)}", "expected ',' or '}'"},
           Case{"{'descr': '<f4', 'fortran_order': False, 'shape': (1,),", "expected a quoted key"},
           Case{"{'descr: '<f4', 'fortran_order': False, 'shape': (1,)}", "expected ':'"},
           Case{"{'descr': '<f4", "unterminated string"},
           Case{"{'descr': '<\\f4', 'fortran_order': False, 'shape': (1,)}", "escape sequences"},
           Case{"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}", "structured dtypes"},
           Case{"{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}", "True or False"},
           Case{"{'descr': '<f4', 'fortran_order': False, 'shape': [1]}", "expected a tuple"},
           Case{"{'descr': '<f4', 'fortran_order': False, 'shape': (1)}", "must be a tuple"},
           Case{"{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3)}", "negative dimension"},
           Case{"{'descr': '<f4', 'fortran_order': False, 'shape': (1.5,)}", "expected ',' or ')'"},
           Case{"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", "64 bits"},
           Case{"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} junk", "after the dict"},
       }) {
    INFO(c.dict);
    write_bytes(path, npy_file(c.dict, std::string(64, '\0')));
    REQUIRE_THROWS_WITH(io::load_npy(path), Catch::Contains("h.npy") && Catch::Contains("malformed header") &&
                                                Catch::Contains(c.expected));
  }
}

TEST_CASE("load_npy checks the promised size against the file before allocating", "[npy]") {
  TempDir dir("npy");
  const std::string path = dir.file("big.npy");
  // 4 TB promised by a 128-byte file: rejected as truncated, nothing allocated.
  write_bytes(path, npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 1000000)}", ""));
  REQUIRE_THROWS_WITH(io::load_npy(path), Catch::Contains("big.npy") && Catch::Contains("truncated") &&
                                              Catch::Contains("[1000000, 1000000]"));
  // Dimensions whose product overflows 64 bits.
  write_bytes(path, npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296)}", ""));
  REQUIRE_THROWS_WITH(io::load_npy(path), Catch::Contains("big.npy") && Catch::Contains("too large"));
  write_bytes(path, npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (0, 4294967296, 4294967296)}", ""));
  REQUIRE_THROWS_WITH(io::load_npy(path), Catch::Contains("too large"));
  // A header length beyond the end of the file.
  std::string bytes = npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", f32_bytes({1}), 2);
  bytes[11] = char(0x7f);
  write_bytes(path, bytes);
  REQUIRE_THROWS_WITH(io::load_npy(path), Catch::Contains("big.npy") && Catch::Contains("truncated"));
}

TEST_CASE("save_npy replaces the target atomically and cleans up on failure", "[npy]") {
  TempDir dir("npy");
  const std::string path = dir.file("x.npy");
  io::save_npy(path, Tensor::ones(Shape{2}, DType::f32));
  io::save_npy(path, Tensor::full(Shape{3}, 7.0, DType::f64));  // overwrites
  CHECK(io::load_npy(path).to_vector<double>() == std::vector<double>{7, 7, 7});
  CHECK(files_in(dir.path) == std::vector<std::string>{"x.npy"});

  // A folder that does not exist: nothing is created.
  const std::string nowhere = dir.file("no/such/folder/y.npy");
  REQUIRE_THROWS_WITH(io::save_npy(nowhere, Tensor::ones(Shape{2})),
                      Catch::Contains("save_npy") && Catch::Contains(nowhere));

  // The target is a non-empty folder: the rename fails, the temporary is removed, the folder stays.
  fs::create_directories(dir.path / "taken" / "inside");
  REQUIRE_THROWS_WITH(io::save_npy(dir.file("taken"), Tensor::ones(Shape{2})),
                      Catch::Contains("save_npy") && Catch::Contains("taken") && Catch::Contains("renaming"));
  auto names = files_in(dir.path);
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"taken", "x.npy"});
  CHECK(fs::is_directory(dir.path / "taken" / "inside"));

  REQUIRE_THROWS_WITH(io::save_npy(path, Tensor()), Catch::Contains("save_npy") && Catch::Contains("undefined"));
}

TEST_CASE("load_npy accepts 64 dimensions and refuses more, as NumPy", "[npy]") {
  TempDir dir("npy");
  const std::string path = dir.file("rank.npy");
  const auto ones_shape = [](int rank) {
    std::string shape = "(";
    for (int i = 0; i < rank; ++i) shape += "1,";
    return shape + ")";
  };
  write_bytes(path, npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': " + ones_shape(64) + ", }",
                             f32_bytes({2.5f})));
  const Tensor t = io::load_npy(path);
  CHECK(t.ndim() == 64);
  CHECK(t.item<float>() == 2.5f);
  // 100,000 dimensions stop at the 65th: nothing is built from the rest.
  for (const int rank : {65, 100'000}) {
    write_bytes(path, npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': " + ones_shape(rank) + ", }",
                               f32_bytes({2.5f})));
    CHECK_THROWS_WITH(io::load_npy(path), Catch::Contains("rank.npy") && Catch::Contains("more than 64 dimensions"));
  }
  CHECK_THROWS_WITH(io::save_npy(path, Tensor::ones(Shape(65, 1))), Catch::Contains("more than 64 dimensions"));
}
