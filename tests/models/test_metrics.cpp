#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <typeinfo>
#include <vector>

#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "models/metrics.hpp"
#include "tests/bad_input_helpers.hpp"
#include "tests/fixture_reader.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace M = loom::layers::metrics;

namespace {

// ---- reading a case's options (make_metric_fixtures.py writes Keras's kwargs) ----

std::optional<std::string> option(const FixtureCase& c, const std::string& key) {
  if (!c.options.count(key) || c.options.at(key) == "none") return std::nullopt;
  return c.options.at(key);
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');) out.push_back(part);
  return out;
}

std::vector<double> doubles(const FixtureCase& c, const std::string& key) {
  std::vector<double> out;
  if (const auto text = option(c, key))
    for (const auto& part : split(*text)) out.push_back(std::stod(part));
  return out;
}

std::vector<std::int64_t> ints(const FixtureCase& c, const std::string& key) {
  std::vector<std::int64_t> out;
  if (const auto text = option(c, key))
    for (const auto& part : split(*text)) out.push_back(std::stoll(part));
  return out;
}

std::optional<std::int64_t> optional_int(const FixtureCase& c, const std::string& key) {
  const auto text = option(c, key);
  return text ? std::optional<std::int64_t>(std::stoll(*text)) : std::nullopt;
}

std::optional<double> optional_double(const FixtureCase& c, const std::string& key) {
  const auto text = option(c, key);
  return text ? std::optional<double>(std::stod(*text)) : std::nullopt;
}

double number(const FixtureCase& c, const std::string& key, double fallback) {
  return optional_double(c, key).value_or(fallback);
}

std::int64_t integer(const FixtureCase& c, const std::string& key, std::int64_t fallback) {
  return optional_int(c, key).value_or(fallback);
}

bool flag(const FixtureCase& c, const std::string& key, bool fallback) {
  const auto text = option(c, key);
  return text ? *text == "true" : fallback;
}

std::string text(const FixtureCase& c, const std::string& key, const std::string& fallback) {
  return option(c, key).value_or(fallback);
}

/// The metric a "metric" case of tests/fixtures/metric_fixtures.txt names, with its Keras arguments.
std::shared_ptr<M::Metric> make_metric(const FixtureCase& c) {
  const std::string& cls = c.words.at(1);
  if (cls == "MeanSquaredError") return std::make_shared<M::MeanSquaredError>();
  if (cls == "MeanAbsoluteError") return std::make_shared<M::MeanAbsoluteError>();
  if (cls == "RootMeanSquaredError") return std::make_shared<M::RootMeanSquaredError>();
  if (cls == "BinaryAccuracy")
    return std::make_shared<M::BinaryAccuracy>(M::BinaryAccuracyOptions{.threshold = number(c, "threshold", 0.5)});
  if (cls == "CategoricalAccuracy") return std::make_shared<M::CategoricalAccuracy>();
  if (cls == "SparseCategoricalAccuracy") return std::make_shared<M::SparseCategoricalAccuracy>();
  if (cls == "TopKCategoricalAccuracy")
    return std::make_shared<M::TopKCategoricalAccuracy>(M::TopKCategoricalAccuracyOptions{.k = integer(c, "k", 5)});
  if (cls == "SparseTopKCategoricalAccuracy")
    return std::make_shared<M::SparseTopKCategoricalAccuracy>(
        M::SparseTopKCategoricalAccuracyOptions{.k = integer(c, "k", 5)});
  if (cls == "Precision")
    return std::make_shared<M::Precision>(M::PrecisionOptions{.thresholds = doubles(c, "thresholds"),
                                                              .top_k = optional_int(c, "top_k"),
                                                              .class_id = optional_int(c, "class_id")});
  if (cls == "Recall")
    return std::make_shared<M::Recall>(M::RecallOptions{.thresholds = doubles(c, "thresholds"),
                                                        .top_k = optional_int(c, "top_k"),
                                                        .class_id = optional_int(c, "class_id")});
  if (cls == "TruePositives") return std::make_shared<M::TruePositives>(M::TruePositivesOptions{doubles(c, "thresholds")});
  if (cls == "FalsePositives")
    return std::make_shared<M::FalsePositives>(M::FalsePositivesOptions{doubles(c, "thresholds")});
  if (cls == "TrueNegatives") return std::make_shared<M::TrueNegatives>(M::TrueNegativesOptions{doubles(c, "thresholds")});
  if (cls == "FalseNegatives")
    return std::make_shared<M::FalseNegatives>(M::FalseNegativesOptions{doubles(c, "thresholds")});
  const std::int64_t num_thresholds = integer(c, "num_thresholds", 200);
  const std::optional<std::int64_t> class_id = optional_int(c, "class_id");
  if (cls == "SensitivityAtSpecificity")
    return std::make_shared<M::SensitivityAtSpecificity>(
        number(c, "specificity", -1), M::SensitivityAtSpecificityOptions{num_thresholds, class_id});
  if (cls == "SpecificityAtSensitivity")
    return std::make_shared<M::SpecificityAtSensitivity>(
        number(c, "sensitivity", -1), M::SpecificityAtSensitivityOptions{num_thresholds, class_id});
  if (cls == "PrecisionAtRecall")
    return std::make_shared<M::PrecisionAtRecall>(number(c, "recall", -1),
                                                  M::PrecisionAtRecallOptions{num_thresholds, class_id});
  if (cls == "RecallAtPrecision")
    return std::make_shared<M::RecallAtPrecision>(number(c, "precision", -1),
                                                  M::RecallAtPrecisionOptions{num_thresholds, class_id});
  if (cls == "AUC")
    return std::make_shared<M::AUC>(M::AUCOptions{.num_thresholds = num_thresholds,
                                                  .curve = text(c, "curve", "ROC"),
                                                  .summation_method = text(c, "summation_method", "interpolation"),
                                                  .thresholds = doubles(c, "thresholds"),
                                                  .multi_label = flag(c, "multi_label", false),
                                                  .num_labels = optional_int(c, "num_labels"),
                                                  .label_weights = doubles(c, "label_weights"),
                                                  .from_logits = flag(c, "from_logits", false)});
  if (cls == "F1Score")
    return std::make_shared<M::F1Score>(
        M::F1ScoreOptions{.average = option(c, "average"), .threshold = optional_double(c, "threshold")});
  if (cls == "FBetaScore")
    return std::make_shared<M::FBetaScore>(M::FBetaScoreOptions{.average = option(c, "average"),
                                                                .beta = number(c, "beta", 1.0),
                                                                .threshold = optional_double(c, "threshold")});
  const std::int64_t classes = integer(c, "num_classes", -1);
  if (cls == "MeanIoU")
    return std::make_shared<M::MeanIoU>(classes, M::MeanIoUOptions{.ignore_class = optional_int(c, "ignore_class"),
                                                                   .sparse_y_true = flag(c, "sparse_y_true", true),
                                                                   .sparse_y_pred = flag(c, "sparse_y_pred", true),
                                                                   .axis = integer(c, "axis", -1)});
  if (cls == "IoU")
    return std::make_shared<M::IoU>(classes, ints(c, "target_class_ids"),
                                    M::IoUOptions{.ignore_class = optional_int(c, "ignore_class"),
                                                  .sparse_y_true = flag(c, "sparse_y_true", true),
                                                  .sparse_y_pred = flag(c, "sparse_y_pred", true),
                                                  .axis = integer(c, "axis", -1)});
  if (cls == "OneHotMeanIoU")
    return std::make_shared<M::OneHotMeanIoU>(
        classes, M::OneHotMeanIoUOptions{.ignore_class = optional_int(c, "ignore_class"),
                                         .sparse_y_pred = flag(c, "sparse_y_pred", false),
                                         .axis = integer(c, "axis", -1)});
  if (cls == "OneHotIoU")
    return std::make_shared<M::OneHotIoU>(classes, ints(c, "target_class_ids"),
                                          M::OneHotIoUOptions{.ignore_class = optional_int(c, "ignore_class"),
                                                              .sparse_y_pred = flag(c, "sparse_y_pred", false),
                                                              .axis = integer(c, "axis", -1)});
  REQUIRE(cls == "BinaryIoU");
  std::vector<std::int64_t> targets = ints(c, "target_class_ids");
  if (targets.empty()) targets = {0, 1};
  return std::make_shared<M::BinaryIoU>(
      M::BinaryIoUOptions{.target_class_ids = targets, .threshold = number(c, "threshold", 0.5)});
}

std::vector<FixtureCase> cases_of_kind(const std::string& kind) {
  std::vector<FixtureCase> out;
  for (const FixtureCase& c : read_fixture_cases("metric_fixtures.txt"))
    if (c.words.at(0) == kind) out.push_back(c);
  return out;
}

struct Batch {
  Tensor y_true, y_pred, sample_weight;
};

/// Batch b of a case: integer arrays stay int64 (class ids); everything else becomes `dtype`.
Batch batch(const FixtureCase& c, std::size_t b, DType dtype) {
  const std::string index = std::to_string(b);
  Batch out{c.array("y_true_" + index).tensor(c.options.count("int_y_true") ? DType::i64 : dtype),
            c.array("y_pred_" + index).tensor(c.options.count("int_y_pred") ? DType::i64 : dtype), Tensor()};
  if (c.has("sample_weight_" + index)) out.sample_weight = c.array("sample_weight_" + index).tensor(dtype);
  return out;
}

void update(M::Metric& metric, const Batch& b) {
  if (b.sample_weight.defined()) metric.update_state(b.y_true, b.y_pred, b.sample_weight);
  else metric.update_state(b.y_true, b.y_pred);
}

std::size_t batch_count(const FixtureCase& c) { return c.array("results").values.size(); }

Shape shape_of(const FixtureArray& dims) { return Shape(dims.values.begin(), dims.values.end()); }

/// Whether every got[i] is within tol (relative and absolute) of want[i]; INFO names the first that is not.
bool all_close(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  if (got.size() != want.size()) {
    UNSCOPED_INFO("sizes differ: " << got.size() << " != " << want.size());
    return false;
  }
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= tol + tol * std::abs(want[i]))) {
      UNSCOPED_INFO("element " << i << ": " << got[i] << " != " << want[i]);
      return false;
    }
  return true;
}

/// The mean-type metrics, whose float32 inputs flip no decision (the confusion metrics compare at
/// thresholds, where float32's rounding of 0.3 moves it above 0.3).
bool mean_type(const M::Metric& metric) { return dynamic_cast<const M::MeanMetricWrapper*>(&metric) != nullptr; }

/// The snake_case name of a metric's class, as Keras's to_snake_case writes it.
std::string class_of(const M::Metric& m) {
  const std::type_info& t = typeid(m);
  const std::vector<std::pair<const std::type_info*, std::string>> classes = {
      {&typeid(M::MeanSquaredError), "mean_squared_error"},
      {&typeid(M::MeanAbsoluteError), "mean_absolute_error"},
      {&typeid(M::RootMeanSquaredError), "root_mean_squared_error"},
      {&typeid(M::BinaryAccuracy), "binary_accuracy"},
      {&typeid(M::CategoricalAccuracy), "categorical_accuracy"},
      {&typeid(M::SparseCategoricalAccuracy), "sparse_categorical_accuracy"},
      {&typeid(M::TopKCategoricalAccuracy), "top_k_categorical_accuracy"},
      {&typeid(M::SparseTopKCategoricalAccuracy), "sparse_top_k_categorical_accuracy"},
      {&typeid(M::AUC), "auc"},
      {&typeid(M::Precision), "precision"},
      {&typeid(M::Recall), "recall"},
      {&typeid(M::TruePositives), "true_positives"},
      {&typeid(M::FalsePositives), "false_positives"},
      {&typeid(M::TrueNegatives), "true_negatives"},
      {&typeid(M::FalseNegatives), "false_negatives"},
      {&typeid(M::F1Score), "f1_score"},
      {&typeid(M::FBetaScore), "f_beta_score"},
      {&typeid(M::BinaryIoU), "binary_io_u"},
  };
  for (const auto& [type, name] : classes)
    if (*type == t) return name;
  return "unknown";
}

}  // namespace

TEST_CASE("metrics match Keras over several batches with and without sample weights then after a reset",
          "[metrics]") {
  const auto cases = cases_of_kind("metric");
  REQUIRE(cases.size() >= 88);
  std::size_t float32_cases = 0;
  for (const DType dtype : {DType::f64, DType::f32}) {
    for (const FixtureCase& c : cases) {
      INFO("case " << c.name << " (" << c.words.at(1) << "), dtype " << fmt::format("{}", dtype));
      auto metric = make_metric(c);
      if (dtype == DType::f32 && !mean_type(*metric)) continue;
      float32_cases += dtype == DType::f32;
      CHECK(metric->result() == 0.0);
      const std::vector<double>& want = c.array("results").values;
      const std::vector<double>& keras = c.array("keras_results").values;
      // float64: Keras's code with its float32 means kept in float64 (see the script), exactly; Keras as it
      // is within its float32 rounding. float32 inputs add their own rounding.
      const double tol = dtype == DType::f64 ? 1e-12 : 1e-5;
      for (std::size_t b = 0; b < batch_count(c); ++b) {
        INFO("batch " << b);
        update(*metric, batch(c, b, dtype));
        CHECK(metric->result() == Approx(want[b]).epsilon(tol).margin(tol));
        CHECK(metric->result() == Approx(keras[b]).epsilon(1e-5).margin(1e-6));
        if (dtype != DType::f64) continue;
        const std::string index = std::to_string(b);
        const Tensor tensor = metric->result_tensor();
        if (c.has("result_" + index)) {
          CHECK(tensor.shape() == c.array("result_" + index).shape);
          CHECK(all_close(values(tensor), c.array("result_" + index).values, 1e-12));
        } else {
          CHECK(tensor.ndim() == 0);
          CHECK(tensor.item<double>() == metric->result());
        }
        CHECK(all_close(metric->state(), c.array("state_" + index).values, 1e-12));
      }
      metric->reset_state();
      CHECK(metric->result() == 0.0);
      update(*metric, batch(c, 0, dtype));
      CHECK(metric->result() == Approx(std::stod(c.option("after_reset"))).epsilon(tol).margin(tol));
    }
  }
  CHECK(float32_cases >= 25);
}

TEST_CASE("Mean and Sum match Keras for weighted scalars and for arrays with and without sample weights",
          "[metrics]") {
  const auto means = cases_of_kind("mean");
  const auto sums = cases_of_kind("sum");
  REQUIRE(means.size() == 3);
  REQUIRE(sums.size() == 2);
  for (const FixtureCase& c : means) {
    INFO("case " << c.name);
    M::Mean mean("loss");
    CHECK(mean.name() == "loss");
    CHECK(mean.result() == 0.0);
    const std::vector<double>& want = c.array("results").values;
    const std::vector<double>& keras = c.array("keras_results").values;
    for (std::size_t b = 0; b < want.size(); ++b) {
      const std::string index = std::to_string(b);
      const FixtureArray& value = c.array("value_" + index);
      if (c.option("weights") == "1") mean.update_state(value.values.at(0), std::stod(c.option("weight_" + index)));
      else if (c.has("sample_weight_" + index)) mean.update_state(value.tensor(), c.array("sample_weight_" + index).tensor());
      else mean.update_state(value.tensor());
      CHECK(mean.result() == Approx(want[b]).epsilon(1e-12).margin(1e-12));
      CHECK(mean.result() == Approx(keras[b]).epsilon(1e-6));
    }
    mean.reset_state();
    CHECK(mean.result() == 0.0);
  }
  for (const FixtureCase& c : sums) {
    INFO("case " << c.name);
    M::Sum sum;
    CHECK(sum.name() == "sum");
    const std::vector<double>& want = c.array("results").values;
    for (std::size_t b = 0; b < want.size(); ++b) {
      const std::string index = std::to_string(b);
      const Tensor value = c.array("value_" + index).tensor();
      if (c.has("sample_weight_" + index)) sum.update_state(value, c.array("sample_weight_" + index).tensor());
      else sum.update_state(value);
      CHECK(sum.result() == Approx(want[b]).epsilon(1e-12).margin(1e-12));
    }
    sum.reset_state();
    CHECK(sum.result() == 0.0);
  }
}

TEST_CASE("Mean counts weight 1 by default and rejects negative or non-finite weights", "[metrics]") {
  M::Mean mean;
  CHECK(mean.name() == "mean");
  mean.update_state(2.0);
  mean.update_state(5.0);
  CHECK(mean.result() == 3.5);
  mean.update_state(100.0, 0.0);  // a zero weight counts for nothing
  CHECK(mean.result() == 3.5);
  REQUIRE_THROWS_WITH(mean.update_state(1.0, -1.0), Catch::Contains("Mean 'mean'") && Catch::Contains("-1"));
  REQUIRE_THROWS_AS(mean.update_state(1.0, std::numeric_limits<double>::infinity()), Error);
  REQUIRE_THROWS_AS(mean.update_state(Tensor()), Error);
  CHECK(mean.result() == 3.5);
}

TEST_CASE("metrics have Keras default names options and directions", "[metrics]") {
  CHECK(M::MeanSquaredError().name() == "mean_squared_error");
  CHECK(M::MeanAbsoluteError().name() == "mean_absolute_error");
  CHECK(M::BinaryAccuracy().name() == "binary_accuracy");
  CHECK(M::BinaryAccuracy().threshold() == 0.5);
  CHECK(M::CategoricalAccuracy().name() == "categorical_accuracy");
  CHECK(M::SparseCategoricalAccuracy().name() == "sparse_categorical_accuracy");
  CHECK(M::SparseCategoricalAccuracy("acc").name() == "acc");
  CHECK(M::RootMeanSquaredError().name() == "root_mean_squared_error");
  CHECK(M::TopKCategoricalAccuracy().k() == 5);
  CHECK(M::SparseTopKCategoricalAccuracy().name() == "sparse_top_k_categorical_accuracy");
  CHECK(M::Precision().name() == "precision");
  CHECK(M::Precision().thresholds() == std::vector<double>{0.5});
  CHECK(M::Precision({.top_k = 3}).thresholds() == std::vector<double>{-1e10});
  CHECK(M::Recall().name() == "recall");
  CHECK(M::TruePositives().name() == "true_positives");
  CHECK(M::FalseNegatives().thresholds() == std::vector<double>{0.5});
  CHECK(M::SensitivityAtSpecificity(0.5).name() == "sensitivity_at_specificity");
  CHECK(M::SensitivityAtSpecificity(0.5).num_thresholds() == 200);
  CHECK(M::RecallAtPrecision(0.5, {.num_thresholds = 1}).thresholds() == std::vector<double>{0.5});
  const M::AUC auc;
  CHECK(auc.name() == "auc");
  CHECK(auc.num_thresholds() == 200);
  CHECK(auc.thresholds().front() == -1e-7);
  CHECK(auc.thresholds()[1] == 1.0 / 199.0);
  CHECK(auc.thresholds().back() == 1.0 + 1e-7);
  CHECK(M::AUC({.thresholds = {0.7, 0.2}}).thresholds() == std::vector<double>{-1e-7, 0.2, 0.7, 1.0 + 1e-7});
  CHECK(M::F1Score().name() == "f1_score");
  CHECK(M::FBetaScore().name() == "fbeta_score");
  CHECK(M::MeanIoU(3).name() == "mean_io_u");
  CHECK(M::IoU(3, {1}).name() == "io_u");
  CHECK(M::BinaryIoU().name() == "binary_io_u");
  CHECK(M::BinaryIoU().target_class_ids() == std::vector<std::int64_t>{0, 1});
  CHECK(M::OneHotIoU(3, {0}).name() == "one_hot_io_u");
  CHECK(M::OneHotMeanIoU(3).name() == "one_hot_mean_io_u");

  CHECK(M::MeanSquaredError().direction() == "down");
  CHECK(M::RootMeanSquaredError().direction() == "down");
  CHECK(M::BinaryAccuracy().direction() == "up");
  CHECK(M::SparseTopKCategoricalAccuracy().direction() == "up");
  CHECK(M::AUC().direction() == "up");
  CHECK(M::Precision().direction() == "up");
  CHECK(M::F1Score().direction() == "up");
  CHECK(M::MeanIoU(2).direction() == "up");
  CHECK(M::TruePositives().direction().empty());  // Keras gives the counts no direction
  CHECK(M::MeanMetricWrapper([](const Tensor& t, const Tensor&) { return t; }, "mine").direction().empty());
}

TEST_CASE("metrics get chooses the metric Keras chooses and names it by the string given", "[metrics]") {
  const auto cases = cases_of_kind("select");
  REQUIRE(cases.size() >= 40);
  for (const FixtureCase& c : cases) {
    INFO("case " << c.name);
    const std::string& identifier = c.option("identifier");
    const auto metric = M::get(identifier, shape_of(c.array("y_true_shape")), shape_of(c.array("y_pred_shape")));
    CHECK(metric->name() == identifier);
    CHECK(class_of(*metric) == c.option("chosen"));
  }
}

TEST_CASE("metrics get rejects unknown names accuracy for scalars and classes that need arguments", "[metrics]") {
  REQUIRE_THROWS_WITH(M::get("accuracyy", {4}, {4, 3}),
                      Catch::Contains("'accuracyy'") && Catch::Contains("mae") &&
                          Catch::Contains("sparse_categorical_accuracy") && Catch::Contains("acc") &&
                          Catch::Contains("auc") && Catch::Contains("f1_score") && Catch::Contains("BinaryIoU"));
  REQUIRE_THROWS_AS(M::get("Mse", {4}, {4}), Error);  // Keras's aliases are case-sensitive, except accuracy's
  REQUIRE_THROWS_WITH(M::get("accuracy", {}, {4}), Catch::Contains("rank >= 1"));
  REQUIRE_THROWS_WITH(M::get("mean_io_u", {4}, {4}), Catch::Contains("MeanIoU") && Catch::Contains("num_classes"));
  REQUIRE_THROWS_WITH(M::get("PrecisionAtRecall", {4}, {4}),
                      Catch::Contains("PrecisionAtRecall") && Catch::Contains("recall"));
}

TEST_CASE("metric errors name the metric the function and both shapes", "[metrics]") {
  const auto acc = M::get("accuracy", {4}, {4, 3});
  REQUIRE_THROWS_WITH(acc->update_state(i64({0, 1, 2}, {3}), randn({4, 3}, 1)),
                      Catch::Contains("metric 'accuracy'") && Catch::Contains("sparse_categorical_accuracy") &&
                          Catch::Contains("[3]") && Catch::Contains("[4, 3]"));
  REQUIRE_THROWS_WITH(acc->update_state(i64({0, 1, 3, 2}, {4}), randn({4, 3}, 1)),
                      Catch::Contains("metric 'accuracy'") && Catch::Contains("3"));
  REQUIRE_THROWS_WITH(acc->update_state(f64({0, 1, 2.5, 1}, {4}), randn({4, 3}, 1)),
                      Catch::Contains("metric 'accuracy'") && Catch::Contains("class ids") && Catch::Contains("2.5"));
  CHECK(acc->result() == 0.0);  // failed updates leave the state alone

  M::CategoricalAccuracy categorical;
  REQUIRE_THROWS_WITH(categorical.update_state(f64({0, 1}, {2, 1}), randn({2, 3}, 2)),
                      Catch::Contains("categorical_accuracy") && Catch::Contains("[2, 1]") &&
                          Catch::Contains("[2, 3]"));
  M::BinaryAccuracy binary;
  REQUIRE_THROWS_WITH(binary.update_state(f64({0, 1, 1, 0}, {2, 2}), f64({0.1, 0.9, 0.2}, {3, 1})),
                      Catch::Contains("binary_accuracy") && Catch::Contains("[2, 2]") && Catch::Contains("[3, 1]"));
  REQUIRE_THROWS_WITH(binary.update_state(f64({0, 1}, {2}), i64({0, 1}, {2})), Catch::Contains("float32"));
  M::MeanSquaredError mse;
  REQUIRE_THROWS_WITH(mse.update_state(randn({2, 3}, 3), randn({2, 4}, 4)),
                      Catch::Contains("metric 'mean_squared_error'") && Catch::Contains("[2, 3]") &&
                          Catch::Contains("[2, 4]"));
}

TEST_CASE("bad metric options and inputs name the metric the argument and the values", "[metrics][bad_input]") {
  const Tensor labels = f64({1, 0, 1, 0}, {4});
  const Tensor probs = f64({0.9, 0.2, 0.6, 0.4}, {4});
  const Tensor labels2 = f64({1, 0, 0, 1, 0, 1}, {2, 3});
  const Tensor probs2 = f64({0.9, 0.2, 0.3, 0.6, 0.4, 0.8}, {2, 3});
  run_bad_inputs("metrics", {
      {"Precision: a threshold above 1", [] { M::Precision({.thresholds = {0.5, 1.5}}); },
       {"Precision 'precision'", "thresholds", "1.5"}},
      {"Recall: a negative threshold", [] { M::Recall({.thresholds = {-0.1}}); }, {"Recall 'recall'", "-0.1"}},
      {"TruePositives: a threshold above 1", [] { M::TruePositives({.thresholds = {2.0}}); },
       {"TruePositives", "[0, 1]", "2"}},
      {"AUC: a threshold outside [0, 1]", [] { M::AUC({.thresholds = {0.2, 1.2}}); }, {"AUC 'auc'", "1.2"}},
      {"AUC: num_thresholds 1", [] { M::AUC({.num_thresholds = 1}); }, {"AUC 'auc'", "num_thresholds", "> 1"}},
      {"AUC: an unknown curve", [] { M::AUC({.curve = "ROCK"}); }, {"AUC", "ROCK", "PR"}},
      {"AUC: an unknown summation method", [] { M::AUC({.summation_method = "trapezoid"}); },
       {"AUC", "trapezoid", "minoring"}},
      {"AUC: num_labels without multi_label", [] { M::AUC({.num_labels = 3}); }, {"AUC", "num_labels", "multi_label"}},
      {"AUC: label_weights for the wrong number of labels",
       [] { M::AUC({.multi_label = true, .num_labels = 3, .label_weights = {1.0, 2.0}}); },
       {"AUC", "2 label_weights", "3 labels"}},
      {"AUC: multi_label with rank-1 predictions",
       [&] { M::AUC({.multi_label = true}).update_state(labels, probs); }, {"AUC", "rank 2", "[4]"}},
      {"SensitivityAtSpecificity: num_thresholds 0",
       [] { M::SensitivityAtSpecificity(0.5, {.num_thresholds = 0}); },
       {"SensitivityAtSpecificity", "num_thresholds", "0"}},
      {"PrecisionAtRecall: recall above 1", [] { M::PrecisionAtRecall(1.5); }, {"PrecisionAtRecall", "recall", "1.5"}},
      {"Precision: class_id out of range",
       [&] { M::Precision({.class_id = 3}).update_state(labels2, probs2); },
       {"Precision 'precision'", "class_id 3", "[0, 3)", "[2, 3]"}},
      {"Precision: class_id with rank-1 predictions",
       [&] { M::Precision({.class_id = 0}).update_state(labels, probs); }, {"Precision", "class_id", "[4]"}},
      {"Recall: top_k above the classes", [&] { M::Recall({.top_k = 4}).update_state(labels2, probs2); },
       {"Recall 'recall'", "top_k", "4", "[2, 3]"}},
      {"SpecificityAtSensitivity: class_id out of range",
       [&] { M::SpecificityAtSensitivity(0.5, {.class_id = 5}).update_state(labels2, probs2); },
       {"SpecificityAtSensitivity", "class_id 5"}},
      {"Precision: y_true and y_pred of different shapes",
       [&] { M::Precision().update_state(labels2, probs); }, {"Precision", "[2, 3]", "[4]"}},
      {"Precision: a sample_weight that does not broadcast",
       [&] { M::Precision().update_state(labels2, probs2, f64({1, 2, 3}, {3})); },
       {"Precision", "sample_weight", "[3]", "[2, 3]"}},
      {"AUC: a sample_weight that does not broadcast",
       [&] { M::AUC().update_state(labels, probs, f64({1, 2}, {2})); }, {"AUC", "sample_weight", "[2]", "[4]"}},
      {"MeanSquaredError: a sample_weight that does not broadcast",
       [&] { M::MeanSquaredError().update_state(probs2, probs2, f64({1, 2, 3}, {3})); },
       {"mean_squared_error", "sample_weight", "[3]"}},
      {"Mean: a sample_weight that does not broadcast",
       [&] { M::Mean().update_state(probs2, f64({1, 2, 3, 4}, {4})); }, {"Mean 'mean'", "sample_weight", "[4]"}},
      {"F1Score: an unknown average", [] { M::F1Score({.average = "mean"}); }, {"F1Score 'f1_score'", "mean"}},
      {"FBetaScore: beta 0", [] { M::FBetaScore({.beta = 0.0}); }, {"FBetaScore", "beta", "0"}},
      {"F1Score: threshold 0", [] { M::F1Score({.threshold = 0.0}); }, {"F1Score", "threshold", "(0, 1]"}},
      {"F1Score: rank-1 inputs", [&] { M::F1Score().update_state(labels, probs); }, {"F1Score", "[4]"}},
      {"F1Score: another number of classes",
       [&] {
         M::F1Score f1;
         f1.update_state(labels2, probs2);
         f1.update_state(f64({1, 0}, {1, 2}), f64({0.3, 0.4}, {1, 2}));
       },
       {"F1Score", "3 classes", "[1, 2]"}},
      {"F1Score: a sample_weight per element", [&] { M::F1Score().update_state(labels2, probs2, probs2); },
       {"F1Score", "sample_weight", "[2]", "[2, 3]"}},
      {"MeanIoU: no classes", [] { M::MeanIoU(0); }, {"MeanIoU", "num_classes", "0"}},
      {"IoU: a target class out of range", [] { M::IoU(3, {0, 3}); }, {"IoU 'io_u'", "3", "[0, 3)"}},
      {"IoU: no target classes", [] { M::IoU(3, {}); }, {"IoU", "target_class_ids"}},
      {"MeanIoU: fractional class ids", [&] { M::MeanIoU(3).update_state(f64({0, 1.5}, {2}), f64({0, 1}, {2})); },
       {"MeanIoU 'mean_io_u'", "1.5"}},
      {"MeanIoU: different numbers of ids",
       [&] { M::MeanIoU(3).update_state(i64({0, 1, 2}, {3}), i64({0, 1}, {2})); }, {"MeanIoU", "[3]", "[2]"}},
      {"MeanIoU: a sample_weight of another size",
       [&] { M::MeanIoU(3).update_state(i64({0, 1, 2}, {3}), i64({0, 1, 1}, {3}), f64({1, 2}, {2})); },
       {"MeanIoU", "sample_weight", "[2]"}},
      {"OneHotMeanIoU: an axis outside y_true", [&] { M::OneHotMeanIoU(3, {.axis = 2}).update_state(labels2, probs2); },
       {"OneHotMeanIoU", "axis 2", "[2, 3]"}},
      {"Precision: set_state of the wrong length", [] { M::Precision().set_state({1.0, 2.0, 3.0}); },
       {"Precision", "set_state", "2", "3"}},
      {"MeanSquaredError: set_state of the wrong length", [] { M::MeanSquaredError().set_state({1.0}); },
       {"mean_squared_error", "set_state", "2", "1"}},
      {"metrics::get: an unknown name", [] { M::get("aucc", {2}, {2}); }, {"metrics::get", "aucc", "auc"}},
  });
}

TEST_CASE("metric updates record nothing on an active tape", "[metrics]") {
  const Tensor y_pred = ops::sigmoid(randn({4, 3}, 5));
  GradientTape tape;
  tape.watch(y_pred);
  const Tensor labels = f64({1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0}, {4, 3});
  M::MeanSquaredError mse;
  M::CategoricalAccuracy accuracy;
  M::AUC auc({.from_logits = true});
  M::F1Score f1;
  M::OneHotMeanIoU iou(3);
  M::Precision precision({.top_k = 1});
  mse.update_state(randn({4, 3}, 6), y_pred);
  accuracy.update_state(randn({4, 3}, 7), y_pred);
  auc.update_state(labels, y_pred);
  f1.update_state(labels, y_pred);
  iou.update_state(labels, y_pred);
  precision.update_state(labels, y_pred);
  CHECK(tape.recorded_ops().empty());
}

TEST_CASE("MeanMetricWrapper averages a user function per sample", "[metrics]") {
  // |y_true - y_pred| summed over the last axis: samples [0,0] vs [1,2] -> 3, [1,1] vs [1,1] -> 0.
  M::MeanMetricWrapper l1([](const Tensor& t, const Tensor& p) { return ops::sum(ops::abs(t - p), {-1}); }, "l1");
  l1.update_state(f64({0, 0, 1, 1}, {2, 2}), f64({1, 2, 1, 1}, {2, 2}));
  CHECK(l1.result() == 1.5);
  l1.update_state(f64({0, 0}, {1, 2}), f64({0, 3}, {1, 2}), f64({3}, {1}));
  CHECK(l1.result() == (3.0 + 0.0 + 3.0 * 3.0) / 5.0);
  REQUIRE_THROWS_AS(M::MeanMetricWrapper(nullptr, "empty"), Error);
}

namespace {

/// A metric of one's own that implements only the two-argument update_state.
class CountRows : public M::Metric {
 public:
  CountRows() : Metric("rows") {}
  using Metric::update_state;
  void update_state(const Tensor& /*y_true*/, const Tensor& y_pred) override {
    accumulate(double(y_pred.shape()[0]), 1.0);
  }
};

}  // namespace

TEST_CASE("a metric of one's own keeps working with the two-argument update_state", "[metrics]") {
  CountRows rows;
  M::Metric& metric = rows;
  metric.update_state(f64({0, 1}, {2}), f64({0, 1}, {2}));
  metric.update_state(f64({0, 1}, {2}), f64({0, 1}, {2}), Tensor());  // an undefined weight is weight 1
  CHECK(metric.result() == 2.0);
  CHECK(metric.state() == std::vector<double>{4.0, 2.0});
  REQUIRE_THROWS_WITH(metric.update_state(f64({0, 1}, {2}), f64({0, 1}, {2}), f64({1, 1}, {2})),
                      Catch::Contains("metric 'rows'") && Catch::Contains("sample_weight"));
  metric.reset_state();
  CHECK(metric.result() == 0.0);
  // Both forms stay visible on the built-in classes (no overload hiding).
  M::Precision precision;
  precision.update_state(f64({1, 0}, {2}), f64({0.7, 0.8}, {2}));
  precision.update_state(f64({1, 0}, {2}), f64({0.7, 0.8}, {2}), f64({1, 0}, {2}));
  CHECK(precision.result() == 2.0 / 3.0);
}

namespace {

/// Feeds batch halves to two metrics, sums their states into a third, and checks it reads as the metric
/// that saw everything (what data-parallel logging does).
void check_state_sums(const std::function<std::shared_ptr<M::Metric>()>& make, const std::vector<Batch>& batches) {
  auto whole = make(), first = make(), second = make(), summed = make();
  for (std::size_t b = 0; b < batches.size(); ++b) {
    update(*whole, batches[b]);
    update(b % 2 == 0 ? *first : *second, batches[b]);
  }
  std::vector<double> a = first->state(), b = second->state();
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  summed->set_state(a);
  CHECK(all_close(summed->state(), whole->state(), 1e-12));
  CHECK(summed->result() == Approx(whole->result()).epsilon(1e-12).margin(1e-12));
  CHECK(all_close(values(summed->result_tensor()), values(whole->result_tensor()), 1e-12));
}

}  // namespace

TEST_CASE("metric states sum across processes and set_state restores them", "[metrics]") {
  std::vector<Batch> binary, onehot, ids;
  for (std::uint64_t s = 0; s < 4; ++s) {
    const Tensor labels = ops::cast(ops::greater(randn({5, 3}, 10 + s), Tensor::scalar(0.0, DType::f64)), DType::f64);
    binary.push_back({labels, ops::sigmoid(randn({5, 3}, 20 + s)), Tensor::uniform({5}, 0.0, 2.0, DType::f64, 30 + s)});
    const Tensor classes = ops::argmax(randn({5, 3}, 40 + s), -1);
    onehot.push_back({ops::one_hot(classes, 3).to(DType::f64), ops::softmax(randn({5, 3}, 50 + s), -1),
                      Tensor::uniform({5}, 0.0, 2.0, DType::f64, 60 + s)});
    ids.push_back({classes, ops::argmax(randn({5, 3}, 70 + s), -1), Tensor()});
  }
  check_state_sums([] { return std::make_shared<M::MeanSquaredError>(); }, binary);
  check_state_sums([] { return std::make_shared<M::Precision>(M::PrecisionOptions{.thresholds = {0.2, 0.6}}); }, binary);
  check_state_sums([] { return std::make_shared<M::Recall>(M::RecallOptions{.class_id = 1}); }, binary);
  check_state_sums([] { return std::make_shared<M::TrueNegatives>(); }, binary);
  check_state_sums([] { return std::make_shared<M::PrecisionAtRecall>(0.5); }, binary);
  check_state_sums([] { return std::make_shared<M::AUC>(M::AUCOptions{.curve = "PR"}); }, binary);
  // Shaped by the first batch: the fresh metric takes its shape from the summed state.
  check_state_sums([] { return std::make_shared<M::AUC>(M::AUCOptions{.multi_label = true}); }, binary);
  check_state_sums([] { return std::make_shared<M::F1Score>(); }, onehot);
  check_state_sums([] { return std::make_shared<M::FBetaScore>(M::FBetaScoreOptions{.average = "micro"}); }, onehot);
  check_state_sums([] { return std::make_shared<M::MeanIoU>(3); }, ids);

  // build() gives a metric shaped by its first batch its state before any batch.
  M::F1Score f1;
  CHECK(f1.state().empty());
  f1.build({8, 4}, {8, 4});
  CHECK(f1.state() == std::vector<double>(16, 0.0));
  M::AUC auc({.num_thresholds = 3, .multi_label = true});
  auc.build({8, 2}, {8, 2});
  CHECK(auc.state().size() == 4 * 3 * 2);
  CHECK(M::AUC({.num_thresholds = 3, .multi_label = true, .num_labels = 2}).state().size() == 4 * 3 * 2);
}

TEST_CASE("OneHotMeanIoU with axis 1 reads the classes along axis 1", "[metrics]") {
  // Keras's result() fails for an axis other than -1 (it reuses axis for its sum); the counts are Keras's.
  const Tensor scores = Tensor::uniform({2, 3, 4}, 0.0, 1.0, DType::f64, 3);
  const Tensor labels = ops::one_hot(ops::argmax(Tensor::uniform({2, 3, 4}, 0.0, 1.0, DType::f64, 4), 1), 3);
  M::OneHotMeanIoU along_1(3, {.axis = 1});
  along_1.update_state(ops::transpose(labels, 1, 2), scores);
  M::OneHotMeanIoU along_last(3);
  along_last.update_state(labels, ops::transpose(scores, 1, 2));
  CHECK(along_1.state() == along_last.state());
  CHECK(along_1.result() == along_last.result());
}
