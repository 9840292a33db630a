#include <catch2/catch.hpp>

#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "layers/core/einsum_dense.hpp"
#include "tests/layers/core_layer_fixtures.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

namespace {

struct ShapeCase {
  std::string equation;
  Shape output_shape;
  std::optional<std::string> bias_axes;
  Shape input, kernel;
  std::optional<Shape> bias;
  Shape output;
  L::Fans fans;
};

// Kernel and bias shapes as Keras's _analyze_einsum_string gives them; fans as Keras 3.15 passes them to
// VarianceScaling (contracted kernel dims -> fan_in, output dims -> fan_out).
const std::vector<ShapeCase> kShapeCases = {
    {"abc,cde->abde", {-1, 2, 3}, "de", {2, 4, 5}, {5, 2, 3}, Shape{2, 3}, {2, 4, 2, 3}, {5, 6}},
    {"abcd,cde->abe", {-1, 5}, "e", {2, 4, 2, 3}, {2, 3, 5}, Shape{5}, {2, 4, 5}, {6, 5}},
    {"ab,bc->ac", {4}, "c", {3, 5}, {5, 4}, Shape{4}, {3, 4}, {5, 4}},
    {"abcd,def->abcef", {-1, -1, 2, 3}, "ef", {2, 3, 2, 4}, {4, 2, 3}, Shape{2, 3}, {2, 3, 2, 2, 3}, {4, 6}},
    {"abc,cde->abde", {-1, 2, 3}, "d", {2, 3, 4}, {4, 2, 3}, Shape{2, 1}, {2, 3, 2, 3}, {4, 6}},
    {"abc,cd->abd", {3, 2}, std::nullopt, {2, 3, 4}, {4, 2}, std::nullopt, {2, 3, 2}, {4, 2}},
    // rank-4 MultiHeadAttention projections (attention over two axes)
    {"abcd,def->abcef", {-1, -1, 3, 2}, "ef", {1, 2, 3, 5}, {5, 3, 2}, Shape{3, 2}, {1, 2, 3, 3, 2}, {5, 6}},
    {"abcde,def->abcf", {-1, -1, 7}, "f", {1, 2, 3, 4, 2}, {4, 2, 7}, Shape{7}, {1, 2, 3, 7}, {8, 7}},
};

/// An initializer that records the fans it is given and fills with a constant.
L::Initializer recording(L::Fans& seen) {
  return {"recording", [&seen](const Shape& shape, DType dtype, const L::Fans& fans) {
            seen = fans;
            return Tensor::full(shape, 0.1, dtype);
          }};
}

}  // namespace

TEST_CASE("EinsumDense derives Keras's kernel and bias shapes and fans from the equation", "[layers][einsum_dense]") {
  for (const auto& c : kShapeCases) {
    INFO(c.equation << " input " << fmt::format("{}", c.input));
    L::Fans fans;
    L::EinsumDense layer(c.equation, c.output_shape, {.bias_axes = c.bias_axes, .kernel_initializer = recording(fans)});
    CHECK(layer.compute_output_shape(c.input) == c.output);
    const Tensor y = layer(Tensor::ones(c.input));
    CHECK(y.shape() == c.output);
    CHECK(layer.kernel().shape() == c.kernel);
    CHECK(fans.fan_in == c.fans.fan_in);
    CHECK(fans.fan_out == c.fans.fan_out);
    REQUIRE(layer.bias().defined() == c.bias.has_value());
    if (c.bias) CHECK(layer.bias().shape() == *c.bias);
    CHECK(layer.weights().size() == (c.bias ? 2u : 1u));
    CHECK(layer.count_params() == numel(c.kernel) + (c.bias ? numel(*c.bias) : 0));
  }
}

TEST_CASE("EinsumDense names its weights kernel then bias under its auto name", "[layers][einsum_dense]") {
  L::reset_layer_names();
  L::EinsumDense first("ab,bc->ac", {3}, {.bias_axes = "c"});
  L::EinsumDense second("ab,bc->ac", {3});
  L::EinsumDense named("ab,bc->ac", {3}, {.bias_axes = "c", .name = "proj"});
  CHECK(first.name() == "einsum_dense");
  CHECK(second.name() == "einsum_dense_1");
  first(Tensor::ones({2, 4}));
  named(Tensor::ones({2, 4}));
  REQUIRE(first.weights().size() == 2);
  CHECK(first.weights()[0].name() == "einsum_dense/kernel");
  CHECK(first.weights()[1].name() == "einsum_dense/bias");
  CHECK(named.weights()[1].name() == "proj/bias");
  CHECK(first.trainable_weights().size() == 2);
  CHECK(first.non_trainable_weights().empty());
}

TEST_CASE("EinsumDense glorot_uniform kernel stays within Keras 3.15's limit", "[layers][einsum_dense]") {
  // Query kernel [D=64, N=4, H=16]: fan_in 64, fan_out 64 -> limit sqrt(6 / 128).
  L::EinsumDense layer("abc,cde->abde", {-1, 4, 16}, {.kernel_initializer = L::initializers::glorot_uniform(3)});
  layer(Tensor::ones({1, 2, 64}));
  const auto k = values(layer.kernel().value());
  const double limit = std::sqrt(6.0 / 128.0);
  const auto [lo, hi] = std::minmax_element(k.begin(), k.end());
  CHECK(*lo >= -limit);
  CHECK(*hi <= limit);
  CHECK(*hi > 0.95 * limit);  // 4096 draws reach the edge
  CHECK(*lo < -0.95 * limit);
}

TEST_CASE("EinsumDense matches Keras on the reference fixtures", "[layers][einsum_dense]") {
  for (const auto& c : core_layer_cases("einsum_dense")) {
    check_against_keras(c, [&c] {
      L::EinsumDenseOptions options;
      options.activation = c.option_or("activation", "");
      if (c.options.count("bias_axes")) options.bias_axes = c.option("bias_axes");
      return std::make_shared<L::EinsumDense>(c.option("equation"), parse_sizes(c.option("output_shape")), options);
    });
  }
}

TEST_CASE("EinsumDense equals a hand-written einsum plus bias", "[layers][einsum_dense]") {
  L::EinsumDense layer("abcd,cde->abe", {-1, 3}, {.bias_axes = "e"});
  const Tensor x = randn({2, 3, 2, 4}, 1);
  layer.maybe_build(x.shape(), DType::f64);
  layer.weights()[0].assign(randn({2, 4, 3}, 2));
  layer.weights()[1].assign(randn({3}, 3));
  // out[a,b,e] = sum_{c,d} x[a,b,c,d] k[c,d,e] + bias[e] as one matmul of x [6, 8] and k [8, 3]
  const Tensor expect = ops::matmul(x.reshape({6, 8}), layer.kernel().value().reshape({8, 3})).reshape({2, 3, 3}) +
                        layer.bias().value();
  check_close(values(layer(x)), values(expect), 1e-12);
}

TEST_CASE("EinsumDense gradchecks with respect to the input and every weight", "[layers][einsum_dense]") {
  for (const auto& c : kShapeCases) {
    INFO(c.equation);
    L::EinsumDense layer(c.equation, c.output_shape, {.activation = "gelu", .bias_axes = c.bias_axes,
                                                      .bias_initializer = L::initializers::random_normal(0, 0.5, 4)});
    Tensor x = randn(c.input, 5);
    layer.maybe_build(c.input, DType::f64);
    std::vector<Tensor> inputs = {x};
    for (const auto& w : layer.weights()) inputs.push_back(w.value());
    require_gradcheck([&](const std::vector<Tensor>& in) { return layer(in[0]); }, inputs);
  }
}

TEST_CASE("EinsumDense trains: one gradient step lowers the loss", "[layers][einsum_dense]") {
  L::EinsumDense layer("abc,cde->abde", {-1, 2, 3},
                       {.bias_axes = "de", .kernel_initializer = L::initializers::glorot_uniform(1)});
  const Tensor x = randn({4, 3, 5}, 6);
  const Tensor target = randn({4, 3, 2, 3}, 7);
  layer.maybe_build(x.shape(), DType::f64);
  const auto loss_of = [&] { return ops::mean(ops::square(layer(x) - target)); };
  const double before = loss_of().item<double>();
  {
    GradientTape tape;
    const Tensor loss = loss_of();
    const auto grads = tape.gradient(loss, layer.trainable_weights());
    for (std::size_t i = 0; i < grads.size(); ++i) layer.trainable_weights()[i].assign_sub(grads[i] * 0.1);
  }
  CHECK(loss_of().item<double>() < before);
}

TEST_CASE("a frozen EinsumDense has no trainable weights and is not watched", "[layers][einsum_dense]") {
  L::EinsumDense layer("ab,bc->ac", {3}, {.bias_axes = "c"});
  layer(Tensor::ones({2, 4}));
  layer.set_trainable(false);
  CHECK(layer.trainable_weights().empty());
  CHECK(layer.non_trainable_weights().size() == 2);
  GradientTape tape;
  const Tensor y = ops::sum(layer(Tensor::ones({2, 4})));
  const auto grads = tape.gradient(y, layer.weights(), {}, UnconnectedGradients::none);
  CHECK_FALSE(grads[0].defined());
  CHECK_FALSE(grads[1].defined());
  layer.set_trainable(true);
  CHECK(layer.trainable_weights().size() == 2);
}

TEST_CASE("EinsumDense rejects bad equations, options and inputs", "[layers][einsum_dense][errors]") {
  using Catch::Contains;
  REQUIRE_THROWS_WITH(L::EinsumDense("abc,cd", {-1, 2}, {.name = "e1"}), Contains("e1") && Contains("form"));
  REQUIRE_THROWS_WITH(L::EinsumDense("...b,bc->...c", {2}, {.name = "e2"}), Contains("e2") && Contains("ellipsis"));
  REQUIRE_THROWS_WITH(L::EinsumDense("ab,bc->ad", {2}, {.name = "e3"}), Contains("'d'"));
  REQUIRE_THROWS_WITH(L::EinsumDense("ab,bcx->ac", {2}, {.name = "e4"}), Contains("'x'"));
  REQUIRE_THROWS_WITH(L::EinsumDense("abc,cd->abd", {2}, {.name = "e5"}), Contains("e5") && Contains("[2]"));
  REQUIRE_THROWS_WITH(L::EinsumDense("ab,bc->ac", {0}, {.name = "e6"}), Contains("positive"));
  REQUIRE_THROWS_WITH(L::EinsumDense("ab,bc->ac", {2}, {.bias_axes = "b", .name = "e7"}),
                      Contains("e7") && Contains("'b'"));
  REQUIRE_THROWS_WITH(L::EinsumDense("ab,bc->ac", {2}, {.activation = "nope", .name = "e8"}),
                      Contains("e8") && Contains("nope") && Contains("relu"));
  REQUIRE_THROWS_WITH(L::EinsumDense("aab,bc->ac", {2}, {.name = "e9"}), Contains("repeats"));

  L::EinsumDense layer("abc,cd->abd", {-1, 2}, {.name = "proj"});
  REQUIRE_THROWS_WITH(layer(Tensor::ones({2, 3})), Contains("proj") && Contains("rank 3") && Contains("[2, 3]"));
  layer(Tensor::ones({2, 3, 4}));
  REQUIRE_THROWS_WITH(layer(Tensor::ones({2, 3, 5})), Contains("proj") && Contains("[2, 3, 5]") && Contains("[4, 2]"));
  REQUIRE_THROWS_WITH(layer(Tensor::ones({2, 3, 4}, DType::f64)), Contains("proj") && Contains("f64"));
  // output_shape fixes a dimension the input contradicts
  L::EinsumDense fixed("abc,cd->abd", {3, 2}, {.name = "fixed"});
  REQUIRE_THROWS_WITH(fixed(Tensor::ones({2, 5, 4})), Contains("fixed") && Contains("'b'") && Contains("5 != 3"));
  // a kernel dimension left free but absent from the input
  L::EinsumDense free("ab,bc->ac", {-1}, {.name = "free"});
  REQUIRE_THROWS_WITH(free(Tensor::ones({2, 4})), Contains("free") && Contains("'c'"));
}
