#include <catch2/catch.hpp>

#include <cmath>

#include "framework/ops/ops.hpp"
#include "layers/activations/activation.hpp"
#include "layers/activations/activation_functions.hpp"
#include "tests/layers/core_layer_fixtures.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;
namespace A = loom::layers::activations;

TEST_CASE("activations match Keras by name, values and gradients", "[activations]") {
  std::size_t checked = 0;
  for (const auto& c : core_layer_cases("activation")) {
    check_against_keras(c, [&c] { return std::make_shared<L::Activation>(c.option("activation")); });
    ++checked;
  }
  CHECK(checked + 1 == A::names().size());  // every name but tanh (see the fixture script)
}

TEST_CASE("activations compute their formulas", "[activations]") {
  const Tensor x = vec({-30.0, -2.0, -0.5, 0.0, 0.5, 2.0, 30.0});
  const auto map = [&](double (*f)(double)) {
    std::vector<double> out;
    for (double v : values(x)) out.push_back(f(v));
    return out;
  };
  check_close(values(A::get("tanh")(x)), map([](double v) { return std::tanh(v); }));
  check_close(values(A::get("linear")(x)), values(x), 0.0);
  check_close(values(A::get("")(x)), values(x), 0.0);
  check_close(values(A::get("elu")(x)), map([](double v) { return v > 0 ? v : std::expm1(v); }), 1e-15);
  check_close(values(A::get("softplus")(x)),
              map([](double v) { return std::log1p(std::exp(-std::abs(v))) + std::max(v, 0.0); }));
  check_close(values(A::get("leaky_relu")(x)), map([](double v) { return v >= 0 ? v : 0.2 * v; }));
  check_close(values(A::leaky_relu(x, 1.5)), map([](double v) { return v >= 0 ? v : 1.5 * v; }));
  check_close(values(A::get("silu")(x)), map([](double v) { return v / (1 + std::exp(-v)); }));
  check_close(values(A::get("exponential")(x)), map([](double v) { return std::exp(v); }));
  check_close(values(A::get("selu")(vec({-1.0, 1.0}))),
              {1.0507009873554804934 * 1.6732632423543772848 * std::expm1(-1.0), 1.0507009873554804934}, 1e-15);
  // softmax and log_softmax act on the last axis
  const Tensor m = f64({1, 2, 3, 0, 0, 0}, {2, 3});
  const auto s = values(A::get("softmax")(m));
  CHECK(s[0] + s[1] + s[2] == Approx(1.0));
  CHECK(s[3] == Approx(1.0 / 3));
  check_close(values(A::get("log_softmax")(m)), values(ops::log(A::get("softmax")(m))));
  // large |x| stays finite where it should
  CHECK(std::isfinite(values(A::softplus(vec({800.0})))[0]));
  CHECK(values(A::softplus(vec({-800.0})))[0] == 0.0);
}

TEST_CASE("every activation gradchecks to second order in float64", "[activations]") {
  // Points away from the kinks (0 for relu-like, -3 and 3 for hard_sigmoid, 6 for relu6).
  const Tensor x = f64({-3.7, -1.3, -0.4, 0.3, 1.1, 2.2, 4.5, 7.1}, {2, 4});
  for (const auto& name : A::names()) {
    INFO(name);
    const auto f = A::get(name);
    require_gradcheck([&](const std::vector<Tensor>& in) { return f(in[0]); }, {x});
    require_gradgradcheck([&](const std::vector<Tensor>& in) { return f(in[0]); }, {x});
    // a transposed input
    require_gradcheck([&](const std::vector<Tensor>& in) { return f(in[0]); }, {x.transpose()});
    // float32 agrees with float64
    check_close(values(f(x.to(DType::f32))), values(f(x)), 1e-5, 1e-5);
  }
}

TEST_CASE("the elu family has finite gradients for large inputs", "[activations]") {
  const Tensor x = vec({-1000.0, 1000.0});
  for (const char* name : {"elu", "selu", "softplus", "mish", "silu"}) {
    INFO(name);
    GradientTape tape;
    tape.watch(x);
    const Tensor g = tape.gradient(ops::sum(A::get(name)(x)), {x})[0];
    for (double v : values(g)) CHECK(std::isfinite(v));
  }
}

TEST_CASE("Activation layer applies the named function and keeps the shape", "[layers][activation]") {
  L::reset_layer_names();
  L::Activation act("gelu");
  CHECK(act.name() == "activation");
  CHECK(L::Activation("relu").name() == "activation_1");
  CHECK(act.activation() == "gelu");
  const Tensor x = randn({2, 3, 4}, 1);
  const Tensor y = act(x);
  CHECK(y.shape() == x.shape());
  CHECK(act.compute_output_shape(x.shape()) == x.shape());
  check_close(values(y), values(ops::gelu(x, false)), 0.0);
  CHECK(act.weights().empty());
  require_gradcheck([&](const std::vector<Tensor>& in) { return act(in[0]); }, {x});
}

TEST_CASE("unknown activations are errors listing the known names", "[activations][errors]") {
  using Catch::Contains;
  REQUIRE_THROWS_WITH(A::get("rectifier"), Contains("'rectifier'") && Contains("gelu") && Contains("softmax") &&
                                               Contains("leaky_relu"));
  REQUIRE_THROWS_WITH(L::Activation("Relu", {.name = "act"}), Contains("act") && Contains("'Relu'"));
  L::Activation act("relu", {.name = "act2"});
  REQUIRE_THROWS_WITH(act(Tensor::arange(3)), Contains("act2") && Contains("i64"));
}
