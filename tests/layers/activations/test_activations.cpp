#include <catch2/catch.hpp>

#include <cmath>

#include <set>

#include "framework/ops/ops.hpp"
#include "layers/activations/activation.hpp"
#include "layers/activations/activation_functions.hpp"
#include "loom.hpp"
#include "tests/fixture_reader.hpp"
#include "tests/layers/core_layer_fixtures.hpp"
#include "tests/temp_files.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;
namespace A = loom::layers::activations;

TEST_CASE("activations match Keras through the Activation layer", "[activations]") {
  for (const auto& c : core_layer_cases("activation"))
    check_against_keras(c, [&c] { return std::make_shared<L::Activation>(c.option("activation")); });
}

TEST_CASE("every activation name matches Keras in float64, values and gradients", "[activations]") {
  // tests/fixtures/make_activation_fixtures.py: every name of keras.activations.get but "threshold".
  std::set<std::string> covered;
  for (const auto& c : read_fixture_cases("activation_fixtures.txt")) {
    INFO("fixture case " << c.name);
    const std::string& name = c.option("activation");
    covered.insert(name);
    const Tensor x = c.array("x").tensor();
    GradientTape tape;
    tape.watch(x);
    const Tensor y = A::get(name)(x);
    REQUIRE(y.shape() == c.array("y").shape);
    check_close(values(y), c.array("y").values, 1e-12, 1e-12);
    const Tensor d_x = tape.gradient(ops::sum(y * c.array("c").tensor()), {x})[0];
    check_close(values(d_x), c.array("d_x").values, 1e-12, 1e-12);
  }
  const auto names = A::names();
  CHECK(covered == std::set<std::string>(names.begin(), names.end()));
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
  check_close(values(A::get("celu")(x)), map([](double v) { return v > 0 ? v : std::expm1(v); }), 1e-15);
  check_close(values(A::celu(x, 2.0)), map([](double v) { return v > 0 ? v : 2.0 * std::expm1(v / 2.0); }),
              1e-15);
  check_close(values(A::get("squareplus")(x)), map([](double v) { return (v + std::sqrt(v * v + 4.0)) / 2; }));
  check_close(values(A::get("hard_shrink")(x)), map([](double v) { return std::abs(v) > 0.5 ? v : 0.0; }));
  check_close(values(A::soft_shrink(x, 1.0)),
              map([](double v) { return v > 1 ? v - 1 : (v < -1 ? v + 1 : 0.0); }));
  check_close(values(A::threshold(x, 0.4, -9.0)), map([](double v) { return v > 0.4 ? v : -9.0; }));
  // glu halves the last axis; sparsemax gives a distribution, sparse where x spreads out
  check_close(values(A::get("glu")(f64({1, 0, 2, 3}, {2, 2}))), {0.5, 2.0 / (1.0 + std::exp(-3.0))});
  const auto sm = values(A::get("sparsemax")(f64({0.3, 1.2, -0.5, 0.9}, {1, 4})));
  check_close(sm, {0.0, 0.65, 0.0, 0.35}, 1e-15, 1e-15);
  check_close(values(A::sparsemax(m, 0)), {1, 1, 1, 0, 0, 0}, 0.0, 0.0);
  // large |x| stays finite where it should
  CHECK(std::isfinite(values(A::softplus(vec({800.0})))[0]));
  CHECK(values(A::softplus(vec({-800.0})))[0] == 0.0);
}

TEST_CASE("every activation gradchecks to second order in float64", "[activations]") {
  // Points away from the kinks (0 for relu-like, -3 and 3 for hard_sigmoid, 6 for relu6, -1, -0.5, 0.5 and 1
  // for the shrinks and the sparse ones, and where sparsemax's support changes).
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

TEST_CASE("the Activation layer and Dense accept every name", "[layers][activation]") {
  const Tensor x = randn({2, 6}, 2).to(DType::f64);
  for (const auto& name : A::names()) {
    INFO(name);
    L::Activation act(name);
    check_close(values(act(x)), values(A::get(name)(x)), 0.0, 0.0);
    L::Dense dense(4, {.activation = name});
    const Tensor y = dense(x);
    CHECK(y.shape() == Shape{2, name == "glu" ? 2 : 4});
    check_close(values(y), values(A::get(name)(ops::dense(x, dense.kernel(), dense.bias()))));
  }
}

TEST_CASE("layers take a callable activation, which they cannot save", "[layers][activation]") {
  using Catch::Contains;
  const auto tanh_gelu = [](const Tensor& x) { return ops::gelu(x, /*approximate=*/true); };
  const Tensor x = randn({2, 3}, 3).to(DType::f64);
  L::Dense dense(4, {.activation = tanh_gelu, .name = "tanh_gelu_dense"});
  const Tensor y = dense(x);
  check_close(values(y), values(ops::gelu(ops::dense(x, dense.kernel(), dense.bias()), true)), 0.0, 0.0);
  CHECK(dense.options().activation.is_callable());
  CHECK_FALSE(dense.options().activation == "gelu");
  CHECK(L::Dense(4, {.activation = "gelu"}).options().activation == "gelu");
  require_gradcheck([&](const std::vector<Tensor>& in) { return dense(in[0]); }, {x});
  // a plain function, in the Activation layer and a convolution
  L::Activation act(A::mish);
  check_close(values(act(x)), values(A::mish(x)), 0.0, 0.0);
  L::Conv1D conv(2, {1}, {.activation = A::hard_tanh});
  const Tensor z = randn({1, 3, 2}, 4);
  const Tensor conv_y = conv(z);
  check_close(values(conv_y), values(A::hard_tanh(ops::conv(z, conv.kernel()) + conv.bias())));

  const TempDir dir("callable-activation");
  auto model = L::Sequential({L::Input({3}), L::Dense(4, {.activation = tanh_gelu, .name = "tanh_gelu_dense"})});
  CHECK_THROWS_WITH(model.save(dir.file("m.keras")), Contains("tanh_gelu_dense") && Contains("callable"));
  auto named = L::Sequential({L::Input({3}), L::Activation(A::mish, {.name = "mish_act"})});
  CHECK_THROWS_WITH(named.save(dir.file("n.keras")), Contains("mish_act") && Contains("callable"));
}

TEST_CASE("unknown activations are errors listing the known names", "[activations][errors]") {
  using Catch::Contains;
  const auto names = A::names();
  CHECK(names.size() == 31);  // keras.activations' names but "threshold"
  for (const auto& name : names) REQUIRE_THROWS_WITH(A::get("rectifier"), Contains("'rectifier'") && Contains(name));
  REQUIRE_THROWS_WITH(A::glu(f64({1, 2, 3}, {3})), Contains("glu") && Contains("even"));
  REQUIRE_THROWS_WITH(L::Activation("Relu", {.name = "act"}), Contains("act") && Contains("'Relu'"));
  L::Activation act("relu", {.name = "act2"});
  REQUIRE_THROWS_WITH(act(Tensor::arange(3)), Contains("act2") && Contains("i64"));
}
