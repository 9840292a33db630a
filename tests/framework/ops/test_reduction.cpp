#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "framework/autograd/gradcheck.hpp"
#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;

namespace {

/// A [4, 3] view of a contiguous [3, 4] tensor: non-contiguous input for gradcheck.
Tensor transposed_input(std::uint64_t seed) { return Tensor::randn({3, 4}, DType::f64, seed).transpose(); }

}  // namespace

TEST_CASE("sum over axes matches hand computation", "[reduction]") {
  const Tensor x = iota({2, 3, 4});
  CHECK(ops::sum(x).shape() == Shape{});
  CHECK(ops::sum(x).item<double>() == 276.0);
  // axis 0: x[0] + x[1] = 12 + 2k
  std::vector<double> axis0;
  for (int k = 0; k < 12; ++k) axis0.push_back(12.0 + 2.0 * k);
  CHECK(ops::sum(x, {0}).shape() == Shape{3, 4});
  CHECK(values(ops::sum(x, {0})) == axis0);
  // last axis: rows of 4 consecutive integers starting at 4r sum to 16r + 6
  const Tensor last = ops::sum(x, {-1});
  CHECK(last.shape() == Shape{2, 3});
  CHECK(values(last) == std::vector<double>{6, 22, 38, 54, 70, 86});
  // axes {0, 2}: sum over i and l of 12i + 4j + l = 2*(4*4j + 6) + 48
  const Tensor outer = ops::sum(x, {2, 0}, /*keepdims=*/true);
  CHECK(outer.shape() == Shape{1, 3, 1});
  CHECK(values(outer) == std::vector<double>{60, 92, 124});
  CHECK(ops::sum(x, {}, /*keepdims=*/true).shape() == Shape{1, 1, 1});
}

TEST_CASE("sum reads non-contiguous and broadcast views", "[reduction]") {
  const Tensor x = iota({2, 3, 4});
  const Tensor t = x.permute({2, 0, 1});  // [4, 2, 3]
  CHECK(values(ops::sum(t, {0})) == values(ops::sum(x, {-1})));
  const Tensor s = x.slice(2, 1, 4, 2);  // columns 1 and 3
  CHECK(values(ops::sum(s, {-1})) == std::vector<double>{4, 12, 20, 28, 36, 44});
  const Tensor b = Tensor::from_vector(std::vector<double>{1, 2, 3}).broadcast_to({5, 3});  // 0 strides
  CHECK(values(ops::sum(b, {0})) == std::vector<double>{5, 10, 15});
  CHECK(ops::sum(b).item<double>() == 30.0);
}

TEST_CASE("sum accumulates float32 in double", "[reduction]") {
  // In float32, 1e8 + 1 == 1e8: a float accumulator would lose all the ones.
  std::vector<float> v{1e8f};
  for (int i = 0; i < 100; ++i) v.push_back(1.0f);
  v.push_back(-1e8f);
  CHECK(ops::sum(Tensor::from_vector(v)).item<float>() == 100.0f);
}

TEST_CASE("sum of an empty reduction is zero and mean of one is an error", "[reduction]") {
  const Tensor e = Tensor::zeros({0, 3}, DType::f64);
  CHECK(values(ops::sum(e, {0})) == std::vector<double>{0, 0, 0});
  CHECK(ops::mean(e, {1}).shape() == Shape{0});  // nothing to average, nothing reduced over zero elements
  REQUIRE_THROWS_WITH(ops::mean(e, {0}), Catch::Contains("mean") && Catch::Contains("zero elements") &&
                                             Catch::Contains("[0, 3]"));
  REQUIRE_THROWS_WITH(ops::max(e), Catch::Contains("max") && Catch::Contains("zero elements"));
  REQUIRE_THROWS_WITH(ops::argmin(e, 0), Catch::Contains("argmin") && Catch::Contains("zero elements"));
}

TEST_CASE("mean and biased var match NumPy", "[reduction]") {
  const Tensor x = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 2, 4, 6, 8}, {2, 4});
  check_close(values(ops::mean(x)), {3.75});
  check_close(values(ops::mean(x, {-1})), {2.5, 5.0});
  check_close(values(ops::var(x, {-1})), {1.25, 5.0});  // numpy.var(ddof=0)
  check_close(values(ops::var(x, {0}, /*keepdims=*/true)), {0.25, 1.0, 2.25, 4.0});
  CHECK(ops::var(x, {0}, true).shape() == Shape{1, 4});
  check_close(values(ops::var(x)), {4.6875});
}

TEST_CASE("max and min, NaN propagates", "[reduction]") {
  const Tensor x = Tensor::from_vector(std::vector<double>{3, -1, 7, 0, 7, -5}, {2, 3});
  CHECK(values(ops::max(x, {1})) == std::vector<double>{7, 7});
  CHECK(values(ops::min(x, {1})) == std::vector<double>{-1, -5});
  CHECK(values(ops::max(x, {0}, true)) == std::vector<double>{3, 7, 7});
  CHECK(ops::min(x).item<double>() == -5.0);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor with_nan = Tensor::from_vector(std::vector<double>{1, nan, 3, 4, 5, 6}, {2, 3});
  const auto m = values(ops::max(with_nan, {1}));
  CHECK(std::isnan(m[0]));
  CHECK(m[1] == 6.0);
  CHECK(std::isnan(values(ops::min(with_nan, {1}))[0]));
}

TEST_CASE("max and min split the gradient between ties", "[reduction]") {
  const Tensor x = Tensor::from_vector(std::vector<double>{1, 3, 3, 2, 5, 0, 0, 0}, {2, 4});
  GradientTape tape({.persistent = true});
  tape.watch(x);
  const Tensor mx = ops::max(x, {1});
  const Tensor mn = ops::min(x, {-1}, /*keepdims=*/true);
  CHECK(values(tape.gradient(mx, {x})[0]) == std::vector<double>{0, 0.5, 0.5, 0, 1, 0, 0, 0});
  check_close(values(tape.gradient(mn, {x})[0]), {1, 0, 0, 0, 0, 1.0 / 3, 1.0 / 3, 1.0 / 3});
}

TEST_CASE("argmax and argmin return the first occurrence as int64", "[reduction]") {
  const Tensor x = Tensor::from_vector(std::vector<double>{1, 5, 5, 0, 2, 2, -1, 2, 7, 7, -3, -3}, {3, 4});
  const Tensor amax = ops::argmax(x);
  CHECK(amax.dtype() == DType::i64);
  CHECK(amax.to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 0, 0});
  CHECK(ops::argmin(x, -1).to_vector<std::int64_t>() == std::vector<std::int64_t>{3, 2, 2});
  CHECK(ops::argmax(x, 0).to_vector<std::int64_t>() == std::vector<std::int64_t>{2, 2, 0, 1});
  CHECK(ops::argmin(x, 0, /*keepdims=*/true).shape() == Shape{1, 4});
  CHECK(ops::argmin(x, 0, true).to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 1, 2, 2});
  // a transposed view gives the same answer as the contiguous copy
  CHECK(ops::argmax(x.transpose(), 0).to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 0, 0});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(ops::argmax(Tensor::from_vector(std::vector<double>{1, nan, 9, nan})).item<std::int64_t>() == 1);
}

TEST_CASE("argmax is not recorded on a tape", "[reduction]") {
  const Tensor x = Tensor::randn({3, 4}, DType::f64, 1);
  GradientTape tape;
  tape.watch(x);
  (void)ops::argmax(x);
  CHECK(tape.recorded_ops().empty());
}

TEST_CASE("logsumexp is stable for large and infinite inputs", "[reduction]") {
  const Tensor x = Tensor::from_vector(std::vector<double>{0.5, -1, 2, 1e4, 1e4, -1e4}, {2, 3});
  check_close(values(ops::logsumexp(x, {1})),
              {std::log(std::exp(0.5) + std::exp(-1.0) + std::exp(2.0)), 1e4 + std::log(2.0)});
  const Tensor f = Tensor::from_vector(std::vector<float>{1e4f, 1e4f, -1e4f}, {3});
  CHECK(ops::logsumexp(f).item<float>() == Approx(1e4f + std::log(2.0f)));
  const Tensor masked = Tensor::from_vector(std::vector<double>{-kInf, 0, -kInf, -kInf, 3, -kInf}, {2, 3});
  const auto lse = values(ops::logsumexp(masked, {0}));
  CHECK(lse[0] == -kInf);  // log(0)
  CHECK(lse[1] == Approx(std::log(1.0 + std::exp(3.0))));
  CHECK(lse[2] == -kInf);
  CHECK(ops::logsumexp(Tensor::from_vector(std::vector<double>{1, kInf})).item<double>() == kInf);

  GradientTape tape;
  tape.watch(masked);
  const auto g = values(tape.gradient(ops::logsumexp(masked, {0}, true), {masked})[0]);
  for (double v : g) CHECK(std::isfinite(v));  // the all -inf columns give zero gradient, not NaN
  check_close(g, {0, 1.0 / (1.0 + std::exp(3.0)), 0, 0, std::exp(3.0) / (1.0 + std::exp(3.0)), 0});
}

TEST_CASE("sum_to reverses broadcasting", "[reduction]") {
  const Tensor x = iota({2, 3, 4});
  const Tensor a = ops::sum_to(x, {3, 1});
  CHECK(a.shape() == Shape{3, 1});
  CHECK(values(a) == std::vector<double>{60, 92, 124});
  CHECK(values(ops::sum_to(x, {4})) == values(ops::sum(x, {0, 1})));
  CHECK(ops::sum_to(x, {}).item<double>() == 276.0);
  CHECK(values(ops::sum_to(x, {1, 1, 4})) == values(ops::sum(x, {0, 1})));
  CHECK(ops::sum_to(x, {2, 3, 4}).id() == x.id());  // nothing to do
  const Tensor b = Tensor::ones({1, 3}, DType::f64).broadcast_to({2, 3});
  CHECK(values(ops::sum_to(b, {1, 3})) == std::vector<double>{2, 2, 2});
}

TEST_CASE("sum_to rejects shapes that do not broadcast to the input", "[reduction][errors]") {
  const Tensor x = iota({2, 3, 4});
  REQUIRE_THROWS_WITH(ops::sum_to(x, {3, 2}), Catch::Contains("sum_to") && Catch::Contains("[2, 3, 4]") &&
                                                  Catch::Contains("[3, 2]"));
  REQUIRE_THROWS_WITH(ops::sum_to(x, {1, 2, 3, 4}), Catch::Contains("sum_to") && Catch::Contains("[1, 2, 3, 4]"));
}

TEST_CASE("reductions reject bad axes, dtypes and undefined tensors", "[reduction][errors]") {
  const Tensor x = iota({2, 3, 4});
  REQUIRE_THROWS_WITH(ops::sum(x, {3}), Catch::Contains("sum") && Catch::Contains("axis 3") &&
                                            Catch::Contains("rank 3"));
  REQUIRE_THROWS_WITH(ops::mean(x, {-4}), Catch::Contains("mean") && Catch::Contains("rank 3"));
  REQUIRE_THROWS_WITH(ops::var(x, {0, 5}), Catch::Contains("var") && Catch::Contains("rank 3"));
  REQUIRE_THROWS_WITH(ops::max(x, {1, -2}), Catch::Contains("max") && Catch::Contains("repeated axis"));
  REQUIRE_THROWS_WITH(ops::logsumexp(x, {7}), Catch::Contains("logsumexp") && Catch::Contains("rank 3"));
  REQUIRE_THROWS_WITH(ops::argmax(x, 3), Catch::Contains("argmax") && Catch::Contains("rank 3"));
  const Tensor ints = Tensor::arange(6);
  REQUIRE_THROWS_WITH(ops::sum(ints), Catch::Contains("sum") && Catch::Contains("float"));
  REQUIRE_THROWS_WITH(ops::var(ints), Catch::Contains("var") && Catch::Contains("float"));
  REQUIRE_THROWS_WITH(ops::argmin(ints), Catch::Contains("argmin") && Catch::Contains("float"));
  REQUIRE_THROWS_WITH(ops::min(Tensor()), Catch::Contains("min") && Catch::Contains("undefined"));
}

TEST_CASE("reduction gradients pass gradcheck", "[reduction][gradcheck]") {
  const Tensor x = Tensor::randn({2, 3, 4}, DType::f64, 11);
  const Tensor t = transposed_input(12);
  for (bool keepdims : {false, true}) {
    for (const Axes& axes : {Axes{}, Axes{0}, Axes{-1}, Axes{0, 2}, Axes{-2, -1}}) {
      INFO("axes " << axes.size() << " keepdims " << keepdims);
      require_gradcheck([&](const auto& in) { return ops::sum(in[0], axes, keepdims); }, {x});
      require_gradcheck([&](const auto& in) { return ops::mean(in[0], axes, keepdims); }, {x});
      require_gradcheck([&](const auto& in) { return ops::var(in[0], axes, keepdims); }, {x});
      require_gradcheck([&](const auto& in) { return ops::max(in[0], axes, keepdims); }, {x});
      require_gradcheck([&](const auto& in) { return ops::min(in[0], axes, keepdims); }, {x});
      require_gradcheck([&](const auto& in) { return ops::logsumexp(in[0], axes, keepdims); }, {x});
    }
    require_gradcheck([&](const auto& in) { return ops::sum(in[0], {0}, keepdims); }, {t});
    require_gradcheck([&](const auto& in) { return ops::mean(in[0], {-1}, keepdims); }, {t});
    require_gradcheck([&](const auto& in) { return ops::var(in[0], {0}, keepdims); }, {t});
    require_gradcheck([&](const auto& in) { return ops::max(in[0], {1}, keepdims); }, {t});
    require_gradcheck([&](const auto& in) { return ops::min(in[0], {0}, keepdims); }, {t});
    require_gradcheck([&](const auto& in) { return ops::logsumexp(in[0], {-1}, keepdims); }, {t});
  }
  for (const Shape& target : {Shape{3, 1}, Shape{4}, Shape{}, Shape{2, 1, 4}, Shape{1, 3, 4}})
    require_gradcheck([&](const auto& in) { return ops::sum_to(in[0], target); }, {x});
  require_gradcheck([&](const auto& in) { return ops::sum_to(in[0], {1, 3}); }, {t});
}

TEST_CASE("sum, mean, var and logsumexp have second derivatives", "[reduction][gradcheck]") {
  const Tensor x = Tensor::randn({3, 4}, DType::f64, 21);
  const Tensor t = transposed_input(22);
  for (const Tensor& in0 : {x, t}) {
    require_gradgradcheck([](const auto& in) { return ops::sum(in[0], {1}); }, {in0});
    require_gradgradcheck([](const auto& in) { return ops::sum(ops::square(in[0]), {0}, true); }, {in0});
    require_gradgradcheck([](const auto& in) { return ops::mean(in[0] * in[0] * in[0], {-1}); }, {in0});
    require_gradgradcheck([](const auto& in) { return ops::mean(ops::square(in[0])); }, {in0});
    require_gradgradcheck([](const auto& in) { return ops::var(in[0], {0}); }, {in0});
    require_gradgradcheck([](const auto& in) { return ops::logsumexp(in[0], {-1}); }, {in0});
    require_gradgradcheck([](const auto& in) { return ops::logsumexp(in[0], {}, true); }, {in0});
    require_gradgradcheck([](const auto& in) { return ops::sum_to(ops::square(in[0]), {1, in[0].shape()[1]}); }, {in0});
  }
}

TEST_CASE("float32 and float64 reductions agree", "[reduction]") {
  const Tensor x64 = Tensor::randn({5, 6, 7}, DType::f64, 31) * 3.0;
  const Tensor x32 = x64.to(DType::f32);
  const auto agree = [](const Tensor& a, const Tensor& b) {
    CHECK(a.dtype() == DType::f32);
    check_close(values(a), values(b), 1e-5);
  };
  agree(ops::sum(x32, {1}), ops::sum(x64, {1}));
  agree(ops::mean(x32, {0, 2}), ops::mean(x64, {0, 2}));
  agree(ops::var(x32, {-1}), ops::var(x64, {-1}));
  agree(ops::max(x32, {2}), ops::max(x64, {2}));
  agree(ops::min(x32), ops::min(x64));
  agree(ops::logsumexp(x32, {1}), ops::logsumexp(x64, {1}));
  agree(ops::sum_to(x32, {6, 1}), ops::sum_to(x64, {6, 1}));
  CHECK(ops::argmax(x32, 1).to_vector<std::int64_t>() == ops::argmax(x64, 1).to_vector<std::int64_t>());
}
