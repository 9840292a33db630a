#include <catch2/catch.hpp>

#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "layers/core/embedding.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

TEST_CASE("Embedding looks up rows of an input_dim x output_dim table", "[layers][embedding]") {
  L::reset_layer_names();
  L::Embedding layer(5, 3);
  CHECK(layer.name() == "embedding");
  const Tensor ids = i64({4, 0, 4, 2, 1, 3}, {2, 3});
  CHECK(layer.compute_output_shape(ids.shape()) == Shape{2, 3, 3});
  const Tensor y = layer(ids);
  CHECK(y.shape() == Shape{2, 3, 3});
  CHECK(y.dtype() == DType::f32);
  REQUIRE(layer.weights().size() == 1);
  CHECK(layer.weights()[0].name() == "embedding/embeddings");
  CHECK(layer.embeddings().shape() == Shape{5, 3});
  CHECK(layer.count_params() == 15);
  const auto table = values(layer.embeddings().value());
  const auto out = values(y);
  const std::vector<std::int64_t> id_values = {4, 0, 4, 2, 1, 3};
  for (std::size_t i = 0; i < id_values.size(); ++i)
    for (std::size_t j = 0; j < 3; ++j) CHECK(out[i * 3 + j] == table[std::size_t(id_values[i]) * 3 + j]);
  // Keras's default initializer: uniform in [-0.05, 0.05)
  for (double v : table) CHECK(std::abs(v) <= 0.05);
  // any rank of ids, including a scalar id
  CHECK(layer(i64({2}, {})).shape() == Shape{3});
  CHECK(layer(i64({1, 2, 3, 4}, {1, 2, 2})).shape() == Shape{1, 2, 2, 3});
}

TEST_CASE("Embedding gradchecks with respect to its table, repeated ids adding up", "[layers][embedding]") {
  L::Embedding layer(4, 2, {.embeddings_initializer = L::initializers::random_normal(0, 1, 3)});
  const Tensor ids = i64({1, 3, 1, 0, 1}, {5});
  layer.maybe_build(ids.shape(), DType::f64);
  CHECK(layer.embeddings().dtype() == DType::f64);
  require_gradcheck([&](const std::vector<Tensor>&) { return ops::tanh(layer(ids)); }, {layer.embeddings().value()});
  GradientTape tape;
  const auto g = tape.gradient(ops::sum(layer(ids)), layer.trainable_weights())[0];
  check_close(values(g), {1, 1, 3, 3, 0, 0, 1, 1}, 0.0);
}

TEST_CASE("Embedding trains: one gradient step lowers the loss", "[layers][embedding]") {
  L::Embedding layer(6, 3);
  const Tensor ids = i64({0, 5, 2, 2}, {2, 2});
  layer.maybe_build(ids.shape(), DType::f64);
  const Tensor target = randn({2, 2, 3}, 1);
  const auto loss_of = [&] { return ops::mean(ops::square(layer(ids) - target)); };
  const double before = loss_of().item<double>();
  {
    GradientTape tape;
    const Tensor loss = loss_of();
    auto w = layer.trainable_weights();
    w[0].assign_sub(tape.gradient(loss, w)[0] * 1.0);
  }
  CHECK(loss_of().item<double>() < before);
  layer.set_trainable(false);
  CHECK(layer.trainable_weights().empty());
}

TEST_CASE("Embedding rejects bad sizes, id dtypes and out-of-range ids", "[layers][embedding][errors]") {
  using Catch::Contains;
  REQUIRE_THROWS_WITH(L::Embedding(0, 3, {.name = "e0"}), Contains("e0") && Contains("input_dim"));
  REQUIRE_THROWS_WITH(L::Embedding(3, -1, {.name = "e1"}), Contains("e1") && Contains("output_dim"));
  L::Embedding layer(4, 2, {.name = "tokens"});
  REQUIRE_THROWS_WITH(layer(i64({0, 4}, {2})), Contains("tokens") && Contains("id 4") && Contains("[0, 4)"));
  REQUIRE_THROWS_WITH(layer(i64({-1}, {1})), Contains("tokens") && Contains("id -1"));
  REQUIRE_THROWS_WITH(layer(Tensor::zeros({2})), Contains("tokens") && Contains("int64") && Contains("f32"));
}
