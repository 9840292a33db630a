#include <catch2/catch.hpp>

#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "layers/core/dense.hpp"
#include "tests/layers/core_layer_fixtures.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

TEST_CASE("Dense builds a kernel of in x units and a bias of units on the last axis", "[layers][dense]") {
  for (const Shape& input : {Shape{3, 5}, Shape{2, 4, 5}, Shape{2, 3, 2, 5}}) {
    L::Dense layer(4);
    Shape expect = input;
    expect.back() = 4;
    CHECK(layer.compute_output_shape(input) == expect);
    const Tensor y = layer(Tensor::ones(input));
    CHECK(y.shape() == expect);
    CHECK(y.dtype() == DType::f32);
    CHECK(layer.kernel().shape() == Shape{5, 4});
    CHECK(layer.bias().shape() == Shape{4});
    CHECK(layer.count_params() == 24);
    CHECK(layer.units() == 4);
  }
  L::Dense no_bias(3, {.use_bias = false});
  no_bias(Tensor::ones({2, 6}));
  CHECK_FALSE(no_bias.bias().defined());
  CHECK(no_bias.weights().size() == 1);
  CHECK(no_bias.count_params() == 18);
}

TEST_CASE("Dense layers are named dense, dense_1, ... with weights kernel then bias", "[layers][dense]") {
  L::reset_layer_names();
  L::Dense a(2), b(2), c(2, {.name = "logits"});
  CHECK(a.name() == "dense");
  CHECK(b.name() == "dense_1");
  CHECK(c.name() == "logits");
  CHECK(L::Dense(2).name() == "dense_2");
  b(Tensor::ones({1, 3}));
  c(Tensor::ones({1, 3}));
  REQUIRE(b.weights().size() == 2);
  CHECK(b.weights()[0].name() == "dense_1/kernel");
  CHECK(b.weights()[1].name() == "dense_1/bias");
  CHECK(c.trainable_weights()[0].name() == "logits/kernel");
  CHECK(c.non_trainable_weights().empty());
}

TEST_CASE("Dense takes its weights' dtype from the first input and its initializers from the options",
          "[layers][dense]") {
  L::Dense layer(3, {.kernel_initializer = "ones", .bias_initializer = L::initializers::constant(0.5)});
  const Tensor y = layer(Tensor::ones({2, 4}, DType::f64));
  CHECK(layer.dtype() == DType::f64);
  CHECK(layer.kernel().dtype() == DType::f64);
  check_close(values(y), std::vector<double>(6, 4.5));
  // Seeded initializers give the same weights to two layers.
  L::Dense p(3, {.kernel_initializer = L::initializers::glorot_uniform(7)});
  L::Dense q(3, {.kernel_initializer = L::initializers::glorot_uniform(7)});
  p(Tensor::ones({1, 4}));
  q(Tensor::ones({1, 4}));
  CHECK(values(p.kernel().value()) == values(q.kernel().value()));
}

TEST_CASE("Dense matches Keras on the reference fixtures", "[layers][dense]") {
  for (const auto& c : core_layer_cases("dense")) {
    check_against_keras(c, [&c] {
      return std::make_shared<L::Dense>(std::stoll(c.option("units")),
                                        L::DenseOptions{.activation = c.option_or("activation", ""),
                                                        .use_bias = c.option_or("use_bias", "1") == "1"});
    });
  }
}

TEST_CASE("Dense equals matmul plus bias, then the activation", "[layers][dense]") {
  L::Dense layer(3, {.activation = "relu", .bias_initializer = L::initializers::random_normal(0, 1, 2)});
  const Tensor x = randn({2, 4, 5}, 1);
  const Tensor y = layer(x);
  const Tensor expect = ops::relu(ops::matmul(x, layer.kernel()) + layer.bias().value());
  check_close(values(y), values(expect), 1e-12);
  // float32 agrees with float64 to float32 precision
  L::Dense single(3, {.activation = "relu"});
  single.maybe_build(x.shape(), DType::f32);
  single.weights()[0].assign(layer.kernel().value().to(DType::f32));
  single.weights()[1].assign(layer.bias().value().to(DType::f32));
  check_close(values(single(x.to(DType::f32))), values(y), 1e-5);
}

TEST_CASE("Dense gradchecks with respect to the input and every weight", "[layers][dense]") {
  for (const Shape& input : {Shape{3, 4}, Shape{2, 3, 4}}) {
    L::Dense layer(2, {.activation = "tanh", .bias_initializer = L::initializers::random_normal(0, 0.5, 1)});
    layer.maybe_build(input, DType::f64);
    require_gradcheck([&](const std::vector<Tensor>& in) { return layer(in[0]); },
                      {randn(input, 2), layer.weights()[0].value(), layer.weights()[1].value()});
  }
  // a transposed (non-contiguous) input
  L::Dense layer(2);
  layer.maybe_build({3, 4}, DType::f64);
  require_gradcheck([&](const std::vector<Tensor>& in) { return layer(in[0]); },
                    {randn({4, 3}, 3).transpose(), layer.weights()[0].value(), layer.weights()[1].value()});
}

TEST_CASE("Dense trains: one gradient step lowers the loss", "[layers][dense]") {
  L::Dense layer(2, {.kernel_initializer = L::initializers::glorot_uniform(3)});
  const Tensor x = randn({8, 3}, 4);
  const Tensor target = randn({8, 2}, 5);
  layer.maybe_build(x.shape(), DType::f64);
  const auto loss_of = [&] { return ops::mean(ops::square(layer(x) - target)); };
  const double before = loss_of().item<double>();
  auto w = layer.trainable_weights();
  const std::vector<double> kernel_before = values(w[0].value());
  {
    GradientTape tape;
    const Tensor loss = loss_of();
    const auto grads = tape.gradient(loss, w);
    for (std::size_t i = 0; i < w.size(); ++i) w[i].assign_sub(grads[i] * 0.1);
  }
  CHECK(values(w[0].value()) != kernel_before);
  CHECK(loss_of().item<double>() < before);
}

TEST_CASE("a frozen Dense has no trainable weights and is not watched", "[layers][dense]") {
  L::Dense layer(2);
  layer(Tensor::ones({1, 3}));
  layer.set_trainable(false);
  CHECK(layer.trainable_weights().empty());
  CHECK(layer.non_trainable_weights().size() == 2);
  CHECK(layer.count_params() == 8);
  GradientTape tape;
  const Tensor x = Tensor::ones({1, 3});
  tape.watch(x);
  const auto grads = tape.gradient(ops::sum(layer(x)), std::vector<Tensor>{x, layer.kernel()}, {},
                                   UnconnectedGradients::none);
  CHECK(grads[0].defined());  // the input still gets its gradient
  CHECK_FALSE(grads[1].defined());
}

TEST_CASE("Dense rejects bad units and inputs", "[layers][dense][errors]") {
  using Catch::Contains;
  REQUIRE_THROWS_WITH(L::Dense(0, {.name = "d0"}), Contains("d0") && Contains("units"));
  REQUIRE_THROWS_WITH(L::Dense(2, {.activation = "swishy", .name = "d1"}), Contains("d1") && Contains("swishy"));
  L::Dense layer(2, {.name = "head"});
  REQUIRE_THROWS_WITH(layer(Tensor::ones({3})), Contains("head") && Contains("rank >= 2") && Contains("[3]"));
  REQUIRE_THROWS_WITH(layer.compute_output_shape({4}), Contains("head"));
  layer(Tensor::ones({2, 3}));
  REQUIRE_THROWS_WITH(layer(Tensor::ones({2, 4})), Contains("head") && Contains("[2, 4]") && Contains("[3, 2]"));
  REQUIRE_THROWS_WITH(layer.compute_output_shape({2, 4}), Contains("head") && Contains("[2, 4]"));
  REQUIRE_THROWS_WITH(layer(Tensor::ones({2, 3}, DType::f64)), Contains("head") && Contains("f64"));
  REQUIRE_THROWS_WITH(layer(Tensor::zeros({2, 3}, DType::i64)), Contains("head") && Contains("i64"));
}
