#include <catch2/catch.hpp>

#include <cmath>

#include "framework/autograd/gradcheck.hpp"
#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "framework/tensor/random.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;

namespace {

/// softmax of one row, written out.
std::vector<double> softmax_row(const std::vector<double>& x) {
  double total = 0;
  for (double v : x) total += std::exp(v);
  std::vector<double> out;
  for (double v : x) out.push_back(std::exp(v) / total);
  return out;
}

}  // namespace

TEST_CASE("softmax and log_softmax match hand computation", "[nn]") {
  const Tensor x = f64({1, 2, 3, -1, 0, 0.5}, {2, 3});
  std::vector<double> want = softmax_row({1, 2, 3});
  const auto row2 = softmax_row({-1, 0, 0.5});
  want.insert(want.end(), row2.begin(), row2.end());
  check_close(values(ops::softmax(x)), want);
  std::vector<double> logs;
  for (double v : want) logs.push_back(std::log(v));
  check_close(values(ops::log_softmax(x, -1)), logs);
  // along axis 0 each column is a distribution over 2 entries
  const auto col = values(ops::softmax(x, 0));
  check_close({col[0], col[3]}, softmax_row({1, -1}));
  check_close({col[2], col[5]}, softmax_row({3, 0.5}));
  // a transposed (non-contiguous) input gives the transposed answer
  check_close(values(ops::softmax(x.transpose(), 0)), values(ops::softmax(x, 1).transpose()));
  check_close(values(ops::log_softmax(x.transpose(), 0)), values(ops::log_softmax(x, 1).transpose()));
  // rank 3, middle axis
  const Tensor r3 = Tensor::randn({2, 3, 4}, DType::f64, 5);
  check_close(values(ops::sum(ops::softmax(r3, 1), {1})), std::vector<double>(8, 1.0));
}

TEST_CASE("softmax family is finite and exact for logits of +-1e4", "[nn]") {
  for (DType dtype : {DType::f32, DType::f64}) {
    const Tensor x = f64({1e4, -1e4, 0, -1e4, -1e4, -1e4}, {2, 3}).to(dtype);
    check_close(values(ops::softmax(x)), {1, 0, 0, 1.0 / 3, 1.0 / 3, 1.0 / 3}, 1e-6);
    check_close(values(ops::log_softmax(x)), {0, -2e4, -1e4, -std::log(3.0), -std::log(3.0), -std::log(3.0)},
                1e-6);
    check_close(values(ops::logsumexp(x, {-1})), {1e4, -1e4 + std::log(3.0)}, 1e-6);
    check_close(values(ops::log_sigmoid(f64({1e4, -1e4, 0}, {3}).to(dtype))), {0, -1e4, -std::log(2.0)},
                1e-6);
  }
}

TEST_CASE("softmax with -inf entries and fully masked rows", "[nn]") {
  const Tensor x = f64({-kInf, 0, 0, -kInf, -kInf, -kInf}, {2, 3});
  check_close(values(ops::softmax(x)), {0, 0.5, 0.5, 0, 0, 0});  // a fully masked row gives zeros
  check_close(values(ops::log_softmax(x)), {-kInf, -std::log(2.0), -std::log(2.0), -kInf, -kInf, -kInf});
  GradientTape tape({.persistent = true});
  tape.watch(x);
  const Tensor w = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  const auto gs = values(tape.gradient(ops::sum(ops::softmax(x) * w), {x})[0]);
  check_close(gs, {0, -0.25, 0.25, 0, 0, 0});
  const auto gl = values(tape.gradient(ops::log_softmax(x), {x}, w)[0]);
  for (double v : gl) CHECK(std::isfinite(v));
  // +inf has no finite distribution: NaN, as NumPy
  CHECK(std::isnan(values(ops::softmax(f64({kInf, 0}, {2})))[0]));
}

TEST_CASE("softmax and log_softmax gradients pass gradcheck", "[nn][gradcheck]") {
  const Tensor x = Tensor::randn({2, 3, 4}, DType::f64, 1);
  const Tensor t = Tensor::randn({3, 4}, DType::f64, 2).transpose();
  for (std::int64_t axis : {0, 1, 2, -1, -2}) {
    INFO("axis " << axis);
    require_gradcheck([&](const auto& in) { return ops::softmax(in[0], axis); }, {x});
    require_gradcheck([&](const auto& in) { return ops::log_softmax(in[0], axis); }, {x});
  }
  for (std::int64_t axis : {0, -1}) {
    require_gradcheck([&](const auto& in) { return ops::softmax(in[0], axis); }, {t});
    require_gradcheck([&](const auto& in) { return ops::log_softmax(in[0], axis); }, {t});
  }
}

TEST_CASE("softmax and log_softmax have second derivatives", "[nn][gradcheck]") {
  const Tensor x = Tensor::randn({3, 4}, DType::f64, 3);
  const Tensor t = Tensor::randn({4, 3}, DType::f64, 4).transpose();
  for (const Tensor& in0 : {x, t})
    for (std::int64_t axis : {0, -1}) {
      require_gradgradcheck([&](const auto& in) { return ops::softmax(in[0], axis); }, {in0});
      require_gradgradcheck([&](const auto& in) { return ops::log_softmax(in[0], axis); }, {in0});
    }
}

TEST_CASE("log_sigmoid is stable and differentiable", "[nn]") {
  const Tensor x = f64({-800, -30, -1, 0, 0.5, 30, 800}, {7});
  std::vector<double> want;
  for (double v : values(x)) want.push_back(v < 0 ? v - std::log1p(std::exp(v)) : -std::log1p(std::exp(-v)));
  check_close(values(ops::log_sigmoid(x)), want);
  const Tensor r = Tensor::randn({3, 4}, DType::f64, 6) * 3.0;
  require_gradcheck([](const auto& in) { return ops::log_sigmoid(in[0]); }, {r});
  require_gradcheck([](const auto& in) { return ops::log_sigmoid(in[0]); }, {r.transpose()});
  require_gradgradcheck([](const auto& in) { return ops::log_sigmoid(in[0]); }, {r});
  REQUIRE_THROWS_WITH(ops::log_sigmoid(Tensor::arange(3)), Catch::Contains("log_sigmoid") &&
                                                               Catch::Contains("float"));
}

TEST_CASE("float32 and float64 softmax family agree", "[nn]") {
  const Tensor x64 = Tensor::randn({4, 5, 6}, DType::f64, 7) * 4.0;
  const Tensor x32 = x64.to(DType::f32);
  for (std::int64_t axis : {0, 1, -1}) {
    check_close(values(ops::softmax(x32, axis)), values(ops::softmax(x64, axis)), 1e-5);
    check_close(values(ops::log_softmax(x32, axis)), values(ops::log_softmax(x64, axis)), 1e-5);
  }
  CHECK(ops::softmax(x32).dtype() == DType::f32);
  check_close(values(ops::log_sigmoid(x32)), values(ops::log_sigmoid(x64)), 1e-5);
}

TEST_CASE("softmax rejects bad axes and non-float input", "[nn][errors]") {
  const Tensor x = Tensor::zeros({2, 3}, DType::f64);
  REQUIRE_THROWS_WITH(ops::softmax(x, 2), Catch::Contains("softmax") && Catch::Contains("axis 2") &&
                                              Catch::Contains("rank 2"));
  REQUIRE_THROWS_WITH(ops::log_softmax(x, -3), Catch::Contains("log_softmax") && Catch::Contains("rank 2"));
  REQUIRE_THROWS_WITH(ops::softmax(Tensor::scalar(1.0)), Catch::Contains("softmax") && Catch::Contains("rank 0"));
  REQUIRE_THROWS_WITH(ops::softmax(Tensor::arange(4)), Catch::Contains("softmax") && Catch::Contains("float"));
  REQUIRE_THROWS_WITH(ops::log_softmax(Tensor()), Catch::Contains("log_softmax") && Catch::Contains("undefined"));
}

TEST_CASE("one_hot encodes int64 labels on a new last axis", "[nn]") {
  const Tensor labels = Tensor::from_vector(std::vector<std::int64_t>{2, 0, 1, 2}, {2, 2});
  const Tensor y = ops::one_hot(labels, 3);
  CHECK(y.shape() == Shape{2, 2, 3});
  CHECK(y.dtype() == DType::f32);
  CHECK(values(y) == std::vector<double>{0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 1});
  const Tensor yt = ops::one_hot(labels.transpose(), 4, DType::f64);  // labels [[2, 1], [0, 2]]
  CHECK(yt.dtype() == DType::f64);
  CHECK(values(yt) == std::vector<double>{0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0});
  CHECK(ops::one_hot(Tensor::from_vector(std::vector<std::int64_t>{}), 5).shape() == Shape{0, 5});
}

TEST_CASE("one_hot rejects out-of-range labels, naming label, position and depth", "[nn][errors]") {
  const Tensor labels = Tensor::from_vector(std::vector<std::int64_t>{0, 1, 5, 2}, {2, 2});
  REQUIRE_THROWS_WITH(ops::one_hot(labels, 4), Catch::Contains("one_hot") && Catch::Contains("label 5") &&
                                                   Catch::Contains("[1, 0]") && Catch::Contains("< 4"));
  REQUIRE_THROWS_WITH(ops::one_hot(Tensor::from_vector(std::vector<std::int64_t>{-1}), 4),
                      Catch::Contains("label -1") && Catch::Contains("[0]"));
  REQUIRE_THROWS_WITH(ops::one_hot(Tensor::zeros({2}), 4), Catch::Contains("one_hot") && Catch::Contains("int64"));
  REQUIRE_THROWS_WITH(ops::one_hot(labels, 0), Catch::Contains("one_hot") && Catch::Contains("depth"));
  REQUIRE_THROWS_WITH(ops::one_hot(labels, 6, DType::i64), Catch::Contains("one_hot") && Catch::Contains("float"));
}

TEST_CASE("dropout is identity at inference and inverted when training", "[nn]") {
  const Tensor x = Tensor::ones({100, 100}, DType::f64);
  CHECK(ops::dropout(x, 0.5, /*training=*/false).id() == x.id());
  CHECK(ops::dropout(x, 0.0, /*training=*/true).id() == x.id());
  const auto y = values(ops::dropout(x, 0.25, true, 42));
  std::size_t zeros = 0;
  for (double v : y) {
    CHECK((v == 0.0 || v == Approx(1.0 / 0.75)));
    zeros += v == 0.0;
  }
  CHECK(double(zeros) / double(y.size()) == Approx(0.25).margin(0.02));
  // the expectation is preserved
  CHECK(ops::mean(ops::dropout(x, 0.25, true, 43)).item<double>() == Approx(1.0).margin(0.03));
}

TEST_CASE("dropout masks are reproducible from a seed or the thread generator", "[nn]") {
  const Tensor x = Tensor::randn({8, 16}, DType::f32, 1);
  CHECK(values(ops::dropout(x, 0.5, true, 7)) == values(ops::dropout(x, 0.5, true, 7)));
  CHECK(values(ops::dropout(x, 0.5, true, 7)) != values(ops::dropout(x, 0.5, true, 8)));
  random::set_seed(99);
  const auto first = values(ops::dropout(x, 0.5, true));
  const auto second = values(ops::dropout(x, 0.5, true));
  CHECK(first != second);  // the generator advances
  random::set_seed(99);
  CHECK(values(ops::dropout(x, 0.5, true)) == first);
}

TEST_CASE("dropout gradient is the scaled mask", "[nn][gradcheck]") {
  const Tensor x = Tensor::randn({6, 7}, DType::f64, 2);
  GradientTape tape;
  tape.watch(x);
  const Tensor y = ops::dropout(x, 0.4, true, 5);
  const auto g = values(tape.gradient(y, {x})[0]);
  const auto yv = values(y);
  const auto xv = values(x);
  for (std::size_t i = 0; i < g.size(); ++i) CHECK(g[i] == Approx(yv[i] / xv[i]));
  require_gradcheck([](const auto& in) { return ops::dropout(in[0], 0.4, true, 5); }, {x});
  require_gradcheck([](const auto& in) { return ops::dropout(in[0], 0.4, true, 5); }, {x.transpose()});
  require_gradgradcheck([](const auto& in) { return ops::dropout(in[0] * in[0], 0.4, true, 5); }, {x});
}

TEST_CASE("dropout rejects rates outside 0 <= rate < 1", "[nn][errors]") {
  const Tensor x = Tensor::ones({3});
  REQUIRE_THROWS_WITH(ops::dropout(x, 1.0, true), Catch::Contains("dropout") && Catch::Contains("rate"));
  REQUIRE_THROWS_WITH(ops::dropout(x, -0.1, false), Catch::Contains("dropout") && Catch::Contains("-0.1"));
  REQUIRE_THROWS_WITH(ops::dropout(x, std::nan(""), true), Catch::Contains("dropout"));
  REQUIRE_THROWS_WITH(ops::dropout(Tensor::arange(3), 0.5, true), Catch::Contains("dropout") &&
                                                                     Catch::Contains("float"));
}
