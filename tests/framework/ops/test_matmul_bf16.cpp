#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "framework/runtime/bf16_matmul.hpp"
#include "framework/runtime/blas.hpp"
#include "tests/setting_guards.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
using Catch::Contains;

// The contract of a bf16 product, on every engine this machine runs: the float32 product of the operands'
// bf16 values, accumulated in float32. Only the order of the float32 additions may differ, so the tolerance
// is float32's, not bf16's.

namespace {

Tensor bf16(const Tensor& x) { return ops::cast(x, DType::bf16); }
/// x's bf16 values, exactly, in float32.
Tensor rounded(const Tensor& x) { return ops::cast(bf16(x), DType::f32); }

/// got equals want within `tol` of want's largest magnitude.
void check_near(const Tensor& got, const Tensor& want, double tol) { check_same_tensors({got}, {want}, tol); }

}  // namespace

TEST_CASE("bf16 matmul engines: the default is named and a bad name is refused", "[bf16][linalg]") {
  const std::vector<std::string> engines = available_bf16_matmul_engines();
  REQUIRE(!engines.empty());
  CHECK(std::find(engines.begin(), engines.end(), "float32") != engines.end());
  CHECK_THROWS_WITH(set_bf16_matmul_engine("amx"), Contains("unknown bf16 matmul engine 'amx'"));
}

TEST_CASE("bf16 matmul equals the float32 product of the bf16 values, on every engine", "[bf16][linalg]") {
  for (const std::string& engine : available_bf16_matmul_engines()) {
    SECTION(engine) {
      const Bf16EngineGuard guard(engine);
      const Tensor a = randn({37, 70}, 1, DType::f32), b = randn({70, 45}, 2, DType::f32);
      const Tensor c = ops::matmul(bf16(a), bf16(b));
      CHECK(c.dtype() == DType::f32);
      check_near(c, ops::matmul(rounded(a), rounded(b)), 1e-5);
      // Transposed views in place, a broadcast batch, 1-D operands.
      const Tensor at = randn({70, 37}, 3, DType::f32), bt = randn({45, 70}, 4, DType::f32);
      check_near(ops::matmul(ops::transpose(bf16(at)), ops::transpose(bf16(bt))),
                 ops::matmul(ops::transpose(rounded(at)), ops::transpose(rounded(bt))), 1e-5);
      const Tensor stack = randn({3, 5, 9}, 5, DType::f32), shared = randn({9, 4}, 6, DType::f32);
      check_near(ops::matmul(bf16(stack), bf16(shared)), ops::matmul(rounded(stack), rounded(shared)), 1e-5);
      const Tensor batched = randn({2, 1, 9, 6}, 7, DType::f32);
      check_near(ops::matmul(bf16(stack), bf16(batched)), ops::matmul(rounded(stack), rounded(batched)), 1e-5);
      const Tensor v = randn({9}, 8, DType::f32);
      check_near(ops::matmul(bf16(v), bf16(shared)), ops::matmul(rounded(v), rounded(shared)), 1e-5);
      // Products large enough to be cut into one block per thread, which run at once: each needs its own
      // scratch memory (oneDNN's shared one gave garbage at 512 x 64 @ 64 x 128).
      for (const auto& [m, k, n] : {std::array<std::int64_t, 3>{300, 256, 200}, {512, 64, 128}, {1024, 256, 512}}) {
        INFO(m << " x " << k << " @ " << k << " x " << n);
        const Tensor big_a = randn({m, k}, 9, DType::f32), big_b = randn({k, n}, 10, DType::f32);
        check_near(ops::matmul(bf16(big_a), bf16(big_b)), ops::matmul(rounded(big_a), rounded(big_b)), 1e-5);
        const Tensor big_bt = randn({n, k}, 11, DType::f32);
        check_near(ops::matmul(bf16(big_a), ops::transpose(bf16(big_bt))),
                   ops::matmul(rounded(big_a), ops::transpose(rounded(big_bt))), 1e-5);
      }
      // An empty sum is zeros.
      const Tensor empty = ops::matmul(bf16(Tensor::zeros({2, 0})), bf16(Tensor::zeros({0, 3})));
      CHECK(empty.to_vector<float>() == std::vector<float>(6, 0.0f));
    }
  }
}

TEST_CASE("bf16 dense and einsum: a float32 bias onto a bf16 product", "[bf16][linalg]") {
  for (const std::string& engine : available_bf16_matmul_engines()) {
    SECTION(engine) {
      const Bf16EngineGuard guard(engine);
      const Tensor x = randn({4, 6, 32}, 11, DType::f32), k = randn({32, 20}, 12, DType::f32);
      const Tensor bias = randn({20}, 13, DType::f32);
      const Tensor y = ops::dense(bf16(x), bf16(k), bias);
      CHECK(y.dtype() == DType::f32);
      check_near(y, ops::dense(rounded(x), rounded(k), bias), 1e-5);
      check_near(ops::dense(bf16(x), bf16(k), Tensor()), ops::dense(rounded(x), rounded(k), Tensor()), 1e-5);
      const Tensor proj = randn({32, 4, 5}, 14, DType::f32);
      check_near(ops::einsum("abc,cde->abde", bf16(x), bf16(proj)),
                 ops::einsum("abc,cde->abde", rounded(x), rounded(proj)), 1e-5);
      CHECK_THROWS_WITH(ops::dense(bf16(x), bf16(k), bf16(bias)), Contains("float32 bias"));
    }
  }
}

TEST_CASE("bf16 matmul gradients: bf16 products of the output gradient, within bf16's precision", "[bf16][linalg]") {
  for (const std::string& engine : available_bf16_matmul_engines()) {
    SECTION(engine) {
      const Bf16EngineGuard guard(engine);
      const Tensor a = randn({3, 8, 16}, 15, DType::f32), b = randn({16, 10}, 16, DType::f32);
      const Tensor w = randn({3, 8, 10}, 17, DType::f32);
      GradientTape tape;
      tape.watch(std::vector<Tensor>{a, b});
      const Tensor loss = ops::sum(ops::matmul(bf16(a), bf16(b)) * w);
      const std::vector<Tensor> g = tape.gradient(loss, std::vector<Tensor>{a, b});
      CHECK(g[0].dtype() == DType::f32);
      CHECK(g[1].dtype() == DType::f32);
      // The float32 gradients of the same loss; bf16 rounds each operand and result of the backward products
      // to 8 significant bits (relative 2^-8 each).
      GradientTape reference;
      reference.watch(std::vector<Tensor>{a, b});
      const Tensor want = ops::sum(ops::matmul(rounded(a), rounded(b)) * w);
      const std::vector<Tensor> r = reference.gradient(want, std::vector<Tensor>{a, b});
      check_near(g[0], r[0], 2e-2);
      check_near(g[1], r[1], 2e-2);
      // Through dense, the bias's gradient stays float32 and exact.
      const Tensor k = randn({16, 10}, 18, DType::f32), bias = randn({10}, 19, DType::f32);
      GradientTape dense_tape;
      dense_tape.watch(std::vector<Tensor>{a, k, bias});
      const Tensor dense_loss = ops::sum(ops::dense(bf16(a), bf16(k), bias) * w);
      const std::vector<Tensor> gd = dense_tape.gradient(dense_loss, std::vector<Tensor>{a, k, bias});
      check_near(gd[2], ops::sum(w, {0, 1}), 1e-6);
      check_near(gd[1], r[1], 2e-2);
    }
  }
}

TEST_CASE("bf16 matmul refuses mixed operand dtypes and other dtypes", "[bf16][linalg]") {
  const Tensor a = randn({2, 3}, 20, DType::f32);
  CHECK_THROWS_WITH(ops::matmul(bf16(a), ops::transpose(a)), Contains("dtypes differ") && Contains("bf16"));
  CHECK_THROWS_WITH(ops::matmul(Tensor::zeros({2, 2}, DType::i64), Tensor::zeros({2, 2}, DType::i64)),
                    Contains("float32, float64 or bf16"));
}
