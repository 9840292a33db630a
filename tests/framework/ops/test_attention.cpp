#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "framework/autograd/gradcheck.hpp"
#include "framework/autograd/tape.hpp"
#include "framework/ops/attention.hpp"
#include "framework/ops/ops.hpp"

using namespace loom;
using ops::AttentionImpl;
using ops::AttentionOptions;

namespace {

using Allowed = std::function<bool(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j)>;

struct Reference {
  std::vector<double> output;         // [B, H, Nq, dv]
  std::vector<double> probabilities;  // [B, H, Nq, Nk]
};

/// The definition, one query at a time: softmax over the allowed keys, zeros for a row with none.
Reference naive_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Allowed& allowed, double scale) {
  const std::int64_t B = q.size(0), H = q.size(1), Nq = q.size(2), Nk = k.size(2), d = q.size(3), dv = v.size(3);
  const auto qs = q.to_vector<double>(), ks = k.to_vector<double>(), vs = v.to_vector<double>();
  Reference r{std::vector<double>(std::size_t(B * H * Nq * dv), 0.0),
              std::vector<double>(std::size_t(B * H * Nq * Nk), 0.0)};
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t i = 0; i < Nq; ++i) {
        std::vector<double> score(std::size_t(Nk), 0.0);
        double best = -std::numeric_limits<double>::infinity();
        for (std::int64_t j = 0; j < Nk; ++j) {
          if (!allowed(b, h, i, j)) continue;
          double s = 0;
          for (std::int64_t c = 0; c < d; ++c)
            s += qs[std::size_t(((b * H + h) * Nq + i) * d + c)] * ks[std::size_t(((b * H + h) * Nk + j) * d + c)];
          score[std::size_t(j)] = s * scale;
          best = std::max(best, s * scale);
        }
        if (best == -std::numeric_limits<double>::infinity()) continue;  // no allowed key: zeros
        double total = 0;
        for (std::int64_t j = 0; j < Nk; ++j)
          if (allowed(b, h, i, j)) total += std::exp(score[std::size_t(j)] - best);
        for (std::int64_t j = 0; j < Nk; ++j) {
          const double p = allowed(b, h, i, j) ? std::exp(score[std::size_t(j)] - best) / total : 0.0;
          r.probabilities[std::size_t(((b * H + h) * Nq + i) * Nk + j)] = p;
          for (std::int64_t c = 0; c < dv; ++c)
            r.output[std::size_t(((b * H + h) * Nq + i) * dv + c)] += p * vs[std::size_t(((b * H + h) * Nk + j) * dv + c)];
        }
      }
  return r;
}

void require_close(const std::vector<double>& actual, const std::vector<double>& expected, double tolerance) {
  REQUIRE(actual.size() == expected.size());
  for (std::size_t n = 0; n < actual.size(); ++n) {
    INFO("element " << n);
    REQUIRE(std::isfinite(actual[n]));
    REQUIRE(actual[n] == Approx(expected[n]).margin(tolerance).epsilon(tolerance));
  }
}

bool all_finite(const Tensor& t) {
  for (double x : t.to_vector<double>())
    if (!std::isfinite(x)) return false;
  return true;
}

/// A fixed pseudo-random boolean pattern over [Nq, Nk].
Tensor pattern_mask(std::int64_t nq, std::int64_t nk) {
  std::vector<bool> m;
  for (std::int64_t i = 0; i < nq; ++i)
    for (std::int64_t j = 0; j < nk; ++j) m.push_back((i * 7 + j * 3) % 4 != 0);
  return Tensor::from_vector(m, Shape{nq, nk});
}

/// Checks output and probabilities of every option set against the naive loop.
void check_against_naive(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options,
                         const Allowed& allowed) {
  const double scale = options.scale.value_or(1.0 / std::sqrt(double(q.size(3))));
  const Reference expected = naive_attention(q, k, v, allowed, scale);
  const Tensor out = ops::scaled_dot_product_attention(q, k, v, options);
  CHECK(out.shape() == Shape{q.size(0), q.size(1), q.size(2), v.size(3)});
  require_close(out.to_vector<double>(), expected.output, 1e-12);
  AttentionOptions math = options;
  math.impl = AttentionImpl::Math;
  require_close(ops::scaled_dot_product_attention(q, k, v, math).to_vector<double>(), expected.output, 1e-12);
  const Tensor p = ops::attention_probabilities(q, k, options);
  CHECK(p.shape() == Shape{q.size(0), q.size(1), q.size(2), k.size(2)});
  require_close(p.to_vector<double>(), expected.probabilities, 1e-12);
}

}  // namespace

TEST_CASE("scaled_dot_product_attention matches a naive loop", "[attention]") {
  const std::int64_t B = 2, H = 3, Nq = 4, Nk = 5, d = 3, dv = 2;
  const Tensor q = Tensor::randn({B, H, Nq, d}, DType::f64, 1);
  const Tensor k = Tensor::randn({B, H, Nk, d}, DType::f64, 2);
  const Tensor v = Tensor::randn({B, H, Nk, dv}, DType::f64, 3);
  const Tensor bool_mask = pattern_mask(Nq, Nk);
  const auto bool_mask_values = bool_mask.to_vector<bool>();
  // Float masks are 0/1 indicators: every nonzero value (even negative) may attend.
  const Tensor float_mask =
      Tensor::from_vector(std::vector<float>{1, 0, 2.5f, 1, -1, 0, 1, 1, 1, 0}, Shape{B, 1, 1, Nk});
  const auto float_mask_values = float_mask.to_vector<float>();

  SECTION("no mask, Nq != Nk") {
    check_against_naive(q, k, v, {}, [](auto, auto, auto, auto) { return true; });
  }
  SECTION("causal, top-left aligned") {
    check_against_naive(q, k, v, {.causal = true}, [](auto, auto, auto i, auto j) { return j <= i; });
  }
  SECTION("boolean mask [Nq, Nk] broadcast over batch and heads") {
    check_against_naive(q, k, v, {.mask = bool_mask}, [&](auto, auto, auto i, auto j) {
      return bool(bool_mask_values[std::size_t(i * Nk + j)]);
    });
  }
  SECTION("float mask [B, 1, 1, Nk]") {
    check_against_naive(q, k, v, {.mask = float_mask}, [&](auto b, auto, auto, auto j) {
      return float_mask_values[std::size_t(b * Nk + j)] != 0.0f;
    });
  }
  SECTION("float64 mask [B, H, Nq, Nk] of q's full score shape, read through a transposed view") {
    std::vector<double> indicator;
    for (std::int64_t n = 0; n < B * H * Nk * Nq; ++n) indicator.push_back(n % 5 == 2 ? 0.0 : 1.0);
    const Tensor mask = Tensor::from_vector(indicator, Shape{B, H, Nk, Nq}).transpose(-2, -1);
    const auto values = mask.to_vector<double>();
    check_against_naive(q, k, v, {.mask = mask}, [&](auto b, auto h, auto i, auto j) {
      return values[std::size_t(((b * H + h) * Nq + i) * Nk + j)] != 0.0;
    });
  }
  SECTION("sliding window") {
    check_against_naive(q, k, v, {.sliding_window = 2}, [](auto, auto, auto i, auto j) {
      return std::abs(i - j) < 2;
    });
  }
  SECTION("causal, sliding window and mask together, with a custom scale") {
    check_against_naive(q, k, v, {.mask = bool_mask, .causal = true, .scale = 0.7, .sliding_window = 3},
                        [&](auto, auto, auto i, auto j) {
                          return bool_mask_values[std::size_t(i * Nk + j)] && j <= i && std::abs(i - j) < 3;
                        });
  }
  SECTION("a single query (Nq = 1)") {
    const Tensor q1 = Tensor::randn({B, H, 1, d}, DType::f64, 4);
    check_against_naive(q1, k, v, {}, [](auto, auto, auto, auto) { return true; });
    check_against_naive(q1, k, v, {.causal = true}, [](auto, auto, auto, auto j) { return j == 0; });
  }
  SECTION("non-contiguous q, k and v") {
    const Tensor qt = Tensor::randn({B, H, d, Nq}, DType::f64, 5).transpose(-2, -1);
    const Tensor kt = Tensor::randn({H, B, Nk, d}, DType::f64, 6).transpose(0, 1);
    const Tensor vt = Tensor::randn({B, H, dv, Nk}, DType::f64, 7).transpose(-2, -1);
    check_against_naive(qt, kt, vt, {.causal = true}, [](auto, auto, auto i, auto j) { return j <= i; });
  }
}

TEST_CASE("scaled_dot_product_attention: probabilities of each row sum to one", "[attention]") {
  const Tensor q = Tensor::randn({1, 2, 6, 4}, DType::f64, 11);
  const Tensor k = Tensor::randn({1, 2, 6, 4}, DType::f64, 12);
  const auto p = ops::attention_probabilities(q, k, {.causal = true, .sliding_window = 3}).to_vector<double>();
  for (std::size_t row = 0; row < 12; ++row) {
    double total = 0;
    for (std::size_t j = 0; j < 6; ++j) total += p[row * 6 + j];
    CHECK(total == Approx(1.0).epsilon(1e-12));
  }
}

TEST_CASE("scaled_dot_product_attention: fully masked rows give zeros and zero gradients, never NaN",
          "[attention]") {
  const std::int64_t B = 2, H = 2, Nq = 3, Nk = 4, d = 3, dv = 2;
  // Batch 0 may attend nothing from query 1; batch 1 nothing at all.
  std::vector<bool> m(std::size_t(B * Nq * Nk), true);
  for (std::int64_t j = 0; j < Nk; ++j) m[std::size_t(1 * Nk + j)] = false;
  for (std::int64_t n = Nq * Nk; n < 2 * Nq * Nk; ++n) m[std::size_t(n)] = false;
  const Tensor mask = Tensor::from_vector(m, Shape{B, 1, Nq, Nk});
  auto row_is_empty = [](std::int64_t b, std::int64_t i) { return b == 1 || i == 1; };

  for (DType dtype : {DType::f64, DType::f32}) {
    INFO(fmt::format("{}", dtype));
    // Large scores: a -inf fill or a missing guard would show up as NaN here.
    const Tensor q = Tensor::randn({B, H, Nq, d}, dtype, 21) * 100.0;
    const Tensor k = Tensor::randn({B, H, Nk, d}, dtype, 22) * 100.0;
    const Tensor v = Tensor::randn({B, H, Nk, dv}, dtype, 23);
    GradientTape tape;
    tape.watch({q, k, v});
    const Tensor out = ops::scaled_dot_product_attention(q, k, v, {.mask = mask});
    const Tensor loss = ops::sum(out * Tensor::randn(out.shape(), dtype, 24));
    const auto grads = tape.gradient(loss, {q, k, v});
    REQUIRE(all_finite(out));
    for (const Tensor& g : grads) REQUIRE(all_finite(g));

    const auto o = out.to_vector<double>();
    const auto gq = grads[0].to_vector<double>();
    const auto p = ops::attention_probabilities(q, k, {.mask = mask}).to_vector<double>();
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t i = 0; i < Nq; ++i) {
          const std::int64_t row = (b * H + h) * Nq + i;
          if (!row_is_empty(b, i)) continue;
          for (std::int64_t c = 0; c < dv; ++c) CHECK(o[std::size_t(row * dv + c)] == 0.0);
          for (std::int64_t c = 0; c < d; ++c) CHECK(gq[std::size_t(row * d + c)] == 0.0);
          for (std::int64_t j = 0; j < Nk; ++j) CHECK(p[std::size_t(row * Nk + j)] == 0.0);
        }
    // Batch 1 attends nothing: k and v get no gradient from it.
    const auto gk = grads[1].to_vector<double>(), gv = grads[2].to_vector<double>();
    for (std::size_t n = std::size_t(H * Nk * d); n < gk.size(); ++n) CHECK(gk[n] == 0.0);
    for (std::size_t n = std::size_t(H * Nk * dv); n < gv.size(); ++n) CHECK(gv[n] == 0.0);
  }

  SECTION("a sliding window with more queries than keys leaves the late queries empty") {
    const Tensor q = Tensor::randn({1, 1, 5, 2}, DType::f64, 25);
    const Tensor k = Tensor::randn({1, 1, 2, 2}, DType::f64, 26);
    const Tensor v = Tensor::randn({1, 1, 2, 2}, DType::f64, 27);
    const auto o = ops::scaled_dot_product_attention(q, k, v, {.sliding_window = 2}).to_vector<double>();
    for (std::size_t n = 3 * 2; n < o.size(); ++n) CHECK(o[n] == 0.0);  // queries 3 and 4 see no key
    CHECK(o[0] != 0.0);
  }
  SECTION("no keys at all (Nk = 0)") {
    const Tensor out = ops::scaled_dot_product_attention(Tensor::randn({1, 2, 3, 4}, DType::f64, 28),
                                                         Tensor::zeros({1, 2, 0, 4}, DType::f64),
                                                         Tensor::zeros({1, 2, 0, 5}, DType::f64));
    CHECK(out.shape() == Shape{1, 2, 3, 5});
    for (double x : out.to_vector<double>()) CHECK(x == 0.0);
  }
  SECTION("no queries (Nq = 0) and an empty batch") {
    const Tensor k = Tensor::randn({1, 2, 4, 3}, DType::f64, 29);
    CHECK(ops::scaled_dot_product_attention(Tensor::zeros({1, 2, 0, 3}, DType::f64), k, k, {.causal = true})
              .shape() == Shape{1, 2, 0, 3});
    const Tensor none = Tensor::zeros({0, 2, 4, 3}, DType::f64);
    CHECK(ops::scaled_dot_product_attention(none, none, none).shape() == Shape{0, 2, 4, 3});
  }
}

TEST_CASE("scaled_dot_product_attention: gradcheck for q, k and v", "[attention]") {
  const std::int64_t B = 1, H = 2, Nq = 3, Nk = 4, d = 2, dv = 3;
  const Tensor q = Tensor::randn({B, H, Nq, d}, DType::f64, 31);
  const Tensor k = Tensor::randn({B, H, Nk, d}, DType::f64, 32);
  const Tensor v = Tensor::randn({B, H, Nk, dv}, DType::f64, 33);
  auto attention = [](AttentionOptions options) {
    return [options](const std::vector<Tensor>& in) {
      return ops::scaled_dot_product_attention(in[0], in[1], in[2], options);
    };
  };
  SECTION("no mask") { REQUIRE(gradcheck(attention({}), {q, k, v}).message == ""); }
  SECTION("causal with a boolean mask that empties a row") {
    std::vector<bool> m(std::size_t(Nq * Nk), true);
    m[4] = false;  // query 1 may see keys 0 and 1, but the mask hides both
    m[5] = false;
    const Tensor mask = Tensor::from_vector(m, Shape{Nq, Nk});
    REQUIRE(gradcheck(attention({.mask = mask, .causal = true}), {q, k, v}).message == "");
  }
  SECTION("float mask [1, 1, 1, Nk], sliding window and scale") {
    const Tensor mask = Tensor::from_vector(std::vector<double>{1, 0, 1, 1}, Shape{1, 1, 1, Nk});
    REQUIRE(gradcheck(attention({.mask = mask, .scale = 0.9, .sliding_window = 2}), {q, k, v}).message == "");
  }
  SECTION("a transposed view as q") {
    const Tensor qt = Tensor::randn({B, H, d, Nq}, DType::f64, 34).transpose(-2, -1);
    REQUIRE(gradcheck(attention({.causal = true}), {qt, k, v}).message == "");
  }
  SECTION("attention_probabilities") {
    const TensorFn fn = [](const std::vector<Tensor>& in) {
      return ops::attention_probabilities(in[0], in[1], {.causal = true});
    };
    REQUIRE(gradcheck(fn, {q, k}).message == "");
  }
}

TEST_CASE("scaled_dot_product_attention: gradgradcheck on a tiny size", "[attention]") {
  const Tensor q = Tensor::randn({1, 1, 2, 2}, DType::f64, 41);
  const Tensor k = Tensor::randn({1, 1, 3, 2}, DType::f64, 42);
  const Tensor v = Tensor::randn({1, 1, 3, 2}, DType::f64, 43);
  for (bool causal : {false, true}) {
    INFO("causal " << causal);
    const TensorFn fn = [causal](const std::vector<Tensor>& in) {
      return ops::scaled_dot_product_attention(in[0], in[1], in[2], {.causal = causal});
    };
    REQUIRE(gradgradcheck(fn, {q, k, v}).message == "");
  }
  const TensorFn probabilities = [](const std::vector<Tensor>& in) {
    return ops::attention_probabilities(in[0], in[1], {.sliding_window = 2});
  };
  REQUIRE(gradgradcheck(probabilities, {q, k}).message == "");
}

TEST_CASE("scaled_dot_product_attention: float32 agrees with float64", "[attention]") {
  const Tensor q = Tensor::randn({2, 2, 5, 4}, DType::f64, 51);
  const Tensor k = Tensor::randn({2, 2, 6, 4}, DType::f64, 52);
  const Tensor v = Tensor::randn({2, 2, 6, 3}, DType::f64, 53);
  const AttentionOptions options{.mask = pattern_mask(5, 6), .causal = true};
  const auto o64 = ops::scaled_dot_product_attention(q, k, v, options).to_vector<double>();
  const Tensor o32 = ops::scaled_dot_product_attention(q.to(DType::f32), k.to(DType::f32), v.to(DType::f32), options);
  CHECK(o32.dtype() == DType::f32);
  require_close(o32.to_vector<double>(), o64, 1e-5);
}

TEST_CASE("scaled_dot_product_attention rejects bad input", "[attention]") {
  const Tensor q = Tensor::randn({2, 3, 4, 5}, DType::f32, 61);
  const Tensor k = Tensor::randn({2, 3, 6, 5}, DType::f32, 62);
  const Tensor v = Tensor::randn({2, 3, 6, 7}, DType::f32, 63);
  auto sdpa = [](const Tensor& a, const Tensor& b, const Tensor& c, AttentionOptions o = {}) {
    return ops::scaled_dot_product_attention(a, b, c, o);
  };
  using Catch::Contains;
  const auto op = Contains("scaled_dot_product_attention");

  REQUIRE_THROWS_WITH(sdpa(Tensor::randn({4, 5}), k, v), op && Contains("rank 4") && Contains("[4, 5]"));
  REQUIRE_THROWS_WITH(sdpa(q, k, Tensor::randn({3, 6, 7})), op && Contains("rank 4") && Contains("[3, 6, 7]"));
  REQUIRE_THROWS_WITH(sdpa(q, Tensor(), v), op && Contains("defined"));
  REQUIRE_THROWS_WITH(sdpa(q, k.to(DType::f64), v), op && Contains("f32") && Contains("f64"));
  REQUIRE_THROWS_WITH(sdpa(Tensor::zeros({2, 3, 4, 5}, DType::i64), Tensor::zeros({2, 3, 6, 5}, DType::i64),
                           Tensor::zeros({2, 3, 6, 7}, DType::i64)),
                      op && Contains("i64"));
  REQUIRE_THROWS_WITH(sdpa(q, k, Tensor::randn({2, 3, 5, 7})),
                      op && Contains("[2, 3, 6, 5]") && Contains("[2, 3, 5, 7]") && Contains("key length"));
  REQUIRE_THROWS_WITH(sdpa(q, Tensor::randn({2, 3, 6, 4}), Tensor::randn({2, 3, 6, 7})),
                      op && Contains("[2, 3, 4, 5]") && Contains("[2, 3, 6, 4]") && Contains("head_dim"));
  REQUIRE_THROWS_WITH(sdpa(q, Tensor::randn({1, 3, 6, 5}), Tensor::randn({1, 3, 6, 7})),
                      op && Contains("[2, 3, 4, 5]") && Contains("[1, 3, 6, 5]") && Contains("same batch"));
  // Key/value heads may be fewer than the query heads only when they divide them (grouped-query attention).
  REQUIRE_THROWS_WITH(sdpa(q, Tensor::randn({2, 2, 6, 5}), Tensor::randn({2, 2, 6, 7})),
                      op && Contains("[2, 3, 4, 5]") && Contains("[2, 2, 6, 5]") && Contains("divide the query heads"));
  REQUIRE_THROWS_WITH(sdpa(Tensor::zeros({2, 3, 4, 0}), Tensor::zeros({2, 3, 6, 0}), v),
                      op && Contains("head_dim must be positive"));

  // Masks: target [2, 3, 4, 6].
  for (const Shape& shape : {Shape{4, 5}, Shape{2, 1, 4}, Shape{3, 1, 1, 1}, Shape{1, 2, 3, 4, 6}, Shape{2, 3, 1, 1, 1}}) {
    INFO(fmt::format("{}", shape));
    REQUIRE_THROWS_WITH(sdpa(q, k, v, {.mask = Tensor::ones(shape, DType::boolean)}),
                        op && Contains(fmt::format("mask of shape {}", shape)) && Contains("[2, 3, 4, 6]"));
  }
  REQUIRE_THROWS_WITH(sdpa(q, k, v, {.mask = Tensor::ones({4, 6}, DType::i64)}),
                      op && Contains("boolean or float") && Contains("i64"));
  REQUIRE_THROWS_WITH(sdpa(q, k, v, {.sliding_window = -1}), op && Contains("sliding_window") && Contains("-1"));
  for (double scale : {0.0, -1.0, std::numeric_limits<double>::infinity(), std::nan("")}) {
    INFO(scale);
    REQUIRE_THROWS_WITH(sdpa(q, k, v, {.scale = scale}), op && Contains("scale must be finite and > 0"));
  }
  REQUIRE_THROWS_WITH(ops::attention_probabilities(q, Tensor::randn({2, 3, 6, 4})),
                      Contains("attention_probabilities") && Contains("head_dim"));
  // Masks that broadcast are fine.
  for (const Shape& shape : {Shape{}, Shape{6}, Shape{4, 1}, Shape{2, 1, 1, 6}, Shape{1, 3, 4, 6}, Shape{2, 3, 4, 6}})
    CHECK(sdpa(q, k, v, {.mask = Tensor::ones(shape, DType::boolean)}).shape() == Shape{2, 3, 4, 7});
}

TEST_CASE("scaled_dot_product_attention: Auto, Math and Flash agree", "[attention]") {
  const Tensor q = Tensor::randn({1, 1, 2, 4}, DType::f32, 71);
  const auto automatic = ops::scaled_dot_product_attention(q, q, q, {.impl = AttentionImpl::Auto}).to_vector<float>();
  const auto math = ops::scaled_dot_product_attention(q, q, q, {.impl = AttentionImpl::Math}).to_vector<float>();
  const auto flash = ops::scaled_dot_product_attention(q, q, q, {.impl = AttentionImpl::Flash}).to_vector<float>();
  REQUIRE(flash.size() == math.size());
  for (std::size_t n = 0; n < math.size(); ++n) {
    CHECK(automatic[n] == Approx(math[n]).epsilon(1e-6));
    CHECK(flash[n] == Approx(math[n]).epsilon(1e-5));
  }
}
