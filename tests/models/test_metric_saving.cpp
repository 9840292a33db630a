// Metric objects in a .keras archive's compile_config: every entry Keras 3 wrote
// (tests/fixtures/make_metric_config_fixtures.py) reads into the metric it names and writes back unchanged, and
// a model compiled with metric objects saves, loads and evaluates as before.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <typeinfo>

#include "framework/ops/ops.hpp"
#include "layers/layers.hpp"
#include "models/models.hpp"
#include "models/saving/detail/serialization.hpp"
#include "tests/temp_files.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;
namespace M = loom::layers::metrics;
using json = nlohmann::ordered_json;

namespace {

json keras_entries() {
  std::ifstream in(std::string(LOOM_FIXTURES_DIR) + "/metric_configs.json");
  REQUIRE(in);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return models::detail::parse_json(text, "metric_configs.json").at("entries");
}

json entry_of(const std::string& case_name) {
  for (const json& e : keras_entries())
    if (e.at("case") == case_name) return e.at("serialized");
  FAIL("no fixture case " << case_name);
  return {};
}

}  // namespace

TEST_CASE("every metric entry Keras writes reads into its metric and writes back unchanged", "[models][saving][metrics]") {
  const json entries = keras_entries();
  REQUIRE(entries.size() == 30);
  for (const json& e : entries) {
    INFO("case " << e.at("case").get<std::string>());
    const json& keras = e.at("serialized");
    const auto metric = models::detail::deserialize_metric(keras, "metric");
    CHECK(metric->name() == keras.at("config").at("name").get<std::string>());
    // The same keys and values; the order of the keys is Keras's business.
    const json written = models::detail::serialize_metric(*metric, "metric");
    INFO("loom writes " << written.dump());
    CHECK(nlohmann::json::parse(written.dump()) == nlohmann::json::parse(keras.dump()));
  }
}

TEST_CASE("metric entries from Keras carry their options into the metric", "[models][saving][metrics]") {
  const auto precision = models::detail::deserialize_metric(entry_of("precision_options"), "metric");
  const auto& p = dynamic_cast<const M::Precision&>(*precision);
  CHECK(p.name() == "p");
  CHECK(p.thresholds() == std::vector<double>{0.3, 0.6});
  CHECK(p.options().top_k == 2);
  CHECK(p.options().class_id == 1);

  const auto auc = models::detail::deserialize_metric(entry_of("auc_thresholds_multi_label"), "metric");
  const auto& a = dynamic_cast<const M::AUC&>(*auc);
  CHECK(a.thresholds() == std::vector<double>{-1e-7, 0.2, 0.7, 1.0 + 1e-7});
  CHECK(a.options().multi_label);
  CHECK(a.options().label_weights == std::vector<double>{1.0, 2.0, 0.5});
  CHECK(a.state().size() == 4 * 4 * 3);  // built for num_labels = 3

  const auto iou = models::detail::deserialize_metric(entry_of("iou"), "metric");
  const auto& i = dynamic_cast<const M::IoU&>(*iou);
  CHECK(i.num_classes() == 4);
  CHECK(i.target_class_ids() == std::vector<std::int64_t>{0, 2});
  CHECK(i.options().ignore_class == 1);
  CHECK_FALSE(i.options().sparse_y_pred);

  const auto f = models::detail::deserialize_metric(entry_of("fbeta_score"), "metric");
  CHECK(dynamic_cast<const M::FBetaScore&>(*f).options().beta == 2.0);
  const auto f1 = models::detail::deserialize_metric(entry_of("f1_score"), "metric");
  const M::Metric& f1_metric = *f1;
  CHECK(typeid(f1_metric) == typeid(M::F1Score));

  // Keras also takes one number for thresholds.
  json recall = entry_of("recall");
  recall["config"]["thresholds"] = 0.25;
  const auto r = models::detail::deserialize_metric(recall, "metric");
  CHECK(dynamic_cast<const M::Recall&>(*r).thresholds() == std::vector<double>{0.25});
}

TEST_CASE("metric entries loom cannot honour are errors naming the entry", "[models][saving][metrics][bad_input]") {
  json unknown = entry_of("auc");
  unknown["class_name"] = "Poisson";
  REQUIRE_THROWS_WITH(models::detail::deserialize_metric(unknown, "metrics[0]"),
                      Catch::Contains("metrics[0]") && Catch::Contains("'Poisson'") && Catch::Contains("AUC"));
  json dtype = entry_of("precision");
  dtype["config"]["dtype"] = "float16";
  REQUIRE_THROWS_WITH(models::detail::deserialize_metric(dtype, "metrics[0]"),
                      Catch::Contains("Precision") && Catch::Contains("float16") && Catch::Contains("float32"));
  json extra = entry_of("mean_iou");
  extra["config"]["zero_division"] = 1;
  REQUIRE_THROWS_WITH(models::detail::deserialize_metric(extra, "metrics[0]"),
                      Catch::Contains("MeanIoU") && Catch::Contains("zero_division"));
  json bad_value = entry_of("auc");
  bad_value["config"]["curve"] = "ROCK";
  REQUIRE_THROWS_WITH(models::detail::deserialize_metric(bad_value, "metrics[0]"), Catch::Contains("ROCK"));
  json no_targets = entry_of("iou");
  no_targets["config"].erase("target_class_ids");
  REQUIRE_THROWS_WITH(models::detail::deserialize_metric(no_targets, "metrics[0]"),
                      Catch::Contains("target_class_ids"));
}

TEST_CASE("a model compiled with metric objects saves them and evaluates the same after loading",
          "[models][saving][metrics]") {
  const TempDir dir("metric-saving");
  L::reset_layer_names();
  Tensor in = L::Input({3}, {.dtype = DType::f64});
  L::Model model(in, L::Dense(3, {.activation = "sigmoid"})(in));
  model.compile({.optimizer = "sgd",
                 .loss = "binary_crossentropy",
                 .metrics = {M::AUC({.curve = "PR", .multi_label = true}), M::Precision({.thresholds = {0.4, 0.6}}),
                             M::F1Score({.average = "micro", .threshold = 0.5}), M::BinaryIoU({.threshold = 0.45}),
                             "accuracy"}});
  const Tensor x = Tensor::randn({16, 3}, DType::f64, 3);
  const Tensor y = ops::cast(ops::greater(Tensor::randn({16, 3}, DType::f64, 4), Tensor::scalar(0.0, DType::f64)),
                             DType::f64);
  const L::Logs before = model.evaluate(x, y, {.verbose = 0});
  CHECK(before.size() == 6);
  model.save(dir.file("m.keras"));
  auto restored = models::load_model(dir.file("m.keras"));
  const auto& metrics = restored->compile_options().metrics.single();
  REQUIRE(metrics.size() == 5);
  const M::Metric& first = *metrics[0].get();
  CHECK(typeid(first) == typeid(M::AUC));
  CHECK(metrics[4].name() == "accuracy");
  CHECK(restored->evaluate(x, y, {.verbose = 0}) == before);
}

TEST_CASE("saving a metric of one's own is an error naming it before anything is written", "[models][saving][metrics]") {
  const TempDir dir("metric-saving");
  L::reset_layer_names();
  Tensor in = L::Input({2});
  L::Model model(in, L::Dense(1)(in));
  model.compile({.optimizer = "sgd",
                 .loss = "mse",
                 .metrics = {M::MeanMetricWrapper([](const Tensor& t, const Tensor& p) { return ops::abs(t - p); },
                                                  "my_error")}});
  REQUIRE_THROWS_WITH(model.save(dir.file("m.keras")),
                      Catch::Contains("'my_error'") && Catch::Contains("MeanSquaredError"));
  CHECK_FALSE(std::filesystem::exists(dir.file("m.keras")));
}
