#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "framework/autograd/gradcheck.hpp"
#include "framework/autograd/tape.hpp"
#include "framework/ops/attention.hpp"
#include "framework/ops/ops.hpp"
#include "framework/runtime/simd.hpp"
#include "tests/setting_guards.hpp"

using namespace loom;
using loom::testing::IsaGuard;
using ops::AttentionImpl;
using ops::AttentionOptions;

namespace {

AttentionOptions with_impl(AttentionOptions o, AttentionImpl impl) {
  o.impl = impl;
  return o;
}

/// |a - b| <= tol * (|b| + max(1, max |b|)): relative, with the tensor's scale as the floor for values near
/// zero (a gradient that is exactly 0 in one path is a rounding residue in the other).
void require_close(const Tensor& actual, const Tensor& expected, double tol) {
  const auto a = actual.to_vector<double>(), e = expected.to_vector<double>();
  REQUIRE(a.size() == e.size());
  double scale = 1;
  for (double x : e) scale = std::max(scale, std::abs(x));
  for (std::size_t n = 0; n < a.size(); ++n) {
    INFO("element " << n << " of " << a.size() << ": " << a[n] << " vs " << e[n]);
    REQUIRE(std::isfinite(a[n]));
    REQUIRE(std::abs(a[n] - e[n]) <= tol * (std::abs(e[n]) + scale));
  }
}

struct Result {
  Tensor out, dq, dk, dv;
};

Result run(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o, const Tensor& cotangent) {
  GradientTape tape;
  tape.watch({q, k, v});
  const Tensor out = ops::scaled_dot_product_attention(q, k, v, o);
  const auto g = tape.gradient(ops::sum(out * cotangent), {q, k, v});
  return {out, g[0], g[1], g[2]};
}

/// Flash against Math, forward and dq/dk/dv, on every SIMD level this machine has, in both dtypes.
void check_flash_matches_math(std::int64_t B, std::int64_t H, std::int64_t nq, std::int64_t nk, std::int64_t d,
                              std::int64_t dv, const AttentionOptions& options) {
  for (DType dtype : {DType::f32, DType::f64}) {
    const double tol = dtype == DType::f32 ? 1e-5 : 1e-12;
    const Tensor q = Tensor::randn({B, H, nq, d}, dtype, 101);
    const Tensor k = Tensor::randn({B, H, nk, d}, dtype, 102);
    const Tensor v = Tensor::randn({B, H, nk, dv}, dtype, 103);
    const Tensor cot = Tensor::randn({B, H, nq, dv}, dtype, 104);
    const Result math = run(q, k, v, with_impl(options, AttentionImpl::Math), cot);
    for (const std::string& isa : simd::available_isas()) {
      INFO(fmt::format("{} {} B={} H={} Nq={} Nk={} d={} dv={}", isa, dtype, B, H, nq, nk, d, dv));
      IsaGuard guard(isa);
      const Result flash = run(q, k, v, with_impl(options, AttentionImpl::Flash), cot);
      require_close(flash.out, math.out, tol);
      require_close(flash.dq, math.dq, tol);
      require_close(flash.dk, math.dk, tol);
      require_close(flash.dv, math.dv, tol);
    }
  }
}

Tensor pattern_mask(std::int64_t nq, std::int64_t nk) {
  std::vector<bool> m;
  for (std::int64_t i = 0; i < nq; ++i)
    for (std::int64_t j = 0; j < nk; ++j) m.push_back((i * 7 + j * 3) % 5 != 0);
  return Tensor::from_vector(m, Shape{nq, nk});
}

}  // namespace

TEST_CASE("flash_attention matches math on sizes no tile divides", "[flash_attention]") {
  SECTION("Nq=37, Nk=53, d=16, no mask") { check_flash_matches_math(2, 3, 37, 53, 16, 16, {}); }
  SECTION("causal") { check_flash_matches_math(1, 2, 37, 53, 16, 16, {.causal = true}); }
  SECTION("causal with Nq > Nk") { check_flash_matches_math(1, 2, 70, 45, 16, 16, {.causal = true}); }
  SECTION("boolean mask [Nq, Nk] and a custom scale") {
    check_flash_matches_math(2, 2, 37, 53, 16, 16, {.mask = pattern_mask(37, 53), .scale = 0.3});
  }
  SECTION("float key mask [B, 1, 1, Nk]") {
    std::vector<float> m;
    for (int n = 0; n < 2 * 53; ++n) m.push_back(n % 4 == 1 ? 0.0f : 1.0f);
    check_flash_matches_math(2, 2, 37, 53, 16, 16, {.mask = Tensor::from_vector(m, Shape{2, 1, 1, 53})});
  }
  SECTION("sliding window, alone and with causal") {
    check_flash_matches_math(1, 2, 150, 150, 16, 16, {.sliding_window = 9});
    check_flash_matches_math(1, 2, 150, 130, 16, 16, {.causal = true, .sliding_window = 70});
  }
  SECTION("band edges at every offset: the kernels compute only the band, in blocks of rows and vectors") {
    for (const std::int64_t w : {1, 3, 5, 37, 64, 66})
      for (const bool causal : {false, true})
        check_flash_matches_math(1, 1, 131, 157, 16, 16, {.causal = causal, .sliding_window = w});
  }
  SECTION("head dims not a multiple of the vector width, d != dv") {
    check_flash_matches_math(1, 2, 37, 53, 24, 40, {.causal = true});
    check_flash_matches_math(1, 1, 19, 21, 3, 5, {});
  }
  SECTION("decoding: Nq = 1") {
    check_flash_matches_math(2, 2, 1, 53, 16, 16, {});
    check_flash_matches_math(2, 2, 1, 53, 16, 16, {.causal = true});
  }
  SECTION("N = 300, d = 64, causal, on several threads") {
    check_flash_matches_math(1, 3, 300, 300, 64, 64, {.causal = true});
  }
  SECTION("many query blocks per head: blocks grouped over shared key tiles") {
    check_flash_matches_math(2, 4, 600, 530, 16, 16, {});
    check_flash_matches_math(2, 4, 600, 600, 16, 16, {.mask = pattern_mask(600, 600), .causal = true,
                                                      .sliding_window = 150});
  }
  SECTION("head_dim 256") { check_flash_matches_math(1, 1, 40, 70, 256, 256, {}); }
}

TEST_CASE("flash_attention: fully masked rows give zeros and zero gradients, never NaN", "[flash_attention]") {
  // Rows 5..9 of batch 0 attend nothing; batch 1 attends nothing at all.
  const std::int64_t nq = 37, nk = 53;
  std::vector<bool> m(std::size_t(2 * nq * nk), true);
  for (std::int64_t i = 5; i < 10; ++i)
    for (std::int64_t j = 0; j < nk; ++j) m[std::size_t(i * nk + j)] = false;
  for (std::int64_t n = nq * nk; n < 2 * nq * nk; ++n) m[std::size_t(n)] = false;
  const Tensor mask = Tensor::from_vector(m, Shape{2, 1, nq, nk});
  check_flash_matches_math(2, 2, nq, nk, 16, 16, {.mask = mask});
  // A window with more queries than keys leaves late queries empty too.
  check_flash_matches_math(1, 1, 90, 20, 16, 16, {.sliding_window = 30});
  const Tensor q = Tensor::randn({2, 2, nq, 16}, DType::f32, 5) * 100.0;
  const Tensor k = Tensor::randn({2, 2, nk, 16}, DType::f32, 6) * 100.0;
  const Tensor out = ops::scaled_dot_product_attention(q, k, k, {.mask = mask, .impl = AttentionImpl::Flash});
  const auto o = out.to_vector<float>();
  for (std::size_t n = std::size_t(2 * nq * 16); n < o.size(); ++n) REQUIRE(o[n] == 0.0f);
}

TEST_CASE("flash_attention: gradcheck in float64", "[flash_attention]") {
  const Tensor q = Tensor::randn({1, 2, 5, 3}, DType::f64, 31);
  const Tensor k = Tensor::randn({1, 2, 7, 3}, DType::f64, 32);
  const Tensor v = Tensor::randn({1, 2, 7, 2}, DType::f64, 33);
  auto flash = [](AttentionOptions options) {
    options.impl = AttentionImpl::Flash;
    return [options](const std::vector<Tensor>& in) {
      return ops::scaled_dot_product_attention(in[0], in[1], in[2], options);
    };
  };
  std::vector<bool> m(35, true);
  m[7] = m[8] = m[9] = false;  // query 1 keeps only keys 0..1 of its causal range minus these
  const Tensor mask = Tensor::from_vector(m, Shape{5, 7});
  for (const std::string& isa : simd::available_isas()) {
    INFO(isa);
    IsaGuard guard(isa);
    REQUIRE(gradcheck(flash({}), {q, k, v}).message == "");
    REQUIRE(gradcheck(flash({.mask = mask, .causal = true}), {q, k, v}).message == "");
    REQUIRE(gradcheck(flash({.scale = 0.8, .sliding_window = 2}), {q, k, v}).message == "");
    const Tensor qt = Tensor::randn({1, 2, 3, 5}, DType::f64, 34).transpose(-2, -1);
    REQUIRE(gradcheck(flash({.causal = true}), {qt, k, v}).message == "");
  }
}

TEST_CASE("flash_attention is first-order only and says so when differentiated twice", "[flash_attention]") {
  const Tensor q = Tensor::randn({1, 1, 3, 2}, DType::f64, 41);
  GradientTape outer;
  outer.watch(q);
  Tensor g;
  {
    GradientTape inner;
    inner.watch(q);
    const Tensor out = ops::scaled_dot_product_attention(q, q, q, {.impl = AttentionImpl::Flash});
    g = inner.gradient(ops::sum(out * out), {q})[0];
  }
  REQUIRE_THROWS_WITH(outer.gradient(ops::sum(g), {q}),
                      Catch::Contains("flash_attention_backward") && Catch::Contains("first-order only"));
}

TEST_CASE("flash_attention: probabilities recomputed from the logsumexp match the math path", "[flash_attention]") {
  const Tensor q = Tensor::randn({2, 2, 37, 16}, DType::f64, 51);
  const Tensor k = Tensor::randn({2, 2, 53, 16}, DType::f64, 52);
  const Tensor v = Tensor::randn({2, 2, 53, 8}, DType::f64, 53);
  std::vector<bool> m(std::size_t(37 * 53), true);
  for (std::int64_t j = 0; j < 53; ++j) m[std::size_t(3 * 53 + j)] = false;  // query 3 attends nothing
  const AttentionOptions cases[] = {{},
                                    {.causal = true},
                                    {.mask = Tensor::from_vector(m, Shape{37, 53}), .sliding_window = 11}};
  for (const AttentionOptions& o : cases) {
    const Tensor expected = ops::attention_probabilities(q, k, o);
    const auto math = ops::scaled_dot_product_attention_with_probabilities(q, k, v, with_impl(o, AttentionImpl::Math));
    require_close(math.probabilities, expected, 1e-12);
    for (const std::string& isa : simd::available_isas()) {
      INFO(isa);
      IsaGuard guard(isa);
      const auto flash =
          ops::scaled_dot_product_attention_with_probabilities(q, k, v, with_impl(o, AttentionImpl::Flash));
      require_close(flash.probabilities, expected, 1e-12);
      require_close(flash.output, math.output, 1e-12);
    }
  }
}

TEST_CASE("flash_attention: Auto agrees with Math at small and large sizes", "[flash_attention]") {
  for (std::int64_t n : {4, 200}) {
    const Tensor q = Tensor::randn({1, 2, n, 16}, DType::f64, 61);
    const auto automatic = ops::scaled_dot_product_attention(q, q, q, {.causal = true});
    const auto math = ops::scaled_dot_product_attention(q, q, q, {.causal = true, .impl = AttentionImpl::Math});
    require_close(automatic, math, 1e-12);
  }
}

TEST_CASE("simd: active_isa reports an available level and bad levels are clear errors", "[flash_attention][simd]") {
  const auto isas = simd::available_isas();
  REQUIRE(!isas.empty());
  CHECK(isas.back() == "scalar");
  CHECK(std::find(isas.begin(), isas.end(), simd::active_isa()) != isas.end());
  REQUIRE_THROWS_WITH(simd::set_active_isa("sse9"), Catch::Contains("unknown SIMD level") && Catch::Contains("sse9"));
  for (const std::string level : {"avx2", "avx512"})
    if (std::find(isas.begin(), isas.end(), level) == isas.end())
      REQUIRE_THROWS_WITH(simd::set_active_isa(level), Catch::Contains("does not support") && Catch::Contains(level));
  for (const std::string& isa : isas) {
    IsaGuard guard(isa);
    CHECK(simd::active_isa() == isa);
  }
}

TEST_CASE("flash_attention: with_probabilities under Auto keeps the probabilities differentiable on a tape",
          "[flash_attention]") {
  const Tensor q = Tensor::randn({1, 2, 80, 8}, DType::f64, 71);
  const Tensor k = Tensor::randn({1, 2, 80, 8}, DType::f64, 72);
  GradientTape tape;
  tape.watch(q);
  const auto both = ops::scaled_dot_product_attention_with_probabilities(q, k, k, {.causal = true});
  const Tensor g = tape.gradient(ops::sum(both.probabilities * both.probabilities), {q})[0];
  double norm = 0;
  for (double x : g.to_vector<double>()) norm += std::abs(x);
  CHECK(norm > 0.0);  // the math path was taken: flash's recomputed probabilities would give no gradient
}
