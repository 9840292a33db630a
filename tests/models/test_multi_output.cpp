// Models with several inputs and outputs in compile / fit / evaluate / predict: one loss per output,
// loss_weights, metrics per output, data by position and by name, checked against Keras 3
// (tests/fixtures/make_multi_output_fixtures.py); and a Functional model in a GradientTape loop.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "loom.hpp"
#include "tests/fixture_reader.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

namespace {

/// two_heads of make_multi_output_fixtures.py: inputs a [3] and b [2], outputs reg [1] and cls [3].
Model two_heads() {
  Tensor a = L::Input({3}, {.dtype = DType::f64, .name = "a"});
  Tensor b = L::Input({2}, {.dtype = DType::f64, .name = "b"});
  Tensor h = ops::relu(L::Dense(4, {.name = "da"})(a) + L::Dense(4, {.name = "db"})(b));
  Tensor reg = L::Dense(1, {.name = "reg"})(h);
  Tensor cls = L::Dense(3, {.activation = "softmax", .name = "cls"})(h);
  return Model({a, b}, {reg, cls});
}

const FixtureCase& two_heads_fixture() {
  static const auto cases = read_fixture_cases("multi_output_fixtures.txt");
  REQUIRE(cases.size() == 1);
  return cases.front();
}

/// Sets every layer's variables from the fixture arrays "<prefix>_<layer>_<i>".
void assign(Model& model, const FixtureCase& f, const std::string& prefix) {
  for (const auto& layer : model.layers()) {
    auto w = layer->weights();
    for (std::size_t i = 0; i < w.size(); ++i)
      w[i].assign(f.array(prefix + "_" + layer->name() + "_" + std::to_string(i)).tensor());
  }
}

void check_weights(const Model& model, const FixtureCase& f, const std::string& prefix, double tol) {
  for (const auto& layer : model.layers()) {
    auto w = layer->weights();
    for (std::size_t i = 0; i < w.size(); ++i) {
      INFO(layer->name() << " weight " << i);
      check_close(values(w[i].value()), f.array(prefix + "_" + layer->name() + "_" + std::to_string(i)).values, tol);
    }
  }
}

L::CompileOptions two_heads_compile() {
  return {.optimizer = optim::SGD({.learning_rate = 0.1}),
          .loss = {"mse", "sparse_categorical_crossentropy"},
          .loss_weights = {0.5, 2.0},
          .metrics = L::MetricsPerOutput{{"mae"}, {"accuracy"}}};
}

}  // namespace

TEST_CASE("fit with one loss per output, loss_weights and metrics per output matches Keras", "[models][multi_output]") {
  L::reset_layer_names();
  const auto& f = two_heads_fixture();
  Model model = two_heads();
  CHECK(model.output_names() == std::vector<std::string>{"reg", "cls"});
  assign(model, f, "weight");
  model.compile(two_heads_compile());
  const Tensor x_a = f.array("x_a").tensor(), x_b = f.array("x_b").tensor();
  const Tensor y_reg = f.array("y_reg").tensor(), y_cls = f.array("y_cls").tensor(DType::i64);
  History h = model.fit({x_a, x_b}, {y_reg, y_cls}, {.batch_size = 4, .epochs = 2, .verbose = 0, .shuffle = false});

  // The logged values are compared to 1e-7: Keras's own logs differ from the same formulas on its own predictions
  // by up to about 1e-8 (relative) in float64, while the weights after fit agree to 1e-12.
  // Keras's keys: the weighted total, each output's unweighted loss, each output's metrics by output name.
  std::vector<std::string> keys;
  for (const auto& [key, values] : h.history) keys.push_back(key);
  CHECK(keys == std::vector<std::string>{"cls_accuracy", "cls_loss", "loss", "reg_loss", "reg_mae"});
  for (const auto& key : keys)
    for (int epoch = 0; epoch < 2; ++epoch) {
      INFO(key << " epoch " << epoch);
      CHECK(h.history.at(key)[std::size_t(epoch)] ==
            Approx(std::stod(f.option("history_" + key + "_" + std::to_string(epoch)))).epsilon(1e-7));
    }
  check_weights(model, f, "final", 1e-12);

  // By name: x by the Input layers' names, y by output_names().
  const L::Logs logs = model.evaluate(std::map<std::string, Tensor>{{"a", x_a}, {"b", x_b}},
                                   std::map<std::string, Tensor>{{"reg", y_reg}, {"cls", y_cls}},
                                   {.batch_size = 4, .verbose = 0});
  REQUIRE(logs.size() == 5);
  for (const auto& [key, value] : logs) {
    INFO(key);
    CHECK(value == Approx(std::stod(f.option("evaluate_" + key))).epsilon(1e-7));
  }
  const std::vector<Tensor> predicted = model.predict({x_a, x_b}, {.batch_size = 3, .verbose = 0});
  REQUIRE(predicted.size() == 2);
  check_close(values(predicted[0]), f.array("predict_reg").values, 1e-12);
  check_close(values(predicted[1]), f.array("predict_cls").values, 1e-12);
}

TEST_CASE("compile options for several outputs: a single loss for all, losses and weights by name",
          "[models][multi_output]") {
  L::reset_layer_names();
  const auto& f = two_heads_fixture();
  const Tensor x_a = f.array("x_a").tensor(), x_b = f.array("x_b").tensor();
  const Tensor y_reg = f.array("y_reg").tensor(), y_cls = f.array("y_cls").tensor(DType::i64);
  const Tensor y_onehot = ops::one_hot(y_cls, 3).to(DType::f64);
  Model model = two_heads();
  assign(model, f, "weight");
  const std::vector<Tensor> p = model.predict({x_a, x_b}, {.verbose = 0});
  const double mse_reg = ops::mean(losses::mean_squared_error(y_reg, p[0]), {}, false).item<double>();
  const double mse_cls = ops::mean(losses::mean_squared_error(y_onehot, p[1]), {}, false).item<double>();
  const double ce_cls = ops::mean(losses::sparse_categorical_crossentropy(y_cls, p[1]), {}, false).item<double>();

  SECTION("one loss applies to every output, the total is their sum") {
    model.compile({.optimizer = "sgd", .loss = "mse"});
    const L::Logs logs = model.test_on_batch({x_a, x_b}, {y_reg, y_onehot});
    CHECK(logs.at("reg_loss") == Approx(mse_reg).epsilon(1e-12));
    CHECK(logs.at("cls_loss") == Approx(mse_cls).epsilon(1e-12));
    CHECK(logs.at("loss") == Approx(mse_reg + mse_cls).epsilon(1e-12));
  }
  SECTION("losses and weights by output name; a missing weight is 1") {
    model.compile({.optimizer = "sgd",
                   .loss = std::map<std::string, L::LossSpec>{{"cls", "sparse_categorical_crossentropy"},
                                                              {"reg", "mse"}},
                   .loss_weights = std::map<std::string, double>{{"cls", 3.0}},
                   .metrics = L::MetricsByOutput{{"cls", {"accuracy"}}}});
    const L::Logs logs = model.test_on_batch({x_a, x_b}, {y_reg, y_cls});
    CHECK(logs.at("loss") == Approx(mse_reg + 3.0 * ce_cls).epsilon(1e-12));
    CHECK(logs.count("cls_accuracy") == 1);
    CHECK(logs.count("reg_mae") == 0);
  }
  SECTION("a loss function per output") {
    model.compile({.optimizer = "sgd",
                   .loss = {L::LossSpec(losses::mean_absolute_error), L::LossSpec("sparse_categorical_crossentropy")}});
    const L::Logs logs = model.test_on_batch({x_a, x_b}, {y_reg, y_cls});
    CHECK(logs.at("cls_loss") == Approx(ce_cls).epsilon(1e-12));
  }
}

TEST_CASE("bad multi-output compile options and data are clear errors", "[models][multi_output]") {
  L::reset_layer_names();
  const auto& f = two_heads_fixture();
  const Tensor x_a = f.array("x_a").tensor(), x_b = f.array("x_b").tensor();
  const Tensor y_reg = f.array("y_reg").tensor(), y_cls = f.array("y_cls").tensor(DType::i64);
  Model model = two_heads();
  CHECK_THROWS_WITH(model.compile({.loss = {"mse"}}), Catch::Contains("loss has 1 entries for 2 outputs") &&
                                                          Catch::Contains("reg, cls"));
  CHECK_THROWS_WITH(model.compile({.loss = std::map<std::string, L::LossSpec>{{"reg", "mse"}}}),
                    Catch::Contains("missing [cls]"));
  CHECK_THROWS_WITH(model.compile({.loss = std::map<std::string, L::LossSpec>{{"reg", "mse"}, {"cla", "mse"}}}),
                    Catch::Contains("'cla'") && Catch::Contains("not an output"));
  CHECK_THROWS_WITH(model.compile({.loss = "mse", .loss_weights = {1.0, 2.0, 3.0}}),
                    Catch::Contains("loss_weights has 3 entries for 2 outputs"));
  CHECK_THROWS_WITH(model.compile({.loss = "mse", .metrics = {"mae"}}),
                    Catch::Contains("2 outputs") && Catch::Contains("MetricsPerOutput"));
  CHECK_THROWS_WITH(model.compile({.loss = {"mse", "nope"}}), Catch::Contains("unknown loss 'nope'"));
  model.compile({.optimizer = "sgd", .loss = {"mse", "sparse_categorical_crossentropy"}});
  CHECK_THROWS_WITH(model.fit(x_a, y_reg, {.verbose = 0}), Catch::Contains("2 inputs, got 1"));
  CHECK_THROWS_WITH(model.fit({x_a, x_b}, y_reg, {.verbose = 0}), Catch::Contains("2 outputs, got 1"));
  CHECK_THROWS_WITH(model.fit({x_a, ops::slice(x_b, 0, 0, 5)}, {y_reg, y_cls}, {.verbose = 0}),
                    Catch::Contains("x[0] and x[1] hold different numbers of samples") && Catch::Contains("[5, 2]"));
  CHECK_THROWS_WITH(model.evaluate(std::map<std::string, Tensor>{{"a", x_a}, {"c", x_b}}, {y_reg, y_cls}),
                    Catch::Contains("missing [b]") && Catch::Contains("unknown [c]"));
  CHECK_THROWS_WITH(model.predict(x_a), Catch::Contains("2 outputs"));
}

TEST_CASE("a Functional model trains in a GradientTape loop as in Keras's custom training loops",
          "[models][multi_output]") {
  L::reset_layer_names();
  const auto& f = two_heads_fixture();
  const Tensor x_a = f.array("x_a").tensor(), x_b = f.array("x_b").tensor();
  const Tensor y_reg = f.array("y_reg").tensor(), y_cls = f.array("y_cls").tensor(DType::i64);
  Model model = two_heads();
  assign(model, f, "weight");
  optim::SGD opt({.learning_rate = 0.1});
  // The loop fit runs, by hand: two batches of 4 per epoch, two epochs, the same weighted loss.
  for (int epoch = 0; epoch < 2; ++epoch)
    for (std::int64_t begin = 0; begin < 8; begin += 4) {
      const auto rows = [&](const Tensor& t) { return ops::slice(t, 0, begin, begin + 4); };
      GradientTape tape;
      const std::vector<Tensor> out = model({rows(x_a), rows(x_b)}, /*training=*/true);
      const Tensor loss = ops::mean(losses::mean_squared_error(rows(y_reg), out[0]), {}, false) * 0.5 +
                          ops::mean(losses::sparse_categorical_crossentropy(rows(y_cls), out[1]), {}, false) * 2.0;
      opt.apply_gradients(tape.gradient(loss, model.trainable_weights()), model.trainable_weights());
    }
  check_weights(model, f, "final", 1e-12);
}
