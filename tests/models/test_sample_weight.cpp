// Sample weights, class weights, loss reductions and weighted_metrics, checked against Keras 3
// (tests/fixtures/make_sample_weight_fixtures.py), and the bad inputs they can meet.
#include <catch2/catch.hpp>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "loom.hpp"
#include "tests/bad_input_helpers.hpp"
#include "tests/fixture_reader.hpp"
#include "tests/temp_files.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

namespace {

std::vector<FixtureCase> cases_of_kind(const std::string& kind) {
  std::vector<FixtureCase> out;
  for (const FixtureCase& c : read_fixture_cases("sample_weight_fixtures.txt"))
    if (c.words.at(0) == kind) out.push_back(c);
  return out;
}

losses::Loss loss_of(const std::string& cls, const std::string& reduction) {
  if (cls == "MeanSquaredError") return losses::MeanSquaredError({.reduction = reduction});
  if (cls == "BinaryCrossentropy") return losses::BinaryCrossentropy({.reduction = reduction});
  if (cls == "SparseCategoricalCrossentropy") return losses::SparseCategoricalCrossentropy({.reduction = reduction});
  REQUIRE(cls == "Huber");
  return losses::Huber({.delta = 0.5, .reduction = reduction});
}

/// The model a "fit" case names, with the fixture's initial weights.
Model fit_model(const FixtureCase& c) {
  L::reset_layer_names();
  const std::string kind = c.option("model");
  Model model = [&] {
    if (kind == "masked") {
      Tensor tokens = L::Input({4}, {.dtype = DType::i64, .name = "x"});
      auto embedding = std::make_shared<L::Embedding>(6, 3, L::EmbeddingOptions{.mask_zero = true, .name = "embedding"});
      embedding->maybe_build({-1, 4}, DType::f64);  // a float64 table
      Tensor e = (*embedding)(tokens);
      return Model(tokens, L::Dense(3, {.activation = "softmax", .name = "dense"})(e));
    }
    if (kind == "sequence") {
      Tensor x = L::Input({3, 2}, {.dtype = DType::f64, .name = "x"});
      return Model(x, L::Dense(1, {.name = "dense"})(x));
    }
    Tensor x = L::Input({3}, {.dtype = DType::f64, .name = "x"});
    Tensor h = L::Dense(4, {.activation = "tanh", .name = "hidden"})(x);
    if (kind == "two_heads") return Model(x, {L::Dense(1, {.name = "a"})(h), L::Dense(2, {.name = "b"})(h)});
    const bool probs = c.option("loss").find("categorical") != std::string::npos;
    return Model(x, L::Dense(probs ? 3 : 1, {.activation = probs ? "softmax" : "linear", .name = "dense"})(h));
  }();
  for (const auto& layer : model.layers()) {
    auto w = layer->weights();
    for (std::size_t i = 0; i < w.size(); ++i)
      w[i].assign(c.array("weight_" + layer->name() + "_" + std::to_string(i)).tensor());
  }
  return model;
}

std::vector<L::MetricArg> metric_list(const std::string& given) {
  std::vector<L::MetricArg> out;
  if (given == "-") return out;
  std::stringstream in(given);
  for (std::string name; std::getline(in, name, ',');) out.emplace_back(name);
  return out;
}

Tensor labels(const FixtureCase& c, const std::string& key) {
  return c.array(key).tensor(c.option("loss") == "sparse_categorical_crossentropy" ? DType::i64 : DType::f64);
}

}  // namespace

TEST_CASE("losses reduce with sample weights as Keras: every reduction and weight shape", "[losses][sample_weight]") {
  const auto cases = cases_of_kind("reduce");
  REQUIRE(cases.size() == 80);
  for (const FixtureCase& c : cases) {
    INFO("case " << c.name << ": " << c.option("loss") << ", " << c.option("reduction") << ", weight "
                 << c.option("weight"));
    const losses::Loss loss = loss_of(c.option("loss"), c.option("reduction"));
    const bool sparse = c.option("loss") == "SparseCategoricalCrossentropy";
    const Tensor y_true = c.array("y_true").tensor(sparse ? DType::i64 : DType::f64);
    const Tensor y_pred = c.array("y_pred").tensor();
    const Tensor value = c.has("sample_weight") ? loss(y_true, y_pred, c.array("sample_weight").tensor())
                                                : loss(y_true, y_pred);
    CHECK(value.shape() == c.array("value").shape);
    check_close(values(value), c.array("value").values, 1e-12);
  }
}

TEST_CASE("a weighted loss has the gradients of its formula", "[losses][sample_weight][gradcheck]") {
  const Tensor t = Tensor::randn({4, 3}, DType::f64, 3);
  const Tensor w = Tensor::uniform({4}, 0.0, 2.0, DType::f64, 4);
  for (const std::string reduction : {"sum_over_batch_size", "sum", "mean_with_sample_weight"}) {
    INFO(reduction);
    const losses::Loss loss = losses::Huber({.delta = 0.7, .reduction = reduction});
    require_gradcheck([&](const auto& in) { return loss(t, in[0], w); }, {Tensor::randn({4, 3}, DType::f64, 5)});
  }
}

TEST_CASE("fit and evaluate with sample_weight\\, class_weight\\, masks and weighted_metrics match Keras",
          "[models][sample_weight]") {
  const auto cases = cases_of_kind("fit");
  REQUIRE(cases.size() == 7);
  for (const FixtureCase& c : cases) {
    INFO("case " << c.name);
    Model model = fit_model(c);
    const bool two_heads = c.option("model") == "two_heads";
    L::CompileOptions compile{.optimizer = optim::SGD({.learning_rate = 0.1}), .loss = c.option("loss"),
                              .metrics = metric_list(c.option("metrics")),
                              .weighted_metrics = metric_list(c.option("weighted_metrics"))};
    if (two_heads) {
      compile.loss = {"mse", "mse"};
      compile.loss_weights = {1.0, 0.5};
      compile.metrics = {};
      compile.weighted_metrics = L::MetricsPerOutput{{"mae"}, {"mae"}};
    }
    if (c.option("model") == "masked") compile.optimizer = optim::SGD({.learning_rate = 0.5});
    model.compile(compile);
    const Tensor x = c.array("x").tensor(c.option("model") == "masked" ? DType::i64 : DType::f64);
    const L::Tensors y = two_heads ? L::Tensors{c.array("y_a").tensor(), c.array("y_b").tensor()}
                                   : L::Tensors(labels(c, "y"));
    L::FitOptions options{.batch_size = 4, .epochs = 2, .verbose = 0, .shuffle = false};
    if (c.has("sample_weight")) options.sample_weight = c.array("sample_weight").tensor();
    if (c.has("class_weight_keys")) {
      L::ClassWeight weights;
      for (std::size_t i = 0; i < c.array("class_weight_keys").values.size(); ++i)
        weights[std::int64_t(c.array("class_weight_keys").values[i])] = c.array("class_weight_values").values[i];
      options.class_weight = weights;
    }
    if (c.has("val_x"))
      options.validation_data =
          L::ValidationData(c.array("val_x").tensor(), labels(c, "val_y"), c.array("val_sample_weight").tensor());
    const History h = model.fit(x, y, options);

    std::size_t keys = 0;
    for (const auto& [key, history] : h.history) {
      INFO("history key " << key);
      REQUIRE(history.size() == 2);
      for (std::size_t epoch = 0; epoch < 2; ++epoch)
        CHECK(history[epoch] == Approx(std::stod(c.option("history_" + key + "_" + std::to_string(epoch))))
                                    .epsilon(1e-12)
                                    .margin(1e-12));
      ++keys;
    }
    std::size_t expected_keys = 0;
    for (const auto& [key, value] : c.options) expected_keys += key.rfind("history_", 0) == 0 && key.back() == '0';
    CHECK(keys == expected_keys);
    for (const auto& layer : model.layers()) {
      auto w = layer->weights();
      for (std::size_t i = 0; i < w.size(); ++i) {
        INFO(layer->name() << " weight " << i);
        check_close(values(w[i].value()), c.array("final_" + layer->name() + "_" + std::to_string(i)).values, 1e-12);
      }
    }
    if (two_heads) continue;
    std::optional<L::Tensors> weight;
    // The masked case evaluates with the mask alone.
    if (c.has("sample_weight") && c.option("model") != "masked") weight = L::Tensors(c.array("sample_weight").tensor());
    const L::Logs logs = model.evaluate(x, y, {.batch_size = 4, .verbose = 0, .sample_weight = weight});
    for (const auto& [key, value] : logs) {
      INFO("evaluate key " << key);
      CHECK(value == Approx(std::stod(c.option("evaluate_" + key))).epsilon(1e-12).margin(1e-12));
    }
  }
}

TEST_CASE("train_on_batch and test_on_batch take sample weights", "[models][sample_weight]") {
  L::reset_layer_names();
  Tensor in = L::Input({2}, {.dtype = DType::f64});
  Model model(in, L::Dense(1, {.kernel_initializer = "ones"})(in));
  model.compile({.optimizer = optim::SGD({.learning_rate = 0.0}), .loss = "mse"});
  const Tensor x = Tensor::from_vector(std::vector<double>{1, 0, 0, 1}, {2, 2});
  const Tensor y = Tensor::from_vector(std::vector<double>{0, 0}, {2});
  // per-sample squared errors 1 and 1; weights 3 and 0 give (3 + 0) / 2
  const Tensor w = Tensor::from_vector(std::vector<double>{3, 0}, {2});
  CHECK(model.test_on_batch(x, y, w).at("loss") == Approx(1.5).epsilon(1e-15));
  CHECK(model.train_on_batch(x, y, w).at("loss") == Approx(1.5).epsilon(1e-15));
  CHECK(model.train_on_batch(x, y, std::nullopt, L::ClassWeight{{0, 0.25}}).at("loss") == Approx(0.25).epsilon(1e-15));
}

TEST_CASE("bad sample weights\\, class weights and reductions name the argument", "[models][sample_weight][bad_input]") {
  L::reset_layer_names();
  Tensor in = L::Input({2}, {.dtype = DType::f64});
  Model model(in, L::Dense(1)(in));
  model.compile({.optimizer = "sgd", .loss = "mse"});
  const Tensor x = Tensor::randn({4, 2}, DType::f64, 1), y = Tensor::zeros({4}, DType::f64);
  const auto fit_with = [&](L::FitOptions o) {
    o.verbose = 0;
    model.fit(x, y, o);
  };
  CHECK_THROWS_WITH(fit_with({.sample_weight = Tensor::ones({3}, DType::f64)}),
                    Catch::Contains("sample_weight of shape [3] must hold one weight per sample") &&
                        Catch::Contains("4 samples"));
  CHECK_THROWS_WITH(fit_with({.class_weight = L::ClassWeight{{1, 2.0}}, .sample_weight = Tensor::ones({4})}),
                    Catch::Contains("sample_weight or class_weight, not both"));
  CHECK_THROWS_WITH(fit_with({.class_weight = L::ClassWeight{{1, 2.0}}}),
                    Catch::Contains("class_weight has no weight for class 0") && Catch::Contains("[1]"));
  CHECK_THROWS_WITH(
      fit_with({.sample_weight = Tensor::from_vector(std::vector<double>{1, NAN, 1, 1}, {4})}),
      Catch::Contains("sample_weight holds NaN at element [1]"));
  CHECK_THROWS_WITH(fit_with({.validation_data = L::ValidationData(x, y, Tensor::ones({2}))}),
                    Catch::Contains("fit (validation_data)") && Catch::Contains("sample_weight of shape [2]"));
  CHECK_THROWS_WITH(model.evaluate(x, y, {.verbose = 0, .sample_weight = Tensor::ones({4, 3}, DType::f64)}),
                    Catch::Contains("does not broadcast against the per-sample losses of shape [4]"));
  CHECK_THROWS_WITH(losses::MeanSquaredError({.reduction = "average"}),
                    Catch::Contains("unknown reduction 'average'") && Catch::Contains("sum_over_batch_size"));
  model.compile({.optimizer = "sgd", .loss = losses::MeanSquaredError({.reduction = "none"})});
  CHECK_THROWS_WITH(model.evaluate(x, y, {.verbose = 0}), Catch::Contains("reduction 'none'") &&
                                                               Catch::Contains("need a scalar"));
  CHECK_THROWS_WITH(model.compile({.optimizer = "sgd", .loss = "mean_cubed_error"}),
                    Catch::Contains("unknown loss 'mean_cubed_error'"));
}

TEST_CASE("loss objects with their reductions and weighted_metrics survive a .keras archive", "[models][saving][sample_weight]") {
  const TempDir dir("sample-weight");
  L::reset_layer_names();
  Tensor in = L::Input({2}, {.dtype = DType::f64});
  Model model(in, L::Dense(2)(in));
  model.compile({.optimizer = "sgd",
                 .loss = losses::Huber({.delta = 2.5, .reduction = "sum", .name = "robust"}),
                 .metrics = {"mae"},
                 .weighted_metrics = {"mae"}});
  const Tensor x = Tensor::randn({4, 2}, DType::f64, 8), y = Tensor::randn({4, 2}, DType::f64, 9);
  const Tensor w = Tensor::uniform({4}, 0.0, 2.0, DType::f64, 10);
  const L::Logs before = model.evaluate(x, y, {.verbose = 0, .sample_weight = w});
  model.save(dir.file("m.keras"));
  auto restored = models::load_model(dir.file("m.keras"));
  const auto& loss = std::get<losses::Loss>(*restored->compile_options().loss.single());
  CHECK(loss.class_name() == "Huber");
  CHECK(loss.name() == "robust");
  CHECK(loss.reduction() == "sum");
  CHECK(std::get<double>(loss.config().at(0).second) == 2.5);
  REQUIRE(restored->compile_options().weighted_metrics.single().size() == 1);
  const L::Logs after = restored->evaluate(x, y, {.verbose = 0, .sample_weight = w});
  CHECK(after == before);
  CHECK(after.count("weighted_mae") == 1);
}
