// How losses and metrics line up y_true with y_pred, as Keras: squeeze_or_expand_to_same_rank for every loss
// and metric ([N] targets for [N, 1] outputs), and class ids stored as whole floats (NumPy's default dtype).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "framework/ops/ops.hpp"
#include "layers/layers.hpp"
#include "models/losses.hpp"
#include "models/metrics.hpp"
#include "models/models.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

namespace {

Tensor probabilities(const Shape& shape, std::uint64_t seed) { return ops::sigmoid(randn(shape, seed)); }

}  // namespace

TEST_CASE("Every loss and metric pairs targets of shape (N) with outputs (N\\, 1) and (N\\, T\\, 1) with (N\\, T)",
          "[losses][metrics]") {
  using Fn = Tensor (*)(const Tensor&, const Tensor&);
  const std::vector<std::pair<const char*, Fn>> fns = {
      {"mean_squared_error", losses::mean_squared_error},
      {"mean_absolute_error", losses::mean_absolute_error},
      {"binary_crossentropy", [](const Tensor& t, const Tensor& p) { return losses::binary_crossentropy(t, p); }},
      {"categorical_crossentropy",
       [](const Tensor& t, const Tensor& p) { return losses::categorical_crossentropy(t, p); }},
      {"binary_accuracy", [](const Tensor& t, const Tensor& p) { return L::metrics::binary_accuracy(t, p); }},
      {"categorical_accuracy", L::metrics::categorical_accuracy},
  };
  const Tensor p = probabilities({6, 1}, 1);
  const Tensor labels = ops::cast(ops::greater(randn({6}, 2), Tensor::scalar(0.0, DType::f64)), DType::f64);
  const Tensor p3 = probabilities({2, 3}, 3);
  const Tensor labels3 = ops::cast(ops::greater(randn({2, 3, 1}, 4), Tensor::scalar(0.0, DType::f64)), DType::f64);
  for (const auto& [name, fn] : fns) {
    INFO(name);
    // Keras expands a rank-1 partner and otherwise squeezes the trailing 1.
    const Tensor column = fn(ops::expand_dims(labels, -1), p);
    CHECK(values(fn(labels, p)) == values(column));
    CHECK(values(fn(ops::expand_dims(labels, -1), ops::squeeze(p, -1))) == values(column));
    CHECK(values(fn(labels3, p3)) == values(fn(ops::squeeze(labels3, -1), p3)));
  }
  REQUIRE_THROWS_WITH(losses::binary_crossentropy(randn({6, 2}, 5), p),
                      Catch::Contains("binary_crossentropy") && Catch::Contains("[6, 2]") && Catch::Contains("[6, 1]"));
}

TEST_CASE("A sigmoid classifier trains with fit(x\\, y) on labels of shape (N) as on (N\\, 1)", "[losses][fit]") {
  const Tensor x = Tensor::randn({16, 3}, DType::f32, 1);
  const Tensor y = ops::cast(ops::greater(ops::sum(x, {1}), Tensor::scalar(0.0f, DType::f32)), DType::f32);  // [16]
  const auto train = [&](const Tensor& targets) {
    L::reset_layer_names();
    auto model = L::Sequential({L::Input({3}), L::Dense(1, {.activation = "sigmoid", .kernel_initializer = "ones"})});
    model.compile({.optimizer = "sgd", .loss = "binary_crossentropy", .metrics = {"accuracy"}});
    return model.fit(x, targets, {.batch_size = 8, .epochs = 3, .verbose = 0, .shuffle = false}).history;
  };
  const auto flat = train(y), column = train(ops::expand_dims(y, -1));
  CHECK(flat.at("loss") == column.at("loss"));
  CHECK(flat.at("accuracy") == column.at("accuracy"));
  CHECK(flat.at("loss").back() < flat.at("loss").front());
}

TEST_CASE("Sparse losses and metrics take class ids stored as whole floats\\, and refuse other floats",
          "[losses][metrics]") {
  const Tensor logits = randn({4, 3}, 1);
  const Tensor ids = Tensor::from_vector(std::vector<std::int64_t>{2, 0, 1, 2});
  for (DType dtype : {DType::f32, DType::f64}) {
    const Tensor float_ids = ids.to(dtype);
    CHECK(values(losses::sparse_categorical_crossentropy(float_ids, logits, {.from_logits = true})) ==
          values(losses::sparse_categorical_crossentropy(ids, logits, {.from_logits = true})));
    CHECK(values(L::metrics::sparse_categorical_accuracy(float_ids, logits)) ==
          values(L::metrics::sparse_categorical_accuracy(ids, logits)));
    CHECK(values(L::metrics::sparse_categorical_accuracy(ops::expand_dims(float_ids, -1), logits)) ==
          values(L::metrics::sparse_categorical_accuracy(ids, logits)));
  }
  using Catch::Contains;
  REQUIRE_THROWS_WITH(losses::sparse_categorical_crossentropy(vec({2, 0.5, 1, 2}), logits),
                      Contains("sparse_categorical_crossentropy") && Contains("0.5") && Contains("flat index 1"));
  REQUIRE_THROWS_WITH(L::metrics::sparse_categorical_accuracy(vec({2, 0, std::nan(""), 2}), logits),
                      Contains("sparse_categorical_accuracy") && Contains("nan") && Contains("[4]"));
  REQUIRE_THROWS_WITH(losses::sparse_categorical_crossentropy(vec({2, 0, 3, 2}), logits),
                      Contains("sparse_categorical_crossentropy") && Contains("3"));
  REQUIRE_THROWS_WITH(losses::sparse_categorical_crossentropy(Tensor::ones({4}, DType::boolean), logits),
                      Contains("class ids") && Contains("[4]"));

  // fit with float class ids, as a NumPy user passes them.
  auto model = L::Sequential({L::Input({3}), L::Dense(3, {.activation = "softmax"})});
  model.compile({.optimizer = "adam", .loss = "sparse_categorical_crossentropy", .metrics = {"accuracy"}});
  const Tensor float_labels = Tensor::from_vector(std::vector<double>{2, 0, 1, 2, 0, 1, 1, 0}).to(DType::f32);
  const auto history =
      model.fit(Tensor::randn({8, 3}, DType::f32, 3), float_labels, {.batch_size = 4, .epochs = 1, .verbose = 0});
  CHECK(history.history.at("loss").size() == 1);
}
