#include <catch2/catch.hpp>

#include "framework/ops/ops.hpp"
#include "layers/normalization/layer_normalization.hpp"
#include "loom.hpp"
#include "tests/layers/merging_pooling_fixtures.hpp"
#include "tests/layers/normalization/normalization_helpers.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

namespace {

L::LayerNormalization from_case(const FixtureCase& c) {
  return L::LayerNormalization({.axis = axes_option(c),
                                .epsilon = number_option(c, "epsilon", 1e-3),
                                .center = flag_option(c, "center"),
                                .scale = flag_option(c, "scale")});
}

}  // namespace

TEST_CASE("LayerNormalization creates gamma then beta shaped by the normalized axes", "[layers][layer_normalization]") {
  L::reset_layer_names();
  L::LayerNormalization ln({.axis = -1, .epsilon = 1e-3, .center = true, .scale = true});
  CHECK(ln.name() == "layer_normalization");
  const Tensor y = ln(Tensor::randn({2, 3, 4}, DType::f32, 1));
  CHECK(y.shape() == Shape{2, 3, 4});
  CHECK(ln.compute_output_shape({2, 3, 4}) == y.shape());
  auto w = ln.weights();
  REQUIRE(w.size() == 2);
  CHECK(w[0].name() == "layer_normalization/gamma");
  CHECK(w[1].name() == "layer_normalization/beta");
  CHECK(w[0].shape() == Shape{4});
  CHECK(values(w[0].value()) == std::vector<double>(4, 1.0));
  CHECK(values(w[1].value()) == std::vector<double>(4, 0.0));
  CHECK(ln.count_params() == 8);

  L::LayerNormalization ln2({.axis = {1, -1}});
  CHECK(ln2.name() == "layer_normalization_1");
  ln2(Tensor::randn({5, 2, 3, 4}, DType::f32, 2));
  CHECK(ln2.axes() == std::vector<std::int64_t>{1, 3});
  CHECK(ln2.weights()[0].shape() == Shape{2, 4});
  CHECK(ln2.weights()[1].shape() == Shape{2, 4});

  L::LayerNormalization bare({.center = false, .scale = false});
  bare(Tensor::randn({2, 3}, DType::f32, 3));
  CHECK(bare.weights().empty());
  L::LayerNormalization scale_only({.center = false, .gamma_initializer = L::initializers::constant(2.0)});
  scale_only(Tensor::randn({2, 3}, DType::f32, 3));
  REQUIRE(scale_only.weights().size() == 1);
  CHECK(short_name(scale_only.weights()[0]) == "gamma");
  CHECK(values(scale_only.weights()[0].value()) == std::vector<double>(3, 2.0));
}

TEST_CASE("LayerNormalization matches Keras (outputs and gradients, f64 and f32)", "[layers][layer_normalization]") {
  for (const auto& c : normalization_cases("LayerNormalization"))
    for (DType dtype : {DType::f64, DType::f32}) {
      L::LayerNormalization ln = from_case(c);
      check_against_keras(ln, c, dtype);
    }
}

TEST_CASE("LayerNormalization passes gradcheck w.r.t. input, gamma and beta", "[layers][layer_normalization]") {
  for (const auto& axis : {Axes(-1), Axes({0, 2})}) {
    L::LayerNormalization ln({.axis = axis});
    const Tensor x = randn({3, 2, 4}, 11) * 2.0 + 1.0;
    ln(x);
    auto w = ln.weights();
    w[0].assign(Tensor::uniform(w[0].shape(), 0.5, 1.5, DType::f64, 12));
    w[1].assign(randn(w[1].shape(), 13));
    require_gradcheck([&](const std::vector<Tensor>& in) { return ln(in[0]); }, {x, w[0].value(), w[1].value()});
  }
}

TEST_CASE("LayerNormalization trains: one step lowers the loss", "[layers][layer_normalization]") {
  L::LayerNormalization ln;
  const auto [before, after] = one_training_step(ln, randn({8, 6}, 21), randn({8, 6}, 22), 0.5);
  CHECK(after < before);
}

TEST_CASE("LayerNormalization rejects bad options and inputs", "[layers][layer_normalization]") {
  using Catch::Contains;
  L::reset_layer_names();
  REQUIRE_THROWS_WITH(L::LayerNormalization({.axis = std::vector<std::int64_t>{}}),
                      Contains("layer_normalization") && Contains("at least one axis"));
  REQUIRE_THROWS_WITH(L::LayerNormalization({.epsilon = 0.0}), Contains("epsilon"));
  L::LayerNormalization ln({.axis = 3, .name = "ln"});
  REQUIRE_THROWS_WITH(ln(randn({2, 3}, 1)), Contains("ln") && Contains("3"));
  L::LayerNormalization twice({.axis = {1, -2}, .name = "twice"});
  REQUIRE_THROWS_WITH(twice(randn({2, 3, 4}, 1)), Contains("twice"));
  L::LayerNormalization built({.name = "built"});
  built(randn({2, 3}, 1));
  REQUIRE_THROWS_WITH(built(randn({2, 4}, 1)), Contains("built") && Contains("[2, 3]") && Contains("[2, 4]"));
  REQUIRE_THROWS_WITH(built(randn({2, 2, 3}, 1)), Contains("built") && Contains("rank 2"));
  REQUIRE_THROWS_WITH(built(randn({2, 3}, 1, DType::f32)), Contains("built") && Contains("f64") && Contains("f32"));
  REQUIRE_THROWS_WITH(built(Tensor()), Contains("built") && Contains("undefined"));
}

TEST_CASE("LayerNormalization rms_scaling matches Keras (outputs and gradients, f64 and f32)",
          "[layers][layer_normalization]") {
  for (const auto& c : merging_pooling_cases("LayerNormalization"))
    for (DType dtype : {DType::f64, DType::f32}) {
      L::LayerNormalization ln({.axis = c.options.count("axis") ? Axes(int_list_option(c, "axis")) : Axes(-1),
                                .epsilon = number_option(c, "epsilon", 1e-3),
                                .center = flag_option(c, "center"),
                                .scale = flag_option(c, "scale"),
                                .rms_scaling = flag_option(c, "rms_scaling", false)});
      check_against_keras(ln, c, dtype);
    }
}

TEST_CASE("LayerNormalization rms_scaling has gamma only, and x / sqrt(var + epsilon) * gamma",
          "[layers][layer_normalization]") {
  L::reset_layer_names();
  L::LayerNormalization ln({.rms_scaling = true});
  CHECK(ln.rms_scaling());
  CHECK(ln.options().center);
  CHECK_FALSE(L::LayerNormalization().rms_scaling());
  const Tensor x = randn({3, 5}, 1) * 2.0 + 3.0;
  const Tensor y = ln(x);
  REQUIRE(ln.weights().size() == 1);
  CHECK(short_name(ln.weights()[0]) == "gamma");
  const Tensor want = x / ops::sqrt(ops::var(x, {-1}, true) + 1e-3);
  check_close(values(y), values(want), 1e-12);
  // As Keras: gamma even without scale; no beta even with center.
  L::LayerNormalization unscaled({.center = true, .scale = false, .rms_scaling = true});
  unscaled(x);
  REQUIRE(unscaled.weights().size() == 1);
  CHECK(short_name(unscaled.weights()[0]) == "gamma");
  // The op itself refuses a beta it would ignore.
  CHECK_THROWS_WITH(ops::layer_norm(x, Tensor(), Tensor::zeros({5}, DType::f64), {-1}, 1e-3, true),
                    Catch::Contains("layer_norm") && Catch::Contains("rms_scaling") && Catch::Contains("beta"));
  CHECK_THROWS_WITH(ops::layer_norm(Tensor(), Tensor(), Tensor(), {-1}, 1e-3, true),
                    Catch::Contains("layer_norm") && Catch::Contains("undefined"));
  // On symbolic tensors the option is kept in the graph.
  Tensor in = loom::Input({5}, {.dtype = DType::f64});
  L::LayerNormalization symbolic({.rms_scaling = true});
  loom::Model m(in, symbolic(in));
  check_close(values(m.predict(x, {.verbose = 0})), values(want), 1e-12);
}

TEST_CASE("LayerNormalization rms_scaling passes gradcheck w.r.t. input and gamma", "[layers][layer_normalization]") {
  for (const auto& axis : {Axes(-1), Axes({0, 2}), Axes(1)}) {
    L::LayerNormalization ln({.axis = axis, .rms_scaling = true});
    const Tensor x = randn({3, 2, 4}, 11) * 2.0 + 1.0;
    ln(x);
    auto w = ln.weights();
    REQUIRE(w.size() == 1);
    w[0].assign(Tensor::uniform(w[0].shape(), 0.5, 1.5, DType::f64, 12));
    require_gradcheck([&](const std::vector<Tensor>& in) { return ln(in[0]); }, {x, w[0].value()});
  }
  // A large mean against the spread: the backward keeps its precision (dx is taken around the mean).
  L::LayerNormalization ln({.rms_scaling = true});
  const Tensor x = randn({4, 6}, 13) + 1e3;
  require_gradcheck([&](const std::vector<Tensor>& in) { return ln(in[0]); }, {x});
  // float32 gradients at that mean agree with float64's (on the same, float32-rounded, input).
  const Tensor x32 = x.to(DType::f32).to(DType::f64), c = randn({4, 6}, 14);
  std::vector<std::vector<double>> grads;
  for (DType dtype : {DType::f64, DType::f32}) {
    L::LayerNormalization typed({.rms_scaling = true});
    const Tensor xt = x32.to(dtype);
    GradientTape tape;
    tape.watch(xt);
    const Tensor loss = ops::sum(typed(xt) * c.to(dtype));
    grads.push_back(values(tape.gradient(loss, std::vector<Tensor>{xt})[0]));
  }
  check_close(grads[1], grads[0], 1e-5, 1e-5);
}
