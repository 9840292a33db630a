#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "framework/autograd/tape.hpp"
#include "framework/io/npy.hpp"
#include "framework/io/safetensors.hpp"
#include "framework/ops/ops.hpp"
#include "framework/tensor/bfloat16.hpp"
#include "framework/tensor/tensor.hpp"
#include "tests/temp_files.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using loom::testing::TempDir;

TEST_CASE("bfloat16 rounds to nearest, ties to even, and widens exactly", "[bf16]") {
  CHECK(bfloat16(1.0f).bits() == 0x3f80);
  CHECK(float(bfloat16(-2.5f)) == -2.5f);
  CHECK(float(bfloat16(0.1f)) == 0.10009765625f);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: to the even one, 1. 1 + 3 * 2^-8 lies halfway between
  // 1 + 2^-7 and 1 + 2^-6: to the even one, 1 + 2^-6.
  CHECK(float(bfloat16(1.0f + 0x1p-8f)) == 1.0f);
  CHECK(float(bfloat16(1.0f + 3 * 0x1p-8f)) == 1.0f + 0x1p-6f);
  CHECK(float(bfloat16(1.0f + 0x1p-8f + 0x1p-20f)) == 1.0f + 0x1p-7f);  // above halfway: up
  // A double just above a tie rounds up, although narrowing it to float first would land on the tie.
  CHECK(float(bfloat16(1.0 + 0x1p-8 + 0x1p-40)) == 1.0f + 0x1p-7f);
  CHECK(float(bfloat16(-(1.0 + 0x1p-8 + 0x1p-40))) == -(1.0f + 0x1p-7f));
  CHECK(float(bfloat16(1.0 + 0x1p-8)) == 1.0f);
  // Overflow to infinity, infinities and NaN kept (NaN quiet, sign kept).
  CHECK(std::isinf(float(bfloat16(std::numeric_limits<float>::max()))));
  CHECK(float(bfloat16(-std::numeric_limits<float>::infinity())) == -std::numeric_limits<float>::infinity());
  const bfloat16 nan(std::numeric_limits<float>::quiet_NaN());
  CHECK(std::isnan(float(nan)));
  const bfloat16 signalling(std::numeric_limits<float>::signaling_NaN());
  CHECK(std::isnan(float(signalling)));
  CHECK((signalling.bits() & 0x0040) != 0);
  CHECK(float(bfloat16(std::int64_t(3))) == 3.0f);
  CHECK(float(bfloat16(true)) == 1.0f);
}

TEST_CASE("bf16 tensors: cast, fill, views, copies and printing", "[bf16]") {
  const Tensor x = Tensor::from_vector(std::vector<float>{1.0f, 0.1f, -3.0f, 1e-3f, 256.5f, 7.0f}, {2, 3});
  const Tensor h = ops::cast(x, DType::bf16);
  CHECK(h.dtype() == DType::bf16);
  CHECK(h.dtype() != DType::f32);
  CHECK(dtype_size(DType::bf16) == 2);
  CHECK(std::string(dtype_name(DType::bf16)) == "bf16");
  const std::vector<float> back = ops::cast(h, DType::f32).to_vector<float>();
  const std::vector<float> want{1.0f, float(bfloat16(0.1f)), -3.0f, float(bfloat16(1e-3f)), 256.0f, 7.0f};
  CHECK(back == want);
  CHECK(h.to_vector<double>()[1] == double(float(bfloat16(0.1f))));
  // Views and copies move the 2-byte elements as they are.
  const Tensor t = ops::contiguous(ops::transpose(h));
  CHECK(t.shape() == Shape{3, 2});
  CHECK(ops::cast(t, DType::f32).to_vector<float>() == std::vector<float>{want[0], want[3], want[1], want[4],
                                                                         want[2], want[5]});
  CHECK(ops::reshape(h, {6}).to_vector<float>() == want);
  CHECK(Tensor::full({3}, 0.5, DType::bf16).to_vector<float>() == std::vector<float>{0.5f, 0.5f, 0.5f});
  CHECK(ops::cast(h, DType::i64).to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 0, -3, 0, 256, 7});
  CHECK(fmt::format("{}", ops::reshape(h, {6})).find("256") != std::string::npos);
  // bf16 is storage: arithmetic on it is an error that says which dtypes the op takes.
  CHECK_THROWS_WITH(ops::add(h, h), Catch::Contains("float32 or float64") && Catch::Contains("bf16"));
  CHECK_THROWS_WITH(ops::exp(h), Catch::Contains("bf16"));
}

TEST_CASE("bf16 tensors in files: safetensors writes BF16, NumPy has none", "[bf16]") {
  const TempDir dir("bf16");
  const Tensor h = ops::cast(Tensor::from_vector(std::vector<float>{1.5f, -0.1f, 3e5f}, {3}), DType::bf16);
  const std::string path = dir.file("h.safetensors");
  io::save_safetensors(path, {{"h", h}});
  const Tensor loaded = io::load_safetensors(path).at(0).second;  // widened to float32, as every BF16 file is
  CHECK(loaded.dtype() == DType::f32);
  CHECK(loaded.to_vector<float>() == h.to_vector<float>());
  CHECK_THROWS_WITH(io::save_npy(dir.file("h.npy"), h), Catch::Contains("NumPy has no bfloat16"));
}

TEST_CASE("gradients flow through casts to bf16 and back, summed in float32", "[bf16][autograd]") {
  const Tensor x = Tensor::from_vector(std::vector<float>{0.3f, -1.2f, 2.0f}, {3});
  const Tensor w = Tensor::from_vector(std::vector<float>{0.5f, -0.25f, 3.0f}, {3});  // exact in bf16
  GradientTape tape;
  tape.watch(x);
  const Tensor h = ops::cast(x, DType::bf16);
  // h is used twice: its two gradients (bf16) are summed in float32 and rounded once.
  const Tensor y = ops::sum(ops::cast(h, DType::f32) * w + ops::cast(h, DType::f32) * w);
  const std::vector<Tensor> g = tape.gradient(y, std::vector<Tensor>{x});
  CHECK(g[0].dtype() == DType::f32);
  CHECK(g[0].to_vector<float>() == std::vector<float>{1.0f, -0.5f, 6.0f});
  // A bf16 tensor can be watched and be a source; its gradient is bf16.
  GradientTape tape2;
  tape2.watch(h);
  const Tensor z = ops::sum(ops::cast(h, DType::f32) * w);
  const std::vector<Tensor> gh = tape2.gradient(z, std::vector<Tensor>{h});
  CHECK(gh[0].dtype() == DType::bf16);
  CHECK(gh[0].to_vector<float>() == w.to_vector<float>());
}
