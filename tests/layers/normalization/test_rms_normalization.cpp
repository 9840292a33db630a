#include <catch2/catch.hpp>

#include "framework/ops/ops.hpp"
#include "layers/normalization/rms_normalization.hpp"
#include "tests/layers/normalization/normalization_helpers.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

TEST_CASE("RMSNormalization creates one weight named scale", "[layers][rms_normalization]") {
  L::reset_layer_names();
  L::RMSNormalization rms;
  CHECK(rms.name() == "rms_normalization");
  const Tensor x = Tensor::randn({2, 5}, DType::f32, 1);
  const Tensor y = rms(x);
  CHECK(y.shape() == Shape{2, 5});
  CHECK(rms.compute_output_shape({2, 5}) == y.shape());
  REQUIRE(rms.weights().size() == 1);
  CHECK(rms.weights()[0].name() == "rms_normalization/scale");
  CHECK(rms.weights()[0].shape() == Shape{5});
  CHECK(values(rms.weights()[0].value()) == std::vector<double>(5, 1.0));
  // Default epsilon 1e-6: y = x / sqrt(mean(x^2) + 1e-6).
  check_close(values(y), values(x / ops::sqrt(ops::mean(ops::square(x), {-1}, true) + 1e-6)), 1e-6);

  L::RMSNormalization listed({.axis = {-2, -1}});
  listed(Tensor::randn({2, 3, 4}, DType::f32, 2));
  CHECK(listed.axes() == std::vector<std::int64_t>{1, 2});
  CHECK(listed.weights()[0].shape() == Shape{3, 4});
}

TEST_CASE("RMSNormalization matches Keras (outputs and gradients, f64 and f32)", "[layers][rms_normalization]") {
  for (const auto& c : normalization_cases("RMSNormalization"))
    for (DType dtype : {DType::f64, DType::f32}) {
      L::RMSNormalization rms({.axis = axes_option(c), .epsilon = number_option(c, "epsilon", 1e-6)});
      check_against_keras(rms, c, dtype);
    }
}

TEST_CASE("RMSNormalization passes gradcheck w.r.t. input and scale", "[layers][rms_normalization]") {
  for (const auto& axis : {Axes(-1), Axes({0, 1})}) {
    L::RMSNormalization rms({.axis = axis});
    const Tensor x = randn({3, 2, 4}, 11) + 0.5;
    rms(x);
    auto w = rms.weights();
    w[0].assign(Tensor::uniform(w[0].shape(), 0.5, 1.5, DType::f64, 12));
    require_gradcheck([&](const std::vector<Tensor>& in) { return rms(in[0]); }, {x, w[0].value()});
  }
}

TEST_CASE("RMSNormalization trains: one step lowers the loss", "[layers][rms_normalization]") {
  L::RMSNormalization rms;
  const auto [before, after] = one_training_step(rms, randn({8, 6}, 21), randn({8, 6}, 22), 0.5);
  CHECK(after < before);
}

TEST_CASE("RMSNormalization rejects bad options and inputs", "[layers][rms_normalization]") {
  using Catch::Contains;
  REQUIRE_THROWS_WITH(L::RMSNormalization({.epsilon = -1.0, .name = "r0"}), Contains("r0") && Contains("epsilon"));
  REQUIRE_THROWS_WITH(L::RMSNormalization({.axis = std::vector<std::int64_t>{}, .name = "r1"}),
                      Contains("r1") && Contains("at least one axis"));
  L::RMSNormalization rms({.axis = 2, .name = "r2"});
  REQUIRE_THROWS_WITH(rms(randn({2, 3}, 1)), Contains("r2"));
  L::RMSNormalization built({.name = "r3"});
  built(randn({2, 3}, 1));
  REQUIRE_THROWS_WITH(built(randn({2, 5}, 1)), Contains("r3") && Contains("[3]") && Contains("[2, 5]"));
  REQUIRE_THROWS_WITH(built(randn({2, 3}, 1, DType::f32)), Contains("r3") && Contains("f32"));
}
