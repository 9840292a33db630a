#include <catch2/catch.hpp>

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "models/metrics.hpp"
#include "tests/fixture_reader.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace M = loom::layers::metrics;

namespace {

/// The metric a "metric" case of tests/fixtures/metric_fixtures.txt names (see make_metric_fixtures.py).
std::shared_ptr<M::Metric> make_metric(const FixtureCase& c) {
  const std::string& cls = c.words.at(1);
  if (cls == "MeanSquaredError") return std::make_shared<M::MeanSquaredError>();
  if (cls == "MeanAbsoluteError") return std::make_shared<M::MeanAbsoluteError>();
  if (cls == "BinaryAccuracy")
    return std::make_shared<M::BinaryAccuracy>(M::BinaryAccuracyOptions{.threshold = std::stod(c.option("threshold"))});
  if (cls == "CategoricalAccuracy") return std::make_shared<M::CategoricalAccuracy>();
  REQUIRE(cls == "SparseCategoricalAccuracy");
  return std::make_shared<M::SparseCategoricalAccuracy>();
}

std::vector<FixtureCase> cases_of_kind(const std::string& kind) {
  std::vector<FixtureCase> out;
  for (const FixtureCase& c : read_fixture_cases("metric_fixtures.txt"))
    if (c.words.at(0) == kind) out.push_back(c);
  return out;
}

/// Batch b of a case: labels stay int64 for the sparse metric; everything else becomes `dtype`.
std::pair<Tensor, Tensor> batch(const FixtureCase& c, std::size_t b, DType dtype) {
  const FixtureArray& t = c.array("y_true_" + std::to_string(b));
  const bool sparse = c.words.at(1) == "SparseCategoricalAccuracy";
  return {t.tensor(sparse ? DType::i64 : dtype), c.array("y_pred_" + std::to_string(b)).tensor(dtype)};
}

std::size_t batch_count(const FixtureCase& c) { return c.array("results").values.size(); }

Shape shape_of(const FixtureArray& dims) { return Shape(dims.values.begin(), dims.values.end()); }

}  // namespace

TEST_CASE("metrics match Keras over several batches, then after a reset", "[metrics]") {
  const auto cases = cases_of_kind("metric");
  REQUIRE(cases.size() >= 12);
  for (const DType dtype : {DType::f64, DType::f32}) {
    for (const FixtureCase& c : cases) {
      INFO("case " << c.name << ", dtype " << fmt::format("{}", dtype));
      auto metric = make_metric(c);
      CHECK(metric->result() == 0.0);
      const std::vector<double>& want = c.array("results").values;
      // Keras's JAX mean reduces in float32 (see the script); float32 inputs add their own rounding.
      const double tol = dtype == DType::f64 ? 1e-6 : 1e-5;
      for (std::size_t b = 0; b < batch_count(c); ++b) {
        const auto [y_true, y_pred] = batch(c, b, dtype);
        metric->update_state(y_true, y_pred);
        CHECK(metric->result() == Approx(want[b]).epsilon(tol).margin(tol));
      }
      metric->reset_state();
      CHECK(metric->result() == 0.0);
      const auto [y_true, y_pred] = batch(c, 0, dtype);
      metric->update_state(y_true, y_pred);
      CHECK(metric->result() == Approx(std::stod(c.option("after_reset"))).epsilon(tol).margin(tol));
    }
  }
}

TEST_CASE("Mean matches Keras for weighted scalars and for arrays of values", "[metrics]") {
  const auto cases = cases_of_kind("mean");
  REQUIRE(cases.size() == 2);
  for (const FixtureCase& c : cases) {
    INFO("case " << c.name);
    M::Mean mean("loss");
    CHECK(mean.name() == "loss");
    CHECK(mean.result() == 0.0);
    const std::vector<double>& want = c.array("results").values;
    for (std::size_t b = 0; b < want.size(); ++b) {
      const FixtureArray& value = c.array("value_" + std::to_string(b));
      if (c.option("weights") == "1")
        mean.update_state(value.values.at(0), std::stod(c.option("weight_" + std::to_string(b))));
      else
        mean.update_state(value.tensor());
      CHECK(mean.result() == Approx(want[b]).epsilon(1e-6));  // Keras averages rows in float32
    }
    mean.reset_state();
    CHECK(mean.result() == 0.0);
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

TEST_CASE("metrics have Keras default names", "[metrics]") {
  CHECK(M::MeanSquaredError().name() == "mean_squared_error");
  CHECK(M::MeanAbsoluteError().name() == "mean_absolute_error");
  CHECK(M::BinaryAccuracy().name() == "binary_accuracy");
  CHECK(M::BinaryAccuracy().threshold() == 0.5);
  CHECK(M::CategoricalAccuracy().name() == "categorical_accuracy");
  CHECK(M::SparseCategoricalAccuracy().name() == "sparse_categorical_accuracy");
  CHECK(M::SparseCategoricalAccuracy("acc").name() == "acc");
}

TEST_CASE("metrics get chooses the metric Keras chooses and names it by the string given", "[metrics]") {
  const auto cases = cases_of_kind("select");
  REQUIRE(cases.size() >= 10);
  for (const FixtureCase& c : cases) {
    INFO("case " << c.name);
    const std::string& identifier = c.option("identifier");
    const auto metric = M::get(identifier, shape_of(c.array("y_true_shape")), shape_of(c.array("y_pred_shape")));
    CHECK(metric->name() == identifier);
    const std::string& chosen = c.option("chosen");
    if (chosen == "binary_accuracy") CHECK(dynamic_cast<M::BinaryAccuracy*>(metric.get()) != nullptr);
    else if (chosen == "categorical_accuracy") CHECK(dynamic_cast<M::CategoricalAccuracy*>(metric.get()) != nullptr);
    else if (chosen == "sparse_categorical_accuracy")
      CHECK(dynamic_cast<M::SparseCategoricalAccuracy*>(metric.get()) != nullptr);
    else if (chosen == "mean_squared_error") CHECK(dynamic_cast<M::MeanSquaredError*>(metric.get()) != nullptr);
    else CHECK((chosen == "mean_absolute_error" && dynamic_cast<M::MeanAbsoluteError*>(metric.get()) != nullptr));
  }
}

TEST_CASE("metrics get rejects unknown names and accuracy for scalars", "[metrics]") {
  REQUIRE_THROWS_WITH(M::get("accuracyy", {4}, {4, 3}),
                      Catch::Contains("'accuracyy'") && Catch::Contains("mae") &&
                          Catch::Contains("sparse_categorical_accuracy") && Catch::Contains("acc"));
  REQUIRE_THROWS_AS(M::get("Mse", {4}, {4}), Error);  // Keras's aliases are case-sensitive, except accuracy's
  REQUIRE_THROWS_WITH(M::get("accuracy", {}, {4}), Catch::Contains("rank >= 1"));
}

TEST_CASE("metric errors name the metric, the function and both shapes", "[metrics]") {
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

TEST_CASE("metric updates record nothing on an active tape", "[metrics]") {
  const Tensor y_pred = randn({4, 3}, 5);
  GradientTape tape;
  tape.watch(y_pred);
  M::MeanSquaredError mse;
  M::CategoricalAccuracy accuracy;
  mse.update_state(randn({4, 3}, 6), y_pred);
  accuracy.update_state(randn({4, 3}, 7), y_pred);
  CHECK(tape.recorded_ops().empty());
}

TEST_CASE("MeanMetricWrapper averages a user function per sample", "[metrics]") {
  // |y_true - y_pred| summed over the last axis: samples [0,0] vs [1,2] -> 3, [1,1] vs [1,1] -> 0.
  M::MeanMetricWrapper l1([](const Tensor& t, const Tensor& p) { return ops::sum(ops::abs(t - p), {-1}); }, "l1");
  l1.update_state(f64({0, 0, 1, 1}, {2, 2}), f64({1, 2, 1, 1}, {2, 2}));
  CHECK(l1.result() == 1.5);
  l1.update_state(f64({0, 0}, {1, 2}), f64({0, 3}, {1, 2}));
  CHECK(l1.result() == 2.0);
  REQUIRE_THROWS_AS(M::MeanMetricWrapper(nullptr, "empty"), Error);
}
