// Grouped-query attention in ops::scaled_dot_product_attention: k and v with fewer heads than q. Checked
// against the same op on K and V repeated along the heads (what Keras's GroupQueryAttention computes), forward
// and gradients, on the math path and on the flash kernels of every SIMD level this machine has; float64
// gradchecks on every path; the errors; symbolic inputs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "framework/autograd/gradcheck.hpp"
#include "framework/autograd/tape.hpp"
#include "framework/graph/symbolic.hpp"
#include "framework/ops/attention.hpp"
#include "framework/ops/ops.hpp"
#include "framework/runtime/simd.hpp"
#include "tests/setting_guards.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
using ops::AttentionImpl;
using ops::AttentionOptions;

namespace {

AttentionOptions with_impl(AttentionOptions o, AttentionImpl impl) {
  o.impl = impl;
  return o;
}

/// x [B, Hkv, N, c] repeated along the heads as keras.ops.repeat(x, heads / Hkv, axis=1): head h of the
/// result is head h / (heads / Hkv) of x. Differentiable (a take), so gradients flow back summed.
Tensor repeat_heads(const Tensor& x, std::int64_t heads) {
  const std::int64_t share = heads / x.size(1);
  std::vector<std::int64_t> index;
  for (std::int64_t h = 0; h < heads; ++h) index.push_back(h / share);
  return ops::take(x, Tensor::from_vector(index, Shape{heads}), 1);
}

/// |a - b| <= tol * (|b| + max(1, max |b|)), as the flash kernel tests compare.
void require_close(const Tensor& actual, const Tensor& expected, double tol) {
  REQUIRE(actual.shape() == expected.shape());
  const auto a = actual.to_vector<double>(), e = expected.to_vector<double>();
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

/// The output and the gradients of sum(out * cotangent) w.r.t. q, k and v; with `repeat`, k and v are
/// repeated to q's heads inside the tape first (the reference formulation).
Result run(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o, const Tensor& cotangent,
           bool repeat) {
  GradientTape tape;
  tape.watch({q, k, v});
  const Tensor kk = repeat ? repeat_heads(k, q.size(1)) : k, vv = repeat ? repeat_heads(v, q.size(1)) : v;
  const Tensor out = ops::scaled_dot_product_attention(q, kk, vv, o);
  const auto g = tape.gradient(ops::sum(out * cotangent), {q, k, v});
  return {out, g[0], g[1], g[2]};
}

void require_same(const Result& got, const Result& want, double tol) {
  require_close(got.out, want.out, tol);
  require_close(got.dq, want.dq, tol);
  require_close(got.dk, want.dk, tol);
  require_close(got.dv, want.dv, tol);
}

/// The grouped op against the op on repeated K and V (math), forward and gradients, in both dtypes: on the
/// math path, and on the flash kernels of every SIMD level here; the probabilities too.
void check_grouped(std::int64_t B, std::int64_t H, std::int64_t Hkv, std::int64_t nq, std::int64_t nk,
                   std::int64_t d, std::int64_t dv, const AttentionOptions& options) {
  for (DType dtype : {DType::f32, DType::f64}) {
    const double tol = dtype == DType::f32 ? 1e-5 : 1e-12;
    const Tensor q = Tensor::randn({B, H, nq, d}, dtype, 201);
    const Tensor k = Tensor::randn({B, Hkv, nk, d}, dtype, 202);
    const Tensor v = Tensor::randn({B, Hkv, nk, dv}, dtype, 203);
    const Tensor cot = Tensor::randn({B, H, nq, dv}, dtype, 204);
    const AttentionOptions math = with_impl(options, AttentionImpl::Math);
    const Result reference = run(q, k, v, math, cot, true);
    const Tensor probabilities = ops::attention_probabilities(q, repeat_heads(k, H), options);
    INFO(fmt::format("{} B={} H={} Hkv={} Nq={} Nk={} d={} dv={}", dtype, B, H, Hkv, nq, nk, d, dv));
    {
      INFO("math");
      require_same(run(q, k, v, math, cot, false), reference, tol);
      require_close(ops::attention_probabilities(q, k, options), probabilities, tol);
    }
    for (const std::string& isa : simd::available_isas()) {
      INFO("flash " << isa);
      IsaGuard guard(isa);
      const AttentionOptions flash = with_impl(options, AttentionImpl::Flash);
      require_same(run(q, k, v, flash, cot, false), reference, tol);
      const auto both = ops::scaled_dot_product_attention_with_probabilities(q, k, v, flash);
      require_close(both.output, reference.out, tol);
      require_close(both.probabilities, probabilities, tol);
    }
  }
}

/// A fixed pseudo-random boolean pattern of the given shape (the last two axes queries and keys).
Tensor pattern_mask(const Shape& shape) {
  std::vector<bool> m;
  for (std::int64_t n = 0; n < numel(shape); ++n) m.push_back((n * 7 + n / 5 * 3) % 5 != 0);
  return Tensor::from_vector(m, shape);
}

}  // namespace

TEST_CASE("grouped attention equals attention on K and V repeated along the heads", "[attention][gqa]") {
  SECTION("2 key/value heads for 6 query heads, sizes no tile divides") {
    check_grouped(2, 6, 2, 37, 53, 16, 16, {});
  }
  SECTION("multi-query attention: one key/value head") { check_grouped(1, 4, 1, 37, 130, 16, 16, {}); }
  SECTION("3 key/value heads for 6, causal with Nq > Nk") { check_grouped(1, 6, 3, 70, 45, 16, 16, {.causal = true}); }
  SECTION("sliding window alone and with causal") {
    check_grouped(1, 4, 2, 150, 150, 16, 16, {.sliding_window = 9});
    check_grouped(1, 4, 2, 150, 130, 16, 16, {.causal = true, .sliding_window = 70});
  }
  SECTION("a mask per query head [B, H, Nq, Nk] and a custom scale") {
    check_grouped(2, 4, 2, 37, 53, 16, 16, {.mask = pattern_mask({2, 4, 37, 53}), .scale = 0.3});
  }
  SECTION("a float key mask [B, 1, 1, Nk], causal") {
    std::vector<float> m;
    for (int n = 0; n < 2 * 53; ++n) m.push_back(n % 4 == 1 ? 0.0f : 1.0f);
    check_grouped(2, 4, 2, 37, 53, 16, 16, {.mask = Tensor::from_vector(m, Shape{2, 1, 1, 53}), .causal = true});
  }
  SECTION("head dims not a multiple of the vector width, d != dv") {
    check_grouped(1, 6, 2, 37, 53, 24, 40, {.causal = true});
    check_grouped(2, 3, 1, 19, 21, 3, 5, {});
  }
  SECTION("decoding: Nq = 1") { check_grouped(2, 8, 2, 1, 53, 16, 16, {}); }
  SECTION("N = 200, d = 64, causal: key blocks in chunks, a group's query heads in parts, on several threads") {
    check_grouped(1, 6, 1, 200, 200, 64, 64, {.causal = true});
  }
  SECTION("a fully masked query row gives zeros") {
    std::vector<bool> m(std::size_t(37 * 53), true);
    for (std::int64_t j = 0; j < 53; ++j) m[std::size_t(4 * 53 + j)] = false;
    check_grouped(1, 4, 2, 37, 53, 16, 16, {.mask = Tensor::from_vector(m, Shape{37, 53})});
  }
}

TEST_CASE("grouped attention reads key/value head h / (H / Hkv) for query head h", "[attention][gqa]") {
  // Query heads 0, 1 use key/value head 0 and heads 2, 3 head 1: each query head equals plain attention on
  // its own key/value head.
  const Tensor q = randn({2, 4, 5, 3}, 211), k = randn({2, 2, 6, 3}, 212), v = randn({2, 2, 6, 2}, 213);
  for (AttentionImpl impl : {AttentionImpl::Math, AttentionImpl::Flash}) {
    const Tensor out = ops::scaled_dot_product_attention(q, k, v, {.causal = true, .impl = impl});
    for (std::int64_t h = 0; h < 4; ++h) {
      INFO("head " << h);
      const Tensor qh = ops::slice(q, 1, h, h + 1), kh = ops::slice(k, 1, h / 2, h / 2 + 1);
      const Tensor vh = ops::slice(v, 1, h / 2, h / 2 + 1);
      check_close(values(ops::slice(out, 1, h, h + 1)),
                  values(ops::scaled_dot_product_attention(qh, kh, vh, {.causal = true, .impl = impl})), 1e-12);
    }
  }
}

TEST_CASE("grouped attention: gradcheck for q, k and v on every path", "[attention][gqa]") {
  const Tensor q = randn({1, 4, 5, 3}, 221), k = randn({1, 2, 7, 3}, 222), v = randn({1, 2, 7, 2}, 223);
  std::vector<bool> m(35, true);
  m[7] = m[8] = m[9] = false;
  const Tensor mask = Tensor::from_vector(m, Shape{5, 7});
  const Tensor head_mask = pattern_mask({1, 4, 5, 7});
  auto attention = [](AttentionOptions options) {
    return [options](const std::vector<Tensor>& in) {
      return ops::scaled_dot_product_attention(in[0], in[1], in[2], options);
    };
  };
  const std::vector<AttentionOptions> cases{{},
                                            {.mask = mask, .causal = true},
                                            {.mask = head_mask, .scale = 0.8, .sliding_window = 2}};
  for (const AttentionOptions& o : cases) {
    INFO("math");
    require_gradcheck(attention(with_impl(o, AttentionImpl::Math)), {q, k, v});
    for (const std::string& isa : simd::available_isas()) {
      INFO("flash " << isa);
      IsaGuard guard(isa);
      require_gradcheck(attention(with_impl(o, AttentionImpl::Flash)), {q, k, v});
    }
  }
  const TensorFn probabilities = [](const std::vector<Tensor>& in) {
    return ops::attention_probabilities(in[0], in[1], {.causal = true});
  };
  require_gradcheck(probabilities, {q, k});
  // The math path stays differentiable to the second order with grouped heads.
  const Tensor q2 = randn({1, 2, 2, 2}, 224), k2 = randn({1, 1, 3, 2}, 225), v2 = randn({1, 1, 3, 2}, 226);
  require_gradgradcheck(attention({.causal = true, .impl = AttentionImpl::Math}), {q2, k2, v2});
}

TEST_CASE("grouped attention: empty sizes", "[attention][gqa]") {
  for (AttentionImpl impl : {AttentionImpl::Math, AttentionImpl::Flash}) {
    const Tensor none = ops::scaled_dot_product_attention(randn({1, 4, 3, 2}, 1),
                                                          Tensor::zeros({1, 2, 0, 2}, DType::f64),
                                                          Tensor::zeros({1, 2, 0, 5}, DType::f64), {.impl = impl});
    CHECK(none.shape() == Shape{1, 4, 3, 5});
    for (double x : values(none)) CHECK(x == 0.0);
    CHECK(ops::scaled_dot_product_attention(Tensor::zeros({1, 4, 0, 2}, DType::f64), randn({1, 2, 3, 2}, 2),
                                            randn({1, 2, 3, 5}, 3), {.impl = impl})
              .shape() == Shape{1, 4, 0, 5});
    CHECK(ops::scaled_dot_product_attention(Tensor::zeros({0, 4, 3, 2}, DType::f64),
                                            Tensor::zeros({0, 2, 3, 2}, DType::f64),
                                            Tensor::zeros({0, 2, 3, 5}, DType::f64), {.impl = impl})
              .shape() == Shape{0, 4, 3, 5});
  }
}

TEST_CASE("grouped attention rejects heads that do not divide, naming the op and the shapes", "[attention][gqa]") {
  using Catch::Contains;
  const Tensor q = randn({2, 4, 3, 5}, 231);
  for (AttentionImpl impl : {AttentionImpl::Math, AttentionImpl::Flash}) {
    const auto sdpa = [impl](const Tensor& a, const Tensor& b, const Tensor& c, AttentionOptions o = {}) {
      o.impl = impl;
      return ops::scaled_dot_product_attention(a, b, c, o);
    };
    REQUIRE_THROWS_WITH(sdpa(q, randn({2, 3, 6, 5}, 1), randn({2, 3, 6, 7}, 2)),
                        Contains("scaled_dot_product_attention") && Contains("divide the query heads") &&
                            Contains("[2, 4, 3, 5]") && Contains("[2, 3, 6, 5]"));
    REQUIRE_THROWS_WITH(sdpa(q, Tensor::zeros({2, 0, 6, 5}, DType::f64), Tensor::zeros({2, 0, 6, 7}, DType::f64)),
                        Contains("divide the query heads") && Contains("[2, 0, 6, 5]"));
    REQUIRE_THROWS_WITH(sdpa(q, randn({2, 8, 6, 5}, 1), randn({2, 8, 6, 7}, 2)),
                        Contains("divide the query heads") && Contains("[2, 8, 6, 5]"));
    // k and v must agree on their heads.
    REQUIRE_THROWS_WITH(sdpa(q, randn({2, 2, 6, 5}, 1), randn({2, 1, 6, 7}, 2)),
                        Contains("scaled_dot_product_attention") && Contains("[2, 2, 6, 5]") &&
                            Contains("[2, 1, 6, 7]") && Contains("heads"));
    // A mask broadcasts over the query heads, not the key/value heads.
    REQUIRE_THROWS_WITH(sdpa(q, randn({2, 2, 6, 5}, 1), randn({2, 2, 6, 7}, 2),
                             {.mask = Tensor::ones({2, 2, 3, 6}, DType::boolean)}),
                        Contains("mask of shape [2, 2, 3, 6]") && Contains("[2, 4, 3, 6]"));
  }
  REQUIRE_THROWS_WITH(ops::attention_probabilities(q, randn({2, 3, 6, 5}, 1)),
                      Contains("attention_probabilities") && Contains("divide the query heads"));
  REQUIRE_THROWS_WITH(ops::scaled_dot_product_attention_with_probabilities(q, randn({2, 3, 6, 5}, 1),
                                                                           randn({2, 3, 6, 7}, 2)),
                      Contains("divide the query heads"));
}

TEST_CASE("grouped attention on symbolic inputs records a node with the query heads", "[attention][gqa]") {
  const Tensor q = graph::input({-1, 4, 5, 8}, DType::f64, "q");
  const Tensor k = graph::input({-1, 2, 7, 8}, DType::f64, "k");
  const Tensor v = graph::input({-1, 2, 7, 3}, DType::f64, "v");
  const Tensor out = ops::scaled_dot_product_attention(q, k, v, {.causal = true});
  REQUIRE(graph::is_symbolic(out));
  CHECK(out.shape() == Shape{-1, 4, 5, 3});
  CHECK(ops::attention_probabilities(q, k).shape() == Shape{-1, 4, 5, 7});
  // The node replays the op on data.
  const Tensor qv = randn({2, 4, 5, 8}, 241), kv = randn({2, 2, 7, 8}, 242), vv = randn({2, 2, 7, 3}, 243);
  const auto& node = *graph::origin(out).node;
  REQUIRE(node.inputs.size() == 4);  // q, k, v and the (absent) mask
  const auto replayed = node.function({qv, kv, vv, Tensor()}, false);
  REQUIRE(replayed.size() == 1);
  check_close(values(replayed[0]), values(ops::scaled_dot_product_attention(qv, kv, vv, {.causal = true})), 1e-12);
  // Heads that do not divide fail when the graph is built, with the op's message.
  REQUIRE_THROWS_WITH(ops::scaled_dot_product_attention(q, graph::input({-1, 3, 7, 8}, DType::f64, "k3"),
                                                        graph::input({-1, 3, 7, 3}, DType::f64, "v3")),
                      Catch::Contains("divide the query heads"));
}
