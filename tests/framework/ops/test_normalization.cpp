#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;

namespace {

/// [dims at axes, 1 elsewhere]: how a per-feature parameter broadcasts against x.
Shape broadcast_shape(const Shape& x, const Axes& axes) {
  Shape s(x.size(), 1);
  for (auto a : axes) s[std::size_t(a)] = x[std::size_t(a)];
  return s;
}

Axes sorted_axes(const Axes& axes, std::int64_t rank) {
  Axes out;
  for (auto a : axes) out.push_back(a < 0 ? a + rank : a);
  std::sort(out.begin(), out.end());
  return out;
}

Tensor affine(Tensor y, const Tensor& gamma, const Tensor& beta, const Shape& along) {
  if (gamma.defined()) y = y * gamma.reshape(along);
  if (beta.defined()) y = y + beta.reshape(along);
  return y;
}

// The same normalizations composed of plain ops (what the fused kernels replace).
Tensor composed_layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Axes& axes, double eps) {
  const Axes a = sorted_axes(axes, x.ndim());
  const Tensor y = (x - ops::mean(x, a, true)) * ops::rsqrt(ops::var(x, a, true) + eps);
  return affine(y, gamma, beta, broadcast_shape(x.shape(), a));
}

Tensor composed_rms_norm(const Tensor& x, const Tensor& scale, const Axes& axes, double eps) {
  const Axes a = sorted_axes(axes, x.ndim());
  const Tensor y = x * ops::rsqrt(ops::mean(ops::square(x), a, true) + eps);
  return affine(y, scale, Tensor(), broadcast_shape(x.shape(), a));
}

Tensor composed_group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, std::int64_t groups,
                           std::int64_t axis, double eps) {
  const std::int64_t a = axis < 0 ? axis + x.ndim() : axis;
  Shape grouped = x.shape();
  grouped[std::size_t(a)] = x.shape()[std::size_t(a)] / groups;
  grouped.insert(grouped.begin() + a, groups);
  const Tensor xg = x.reshape(grouped);
  Axes reduce;
  for (std::int64_t d = 1; d < std::int64_t(grouped.size()); ++d)
    if (d != a) reduce.push_back(d);
  const Tensor y = ((xg - ops::mean(xg, reduce, true)) * ops::rsqrt(ops::var(xg, reduce, true) + eps)).reshape(x.shape());
  return affine(y, gamma, beta, broadcast_shape(x.shape(), {a}));
}

Tensor composed_batch_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, std::int64_t axis, double eps,
                           Tensor* mean = nullptr, Tensor* var = nullptr) {
  const std::int64_t a = axis < 0 ? axis + x.ndim() : axis;
  Axes reduce;
  for (std::int64_t d = 0; d < x.ndim(); ++d)
    if (d != a) reduce.push_back(d);
  const Tensor m = ops::mean(x, reduce, true), v = ops::var(x, reduce, true);
  if (mean) *mean = m.reshape({x.shape()[std::size_t(a)]});
  if (var) *var = v.reshape({x.shape()[std::size_t(a)]});
  return affine((x - m) * ops::rsqrt(v + eps), gamma, beta, broadcast_shape(x.shape(), {a}));
}

/// Compares fn and reference on the same inputs: the outputs, and the gradients of sum(y * c) for a fixed
/// random c with respect to every input.
void check_same_as_composed(const TensorFn& fused, const TensorFn& composed, const std::vector<Tensor>& inputs,
                            double tol) {
  std::vector<std::vector<double>> results[2];
  for (int k = 0; k < 2; ++k) {
    GradientTape tape;
    tape.watch(inputs);
    const Tensor y = (k == 0 ? fused : composed)(inputs);
    results[k].push_back(values(y));
    const Tensor c = Tensor::randn(y.shape(), y.dtype(), 99);
    for (const Tensor& g : tape.gradient(ops::sum(y * c), inputs)) results[k].push_back(values(g));
  }
  for (std::size_t i = 0; i < results[0].size(); ++i) {
    INFO("output 0 / gradient of input " << i - 1 << " (index " << i << ")");
    check_close(results[0][i], results[1][i], tol, tol);
  }
}

void check_both_dtypes(const TensorFn& fused, const TensorFn& composed, const std::vector<Tensor>& inputs64) {
  check_same_as_composed(fused, composed, inputs64, 1e-10);
  std::vector<Tensor> inputs32;
  for (const Tensor& t : inputs64) inputs32.push_back(t.to(DType::f32));
  check_same_as_composed(fused, composed, inputs32, 2e-4);
}

Tensor gamma_like(std::int64_t n, std::uint64_t seed) { return Tensor::uniform({n}, 0.5, 1.5, DType::f64, seed); }

/// A double two-pass reference of layer normalization over the last axis (no affine).
std::vector<double> two_pass_rows(const std::vector<double>& x, std::size_t n, double eps, bool center) {
  std::vector<double> y(x.size());
  for (std::size_t r = 0; r < x.size() / n; ++r) {
    double mean = 0, var = 0;
    for (std::size_t j = 0; j < n; ++j) mean += x[r * n + j] / double(n);
    if (!center) mean = 0;
    for (std::size_t j = 0; j < n; ++j) var += (x[r * n + j] - mean) * (x[r * n + j] - mean) / double(n);
    for (std::size_t j = 0; j < n; ++j) y[r * n + j] = (x[r * n + j] - mean) / std::sqrt(var + eps);
  }
  return y;
}

}  // namespace

TEST_CASE("layer_norm equals the composed formula: values and gradients in f32 and f64", "[normalization]") {
  const Tensor x = randn({3, 4, 5}, 1) * 2.0 + 0.5;
  SECTION("last axis, gamma and beta") {
    check_both_dtypes([](const auto& in) { return ops::layer_norm(in[0], in[1], in[2], {-1}, 1e-3); },
                      [](const auto& in) { return composed_layer_norm(in[0], in[1], in[2], {-1}, 1e-3); },
                      {x, gamma_like(5, 2), randn({5}, 3)});
  }
  SECTION("two trailing axes") {
    check_both_dtypes([](const auto& in) { return ops::layer_norm(in[0], in[1], in[2], {-1, 1}, 1e-2); },
                      [](const auto& in) { return composed_layer_norm(in[0], in[1], in[2], {1, 2}, 1e-2); },
                      {x, randn({4, 5}, 4), randn({4, 5}, 5)});
  }
  SECTION("leading and middle axes (not trailing)") {
    check_both_dtypes([](const auto& in) { return ops::layer_norm(in[0], in[1], in[2], {0, 1}, 1e-3); },
                      [](const auto& in) { return composed_layer_norm(in[0], in[1], in[2], {0, 1}, 1e-3); },
                      {x, randn({3, 4}, 6), randn({3, 4}, 7)});
    check_both_dtypes([](const auto& in) { return ops::layer_norm(in[0], in[1], Tensor(), {1}, 1e-3); },
                      [](const auto& in) { return composed_layer_norm(in[0], in[1], Tensor(), {1}, 1e-3); },
                      {x, randn({4}, 8)});
  }
  SECTION("without gamma and beta, on a transposed view") {
    check_both_dtypes([](const auto& in) { return ops::layer_norm(in[0].transpose(0, 2), {}, {}, {-1}, 1e-3); },
                      [](const auto& in) { return composed_layer_norm(in[0].transpose(0, 2), {}, {}, {-1}, 1e-3); },
                      {x});
  }
}

TEST_CASE("rms_norm equals the composed formula: values and gradients in f32 and f64", "[normalization]") {
  const Tensor x = randn({4, 3, 6}, 11) + 0.3;
  check_both_dtypes([](const auto& in) { return ops::rms_norm(in[0], in[1], {-1}, 1e-6); },
                    [](const auto& in) { return composed_rms_norm(in[0], in[1], {-1}, 1e-6); },
                    {x, gamma_like(6, 12)});
  check_both_dtypes([](const auto& in) { return ops::rms_norm(in[0], in[1], {0, 2}, 1e-3); },
                    [](const auto& in) { return composed_rms_norm(in[0], in[1], {0, 2}, 1e-3); },
                    {x, randn({4, 6}, 13)});
  check_both_dtypes([](const auto& in) { return ops::rms_norm(in[0].transpose(), {}, {-1}, 1e-6); },
                    [](const auto& in) { return composed_rms_norm(in[0].transpose(), {}, {-1}, 1e-6); }, {x});
}

TEST_CASE("group_norm equals the composed formula: values and gradients in f32 and f64", "[normalization]") {
  SECTION("channels last, 2 groups") {
    check_both_dtypes([](const auto& in) { return ops::group_norm(in[0], in[1], in[2], 2, -1, 1e-3); },
                      [](const auto& in) { return composed_group_norm(in[0], in[1], in[2], 2, -1, 1e-3); },
                      {randn({2, 3, 3, 6}, 21) * 3.0 - 1.0, gamma_like(6, 22), randn({6}, 23)});
  }
  SECTION("channels first (axis 1), 3 groups, spatial axes after the channels") {
    check_both_dtypes([](const auto& in) { return ops::group_norm(in[0], in[1], in[2], 3, 1, 1e-3); },
                      [](const auto& in) { return composed_group_norm(in[0], in[1], in[2], 3, 1, 1e-3); },
                      {randn({2, 6, 2, 3}, 24), gamma_like(6, 25), randn({6}, 26)});
  }
  SECTION("one group, and one group per channel, without gamma or beta") {
    const Tensor x = randn({3, 4, 4}, 27);
    check_both_dtypes([](const auto& in) { return ops::group_norm(in[0], {}, in[1], 1, -1, 1e-3); },
                      [](const auto& in) { return composed_group_norm(in[0], {}, in[1], 1, -1, 1e-3); },
                      {x, randn({4}, 28)});
    check_both_dtypes([](const auto& in) { return ops::group_norm(in[0], in[1], {}, 4, 1, 1e-3); },
                      [](const auto& in) { return composed_group_norm(in[0], in[1], {}, 4, 1, 1e-3); },
                      {x, gamma_like(4, 29)});
  }
}

TEST_CASE("batch_norm equals the composed formula, mean and variance included", "[normalization]") {
  // The output plus terms using the batch mean and variance, so their gradients are compared too.
  const auto with_moments = [](const Tensor& y, const Tensor& mean, const Tensor& var, std::int64_t axis) {
    Shape along(std::size_t(y.ndim()), 1);
    along[std::size_t(axis < 0 ? axis + y.ndim() : axis)] = mean.numel();
    return y + (mean * 0.7 + ops::square(var) * 0.3).reshape(along);
  };
  for (std::int64_t axis : {-1, 1, 0}) {
    INFO("axis " << axis);
    const Tensor x = randn({4, 3, 5}, 31) * 2.0 + 3.0;
    const std::int64_t c = x.shape()[std::size_t(axis < 0 ? axis + 3 : axis)];
    check_both_dtypes(
        [&](const auto& in) {
          const auto r = ops::batch_norm(in[0], in[1], in[2], axis, 1e-3);
          return with_moments(r.output, r.mean, r.variance, axis);
        },
        [&](const auto& in) {
          Tensor mean, var;
          const Tensor y = composed_batch_norm(in[0], in[1], in[2], axis, 1e-3, &mean, &var);
          return with_moments(y, mean, var, axis);
        },
        {x, gamma_like(c, 32), randn({c}, 33)});
  }
  // Batch mean and biased variance themselves.
  const Tensor x = randn({6, 2}, 34);
  const auto r = ops::batch_norm(x, {}, {}, -1, 1e-3);
  check_close(values(r.mean), values(ops::mean(x, {0})), 1e-14);
  check_close(values(r.variance), values(ops::var(x, {0})), 1e-14);
}

TEST_CASE("batch_norm_inference applies given statistics", "[normalization]") {
  const Tensor x = randn({3, 4, 2}, 41), mean = randn({4}, 42), var = Tensor::uniform({4}, 0.5, 2.0, DType::f64, 43);
  const Tensor gamma = gamma_like(4, 44), beta = randn({4}, 45);
  const Tensor y = ops::batch_norm_inference(x, mean, var, gamma, beta, 1, 1e-3);
  const Shape along{1, 4, 1};
  const Tensor want = (x - mean.reshape(along)) / ops::sqrt(var.reshape(along) + 1e-3) * gamma.reshape(along) +
                      beta.reshape(along);
  check_close(values(y), values(want), 1e-13);
  check_close(values(ops::batch_norm_inference(x, mean, var, {}, {}, 1, 1e-3)),
              values((x - mean.reshape(along)) / ops::sqrt(var.reshape(along) + 1e-3)), 1e-13);
  require_gradcheck([](const auto& in) { return ops::batch_norm_inference(in[0], in[1], in[2], in[3], in[4], 1, 1e-3); },
                    {x, mean, var, gamma, beta});
}

TEST_CASE("fused normalizations pass gradcheck in float64", "[normalization]") {
  const Tensor x = randn({3, 4, 5}, 51) * 1.5 + 0.5;
  SECTION("layer_norm") {
    require_gradcheck([](const auto& in) { return ops::layer_norm(in[0], in[1], in[2], {-1}, 1e-3); },
                      {x, gamma_like(5, 52), randn({5}, 53)});
    require_gradcheck([](const auto& in) { return ops::layer_norm(in[0], in[1], in[2], {0, 2}, 1e-3); },
                      {x, randn({3, 5}, 54), randn({3, 5}, 55)});
    // A transposed (non-contiguous) input, without beta.
    require_gradcheck([](const auto& in) { return ops::layer_norm(in[0].transpose(), in[1], {}, {-1}, 1e-3); },
                      {x, gamma_like(4, 56)});
  }
  SECTION("rms_norm") {
    require_gradcheck([](const auto& in) { return ops::rms_norm(in[0], in[1], {-1}, 1e-6); }, {x, gamma_like(5, 57)});
    require_gradcheck([](const auto& in) { return ops::rms_norm(in[0].transpose(0, 1), in[1], {1, 2}, 1e-6); },
                      {x, randn({3, 5}, 58)});
  }
  SECTION("group_norm") {
    const Tensor x4 = randn({2, 4, 3}, 59);
    require_gradcheck([](const auto& in) { return ops::group_norm(in[0], in[1], in[2], 2, -1, 1e-3); },
                      {randn({2, 3, 4}, 59), gamma_like(4, 60), randn({4}, 61)});
    require_gradcheck([](const auto& in) { return ops::group_norm(in[0], in[1], in[2], 2, 1, 1e-3); },
                      {x4, gamma_like(4, 62), randn({4}, 63)});
  }
  SECTION("batch_norm, through the output, the mean and the variance") {
    require_gradcheck(
        [](const auto& in) {
          const auto r = ops::batch_norm(in[0], in[1], in[2], 1, 1e-3);
          return r.output + (r.mean * r.variance).reshape({1, 4, 1});
        },
        {x, gamma_like(4, 64), randn({4}, 65)});
    require_gradcheck([](const auto& in) { return ops::batch_norm(in[0].transpose(), in[1], in[2], -1, 1e-3).output; },
                      {x, gamma_like(4, 66), randn({4}, 67)});
  }
}

TEST_CASE("fused normalizations stay exact for constant inputs and for a mean of 1e6", "[normalization]") {
  SECTION("constant rows: variance 0, output beta, finite gradients") {
    for (DType dtype : {DType::f32, DType::f64}) {
      const Tensor x = Tensor::full({2, 8}, 3.25, dtype), gamma = Tensor::full({8}, 2.0, dtype);
      const Tensor beta = Tensor::arange(0.0, 8.0, 1.0, dtype);
      GradientTape tape;
      tape.watch(x);
      const Tensor y = ops::layer_norm(x, gamma, beta, {-1}, 1e-3);
      check_close(values(y), values(ops::broadcast_to(beta, {2, 8})), 0.0);
      const auto r = ops::batch_norm(x, gamma, {}, -1, 1e-3);
      check_close(values(r.variance), std::vector<double>(8, 0.0), 0.0);
      check_close(values(r.output), std::vector<double>(16, 0.0), 0.0);
      check_close(values(ops::group_norm(x, {}, {}, 4, 1, 1e-3)), std::vector<double>(16, 0.0), 0.0);
      // Channels last with several rows: the kernels keep per-(group, channel) slots (another code path).
      check_close(values(ops::group_norm(x.reshape({2, 4, 2}), {}, {}, 1, -1, 1e-3)), std::vector<double>(16, 0.0),
                  0.0);
      for (double g : values(tape.gradient(ops::sum(y * Tensor::randn({2, 8}, dtype, 3)), {x})[0]))
        CHECK(std::isfinite(g));
    }
  }
  SECTION("rows with mean 1e6 and unit spread, against a double two-pass reference") {
    const Tensor noise = randn({16, 64}, 71);
    for (DType dtype : {DType::f32, DType::f64}) {
      INFO(fmt::format("{}", dtype));
      const Tensor x = (noise + 1e6).to(dtype);
      const std::vector<double> xv = values(x);  // the values as the dtype holds them
      const double tol = dtype == DType::f64 ? 1e-9 : 1e-4;
      check_close(values(ops::layer_norm(x, {}, {}, {-1}, 1e-3)), two_pass_rows(xv, 64, 1e-3, true), tol, tol);
      check_close(values(ops::group_norm(x.reshape({16, 4, 16}), {}, {}, 1, 1, 1e-3)),
                  two_pass_rows(xv, 64, 1e-3, true), tol, tol);
      check_close(values(ops::group_norm(x.reshape({16, 16, 4}), {}, {}, 1, -1, 1e-3)),
                  two_pass_rows(xv, 64, 1e-3, true), tol, tol);
      // Batch norm over the 16 rows: the transposed problem.
      const auto r = ops::batch_norm(x.transpose().contiguous(), {}, {}, 1, 1e-3);
      check_close(values(r.output.transpose()), two_pass_rows(xv, 64, 1e-3, true), tol, tol);
      check_close(values(ops::rms_norm(x, {}, {-1}, 1e-6)), two_pass_rows(xv, 64, 1e-6, false), tol, tol);
    }
  }
}

TEST_CASE("fused normalization backward kernels are first-order only", "[normalization]") {
  const Tensor x = randn({3, 4}, 81), gamma = gamma_like(4, 82), beta = randn({4}, 83);
  const auto second_order = [&](const std::function<Tensor(const Tensor&)>& fn) {
    GradientTape outer;
    outer.watch(x);
    Tensor dx;
    {
      GradientTape inner;
      inner.watch(x);
      dx = inner.gradient(ops::sum(ops::square(fn(x))), {x})[0];  // first order works under an outer tape
    }
    return outer.gradient(ops::sum(dx), {x});
  };
  using Catch::Contains;  // (matchers hold references to their parts: build them in place)
  REQUIRE_THROWS_WITH(second_order([&](const Tensor& t) { return ops::layer_norm(t, gamma, beta, {-1}, 1e-3); }),
                      Contains("layer_norm_backward") && Contains("first-order only"));
  REQUIRE_THROWS_WITH(second_order([&](const Tensor& t) { return ops::rms_norm(t, gamma, {-1}, 1e-6); }),
                      Contains("rms_norm_backward") && Contains("first-order only"));
  REQUIRE_THROWS_WITH(second_order([&](const Tensor& t) { return ops::group_norm(t, gamma, beta, 2, -1, 1e-3); }),
                      Contains("group_norm_backward") && Contains("first-order only"));
  REQUIRE_THROWS_WITH(second_order([&](const Tensor& t) { return ops::batch_norm(t, gamma, beta, -1, 1e-3).output; }),
                      Contains("batch_norm_backward") && Contains("first-order only"));
  // The composed inference form has every order.
  require_gradgradcheck(
      [&](const auto& in) { return ops::batch_norm_inference(in[0], in[1], in[2], {}, {}, -1, 1e-3); },
      {x, randn({4}, 84), Tensor::uniform({4}, 0.5, 2.0, DType::f64, 85)});
}

TEST_CASE("fused normalizations reject bad input with clear errors", "[normalization]") {
  const Tensor x = randn({2, 3, 4}, 91), g4 = gamma_like(4, 92), g3 = gamma_like(3, 93);
  using Catch::Contains;
  SECTION("layer_norm and rms_norm") {
    REQUIRE_THROWS_WITH(ops::layer_norm(Tensor(), {}, {}, {-1}, 1e-3), Contains("layer_norm") && Contains("undefined"));
    REQUIRE_THROWS_WITH(ops::layer_norm(Tensor::zeros({2, 3}, DType::i64), {}, {}, {-1}, 1e-3),
                        Contains("layer_norm") && Contains("i64") && Contains("[2, 3]"));
    REQUIRE_THROWS_WITH(ops::layer_norm(x, g3, {}, {-1}, 1e-3),
                        Contains("layer_norm") && Contains("gamma") && Contains("[4]") && Contains("[3]"));
    REQUIRE_THROWS_WITH(ops::layer_norm(x, {}, randn({3, 4}, 1), {1}, 1e-3),
                        Contains("beta") && Contains("[3]") && Contains("[3, 4]"));
    REQUIRE_THROWS_WITH(ops::layer_norm(x, g4.to(DType::f32), {}, {-1}, 1e-3),
                        Contains("layer_norm") && Contains("gamma") && Contains("f32"));
    REQUIRE_THROWS_WITH(ops::layer_norm(x, {}, {}, {3}, 1e-3), Contains("layer_norm") && Contains("3"));
    REQUIRE_THROWS_WITH(ops::layer_norm(x, {}, {}, {1, -2}, 1e-3), Contains("layer_norm"));
    REQUIRE_THROWS_WITH(ops::layer_norm(x, {}, {}, {}, 1e-3), Contains("layer_norm") && Contains("at least one axis"));
    REQUIRE_THROWS_WITH(ops::layer_norm(x, {}, {}, {-1}, 0.0), Contains("layer_norm") && Contains("epsilon"));
    REQUIRE_THROWS_WITH(ops::layer_norm(Tensor::zeros({2, 0}, DType::f64), {}, {}, {-1}, 1e-3),
                        Contains("layer_norm") && Contains("zero elements"));
    REQUIRE_THROWS_WITH(ops::rms_norm(x, g3, {-1}, 1e-6), Contains("rms_norm") && Contains("scale") && Contains("[3]"));
    REQUIRE_THROWS_WITH(ops::rms_norm(x, {}, {-1}, -1.0), Contains("rms_norm") && Contains("epsilon"));
  }
  SECTION("group_norm") {
    REQUIRE_THROWS_WITH(ops::group_norm(x, {}, {}, 3, -1, 1e-3),
                        Contains("group_norm") && Contains("channels % groups != 0") && Contains("[2, 3, 4]"));
    REQUIRE_THROWS_WITH(ops::group_norm(x, {}, {}, 8, -1, 1e-3), Contains("channels % groups != 0"));
    REQUIRE_THROWS_WITH(ops::group_norm(x, {}, {}, 0, -1, 1e-3), Contains("group_norm") && Contains("positive"));
    REQUIRE_THROWS_WITH(ops::group_norm(x, {}, {}, 1, 0, 1e-3), Contains("group_norm") && Contains("batch axis"));
    REQUIRE_THROWS_WITH(ops::group_norm(x, {}, {}, 1, 3, 1e-3), Contains("group_norm"));
    REQUIRE_THROWS_WITH(ops::group_norm(randn({4}, 1), {}, {}, 1, -1, 1e-3),
                        Contains("group_norm") && Contains("rank >= 2") && Contains("[4]"));
    REQUIRE_THROWS_WITH(ops::group_norm(x, g3, {}, 2, -1, 1e-3),
                        Contains("group_norm") && Contains("gamma") && Contains("[4]") && Contains("[3]"));
    REQUIRE_THROWS_WITH(ops::group_norm(x, {}, g3, 2, -1, 1e-3), Contains("beta"));
  }
  SECTION("batch_norm and batch_norm_inference") {
    REQUIRE_THROWS_WITH(ops::batch_norm(x, g4, {}, 1, 1e-3),
                        Contains("batch_norm") && Contains("gamma") && Contains("[3]") && Contains("[4]"));
    REQUIRE_THROWS_WITH(ops::batch_norm(x, {}, {}, 5, 1e-3), Contains("batch_norm"));
    REQUIRE_THROWS_WITH(ops::batch_norm(Tensor::zeros({0, 4}, DType::f64), {}, {}, -1, 1e-3),
                        Contains("batch_norm") && Contains("zero elements"));
    REQUIRE_THROWS_WITH(ops::batch_norm(x, {}, {}, -1, std::nan("")), Contains("epsilon"));
    REQUIRE_THROWS_WITH(ops::batch_norm_inference(x, {}, g4, {}, {}, -1, 1e-3),
                        Contains("batch_norm_inference") && Contains("mean and variance are required"));
    REQUIRE_THROWS_WITH(ops::batch_norm_inference(x, g3, g4, {}, {}, -1, 1e-3),
                        Contains("batch_norm_inference") && Contains("mean") && Contains("[4]") && Contains("[3]"));
    REQUIRE_THROWS_WITH(ops::batch_norm_inference(x, g4, g4.to(DType::f32), {}, {}, -1, 1e-3),
                        Contains("variance") && Contains("f32"));
  }
}
