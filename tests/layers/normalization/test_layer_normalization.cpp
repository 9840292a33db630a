#include <catch2/catch.hpp>

#include "framework/ops/ops.hpp"
#include "layers/normalization/layer_normalization.hpp"
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
