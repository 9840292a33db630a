#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "framework/autograd/tape.hpp"
#include "framework/ops/attention.hpp"
#include "framework/ops/ops.hpp"
#include "framework/runtime/bf16_matmul.hpp"
#include "framework/runtime/simd.hpp"
#include "tests/setting_guards.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
using ops::AttentionImpl;
using ops::AttentionOptions;

// The contract of attention on bf16 q, k and v: the float32 attention of their bf16 values. Only the score
// products read bf16 (exact products, float32 sums); softmax, P V and the flash kernels' gradients are
// float32, so the tolerance is float32's. Checked on every SIMD level and bf16 engine this machine runs (the avx512 level
// with the onednn engine multiplies with vdpbf16ps where the CPU has AVX512_BF16).

namespace {

/// x's bf16 values, exactly, in float32.
Tensor rounded(const Tensor& x) { return ops::cast(ops::cast(x, DType::bf16), DType::f32); }

struct Result {
  Tensor out, dq, dk, dv;
};

/// Attention of q, k, v (float32 holding bf16 values), run on their bf16 casts when `as_bf16`; the gradients
/// are those of the float32 tensors (a cast from bf16 passes its float32 gradient on unrounded).
Result run(const Tensor& q, const Tensor& k, const Tensor& v, AttentionOptions o, const Tensor& cotangent,
           bool as_bf16) {
  GradientTape tape;
  tape.watch({q, k, v});
  auto input = [&](const Tensor& x) { return as_bf16 ? ops::cast(x, DType::bf16) : x; };
  const Tensor out = ops::scaled_dot_product_attention(input(q), input(k), input(v), o);
  REQUIRE(out.dtype() == DType::f32);
  const auto g = tape.gradient(ops::sum(out * cotangent), {q, k, v});
  return {out, g[0], g[1], g[2]};
}

void check_matches_float32(std::int64_t heads, std::int64_t kv_heads, std::int64_t nq, std::int64_t nk,
                           std::int64_t d, std::int64_t dv, AttentionOptions options) {
  const Tensor q = rounded(randn({2, heads, nq, d}, 11, DType::f32));
  const Tensor k = rounded(randn({2, kv_heads, nk, d}, 12, DType::f32));
  const Tensor v = rounded(randn({2, kv_heads, nk, dv}, 13, DType::f32));
  const Tensor cot = randn({2, heads, nq, dv}, 14, DType::f32);
  options.impl = AttentionImpl::Math;
  const Result want = run(q, k, v, options, cot, false);
  for (const AttentionImpl impl : {AttentionImpl::Math, AttentionImpl::Flash})
    for (const std::string& isa : simd::available_isas())
      for (const std::string& engine : available_bf16_matmul_engines()) {
        INFO(fmt::format("{} {} {} H={} Hkv={} Nq={} Nk={} d={} dv={}", impl == AttentionImpl::Flash ? "flash" : "math",
                         isa, engine, heads, kv_heads, nq, nk, d, dv));
        const IsaGuard isa_guard(isa);
        const Bf16EngineGuard engine_guard(engine);
        options.impl = impl;
        const Result got = run(q, k, v, options, cot, true);
        check_same_tensors({got.out, got.dv}, {want.out, want.dv}, 1e-5);
        // The math path's q and k gradients come from the score product's backward, a bf16 product as every
        // bf16 matmul's (dS rounded to bf16); the flash kernels keep dS in float32.
        check_same_tensors({got.dq, got.dk}, {want.dq, want.dk}, impl == AttentionImpl::Flash ? 1e-5 : 1e-2);
      }
}

}  // namespace

TEST_CASE("attention on bf16 inputs is the float32 attention of their values", "[flash_attention][bf16]") {
  SECTION("plain, head_dim a multiple of the vector width") { check_matches_float32(2, 2, 70, 90, 32, 32, {}); }
  SECTION("padded head dims") { check_matches_float32(2, 2, 65, 64, 24, 8, {}); }
  SECTION("one query, one key, head_dim 1 (an odd depth: half a pair)") { check_matches_float32(1, 1, 1, 1, 1, 3, {}); }
  SECTION("no keys") { check_matches_float32(1, 1, 7, 0, 16, 16, {}); }
  SECTION("causal") { check_matches_float32(2, 2, 130, 130, 16, 16, {.causal = true}); }
  SECTION("sliding window") { check_matches_float32(1, 1, 100, 100, 32, 16, {.sliding_window = 17}); }
  SECTION("grouped-query heads and a mask") {
    const Tensor mask = ops::greater(randn({1, 1, 66, 80}, 15, DType::f32), Tensor::scalar(-0.5, DType::f32));
    check_matches_float32(4, 2, 66, 80, 32, 32, {.mask = mask, .scale = 0.3});
  }
}

TEST_CASE("flash probabilities of bf16 inputs are float32 and match the math path", "[flash_attention][bf16]") {
  const Tensor q = rounded(randn({1, 2, 80, 32}, 21, DType::f32));
  const Tensor k = rounded(randn({1, 2, 70, 32}, 22, DType::f32));
  const Tensor v = rounded(randn({1, 2, 70, 16}, 23, DType::f32));
  const auto want = ops::scaled_dot_product_attention_with_probabilities(q, k, v, {.causal = true, .impl = AttentionImpl::Math});
  for (const std::string& isa : simd::available_isas()) {
    INFO(isa);
    const IsaGuard guard(isa);
    const auto got = ops::scaled_dot_product_attention_with_probabilities(
        ops::cast(q, DType::bf16), ops::cast(k, DType::bf16), ops::cast(v, DType::bf16),
        {.causal = true, .impl = AttentionImpl::Flash});
    REQUIRE(got.probabilities.dtype() == DType::f32);
    check_same_tensors({got.output, got.probabilities}, {want.output, want.probabilities}, 1e-5);
  }
}

TEST_CASE("attention refuses mixed bf16 and float inputs", "[flash_attention][bf16]") {
  const Tensor q = ops::cast(randn({1, 1, 8, 16}, 31, DType::f32), DType::bf16);
  const Tensor k = randn({1, 1, 8, 16}, 32, DType::f32);
  CHECK_THROWS_WITH(ops::scaled_dot_product_attention(q, k, k),
                    Catch::Contains("scaled_dot_product_attention") && Catch::Contains("all bf16") &&
                        Catch::Contains("q bf16, k f32"));
}

TEST_CASE("a bf16 source's attention gradient comes back as bf16", "[flash_attention][bf16]") {
  const Tensor q = ops::cast(randn({1, 2, 64, 16}, 41, DType::f32), DType::bf16);
  GradientTape tape;
  tape.watch(q);
  const Tensor out = ops::scaled_dot_product_attention(q, q, q, {.impl = AttentionImpl::Flash});
  const Tensor g = tape.gradient(ops::sum(out), {q})[0];
  CHECK(g.dtype() == DType::bf16);
  CHECK(g.shape() == q.shape());
}
