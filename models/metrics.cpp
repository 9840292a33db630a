#include "models/metrics.hpp"

#include <array>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "models/detail/targets.hpp"
#include "models/losses.hpp"

namespace loom::layers::metrics {

namespace {

/// Keras's reduce_to_samplewise_values followed by Mean's (or Sum's) update: with weights (undefined: none),
/// each sample's value is the `reduce` ("mean" or "sum") over its non-batch axes of value * weight, and it
/// counts for its weight's mean over those axes; without, for 1 (a scalar is one sample). Returns (sum of the
/// samples' values, their count).
std::pair<double, double> samplewise_sum(const Tensor& given, Tensor weight, bool mean, const std::string& owner) {
  NoGradGuard no_grad;
  Tensor values = given.dtype() == DType::f64 ? given : ops::cast(given, DType::f64);
  const auto reduce_from = [mean](const Tensor& t, std::int64_t first) {
    Axes axes;
    for (std::int64_t a = first; a < t.ndim(); ++a) axes.push_back(a);
    if (axes.empty()) return t;
    return mean ? ops::mean(t, axes, false) : ops::sum(t, axes, false);
  };
  if (weight.defined()) {
    weight = ops::cast(weight, DType::f64);
    std::tie(values, weight) = models::detail::squeeze_or_expand_to_same_rank(values, weight);
    if (values.ndim() > weight.ndim()) values = reduce_from(values, weight.ndim());
    check(broadcasts_to(weight.shape(), values.shape()),
          "{}: sample_weight of shape {} does not broadcast against the metric's values of shape {}", owner,
          weight.shape(), values.shape());
    weight = ops::broadcast_to(weight, values.shape());
    values = values * weight;
    if (weight.ndim() > 1) weight = reduce_from(weight, 1);
  }
  if (values.ndim() > 1) values = reduce_from(values, 1);
  const double sum = values.numel() == 0 ? 0.0 : ops::sum(values, {}, false).item<double>();
  double count = 1.0;
  if (weight.defined())
    count = weight.numel() == 0 ? 0.0 : ops::sum(weight, {}, false).item<double>();
  else if (values.ndim() >= 1)
    count = double(values.shape()[0]);
  return {sum, count};
}

/// y_pred must be a float tensor of rank >= 1 (the accuracies compare its argmax or threshold).
void check_prediction(const Tensor& y_true, const Tensor& y_pred, std::string_view fn) {
  check(y_true.defined() && y_pred.defined(), "{}: y_true or y_pred is undefined", fn);
  check(is_floating(y_pred.dtype()), "{}: y_pred must be float32 or float64, got {} of shape {}", fn, y_pred.dtype(),
        y_pred.shape());
  check(y_pred.ndim() >= 1, "{}: y_pred must have rank >= 1, got a scalar", fn);
}

/// Keras's in_top_k on y_pred's rows: 1 where row r's score at targets[r] is among its k highest (its rank, 1
/// + the number of scores strictly above it, is at most k; a NaN there ranks last), in y_pred's dtype, shaped
/// `shape`. The targets are valid class ids, one per row.
Tensor in_top_k(const std::vector<std::int64_t>& targets, const Tensor& y_pred, std::int64_t k, const Shape& shape) {
  const std::vector<double> scores = y_pred.to_vector<double>();
  const auto classes = std::size_t(y_pred.shape().back());
  std::vector<double> hits(targets.size());
  for (std::size_t r = 0; r < targets.size(); ++r) {
    const double* row = scores.data() + r * classes;
    double at = row[std::size_t(targets[r])];
    if (std::isnan(at)) at = -std::numeric_limits<double>::infinity();
    std::int64_t rank = 1;
    for (std::size_t c = 0; c < classes; ++c) rank += row[c] > at ? 1 : 0;
    hits[r] = rank <= k ? 1.0 : 0.0;
  }
  return Tensor::from_vector(hits, shape).to(y_pred.dtype());
}

/// Sparse class ids for y_pred's rows, Keras's way: int64 or whole floats, of y_pred's shape without its last
/// axis or with it of size 1 (squeezed), each in [0, classes).
Tensor sparse_labels(const Tensor& y_true, const Tensor& y_pred, std::string_view fn) {
  Tensor labels = models::detail::squeeze_or_expand_to_same_rank(models::detail::class_ids(y_true, fn), y_pred).first;
  if (labels.ndim() == y_pred.ndim() && labels.shape().back() == 1) labels = ops::squeeze(labels, -1);
  Shape expected = y_pred.shape();
  expected.pop_back();
  check(labels.shape() == expected,
        "{}: y_true must have y_pred's shape without its last (class) axis: got y_true {} and y_pred {} "
        "(expected {})",
        fn, y_true.shape(), y_pred.shape(), expected);
  ops::check_class_labels(labels, y_pred.shape().back(), fn);
  return labels;
}

void check_k(std::int64_t k, std::string_view owner) { check(k >= 1, "{}: k must be >= 1, got {}", owner, k); }

}  // namespace

// ---- per-sample functions --------------------------------------------------------------------------------------

Tensor binary_accuracy(const Tensor& y_true, const Tensor& y_pred, double threshold) {
  check_prediction(y_true, y_pred, "binary_accuracy");
  const auto [t, p] = models::detail::squeeze_or_expand_to_same_rank(y_true, y_pred);
  check(t.shape() == p.shape(), "binary_accuracy: y_true and y_pred must have the same shape, got {} and {}",
        y_true.shape(), y_pred.shape());
  const DType dtype = p.dtype();
  // As Keras: the predicted class (0 or 1) must equal the label exactly, so a soft label never matches.
  const Tensor predicted = ops::cast(ops::greater(p, Tensor::scalar(threshold, dtype)), dtype);
  return ops::cast(ops::equal(ops::cast(t, dtype), predicted), dtype);
}

Tensor categorical_accuracy(const Tensor& y_true, const Tensor& y_pred) {
  check_prediction(y_true, y_pred, "categorical_accuracy");
  const auto [t, p] = models::detail::squeeze_or_expand_to_same_rank(y_true, y_pred);
  check(t.shape() == p.shape(),
        "categorical_accuracy: y_true (one-hot) and y_pred must have the same shape, got {} and {}; for integer "
        "labels use sparse_categorical_accuracy",
        y_true.shape(), y_pred.shape());
  const DType dtype = y_pred.dtype();
  return ops::cast(ops::equal(ops::argmax(ops::cast(t, dtype), -1), ops::argmax(p, -1)), dtype);
}

Tensor sparse_categorical_accuracy(const Tensor& y_true, const Tensor& y_pred) {
  constexpr std::string_view fn = "sparse_categorical_accuracy";
  check_prediction(y_true, y_pred, fn);
  // Labels may keep a class axis of size 1 ([N, 1] for [N, C]), which Keras squeezes.
  const Tensor labels = sparse_labels(y_true, y_pred, fn);
  return ops::cast(ops::equal(labels, ops::argmax(y_pred, -1)), y_pred.dtype());
}

Tensor top_k_categorical_accuracy(const Tensor& y_true, const Tensor& y_pred, std::int64_t k) {
  constexpr std::string_view fn = "top_k_categorical_accuracy";
  check_prediction(y_true, y_pred, fn);
  check_k(k, fn);
  check(y_true.shape() == y_pred.shape() && y_pred.shape().back() > 0,
        "{}: y_true (one-hot) and y_pred must have the same shape with at least one class, got {} and {}; for "
        "integer labels use sparse_top_k_categorical_accuracy",
        fn, y_true.shape(), y_pred.shape());
  const Tensor targets = ops::argmax(ops::cast(y_true, y_pred.dtype()), -1);
  return in_top_k(targets.to_vector<std::int64_t>(), y_pred, k, targets.shape());
}

Tensor sparse_top_k_categorical_accuracy(const Tensor& y_true, const Tensor& y_pred, std::int64_t k) {
  constexpr std::string_view fn = "sparse_top_k_categorical_accuracy";
  check_prediction(y_true, y_pred, fn);
  check_k(k, fn);
  const Tensor labels = sparse_labels(y_true, y_pred, fn);
  return in_top_k(labels.to_vector<std::int64_t>(), y_pred, k, labels.shape());
}

// ---- stateful metrics ----------------------------------------------------------------------------------------

MeanMetricWrapper::MeanMetricWrapper(MetricFunction fn, std::string name, std::string direction)
    : Metric(std::move(name)), fn_(std::move(fn)), direction_(std::move(direction)) {
  check(static_cast<bool>(fn_), "MeanMetricWrapper '{}': the metric function is empty", this->name());
}

void MeanMetricWrapper::update_state(const Tensor& y_true, const Tensor& y_pred) {
  update_state(y_true, y_pred, Tensor());
}

void MeanMetricWrapper::update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) {
  NoGradGuard no_grad;  // a metric never takes part in a gradient
  Tensor values;
  try {
    values = fn_(y_true, y_pred);
  } catch (const Error& e) {
    // The function names itself; the metric's name tells which compiled metric it was ("accuracy", "mae").
    throw Error(fmt::format("metric '{}': {}", name(), e.what()));
  }
  const Tensor weight = losses::apply_mask(sample_weight, y_pred.keras_mask(), DType::f64, "sum");
  const auto [sum, count] = samplewise_sum(values, weight, true, fmt::format("metric '{}'", name()));
  accumulate(sum, count);
}

MeanSquaredError::MeanSquaredError(std::string name)
    : MeanMetricWrapper(losses::mean_squared_error, std::move(name), "down") {}

MeanAbsoluteError::MeanAbsoluteError(std::string name)
    : MeanMetricWrapper(losses::mean_absolute_error, std::move(name), "down") {}

BinaryAccuracy::BinaryAccuracy(BinaryAccuracyOptions options)
    : MeanMetricWrapper([threshold = options.threshold](
                            const Tensor& t, const Tensor& p) { return binary_accuracy(t, p, threshold); },
                        std::move(options.name), "up"),
      threshold_(options.threshold) {}

CategoricalAccuracy::CategoricalAccuracy(std::string name)
    : MeanMetricWrapper(categorical_accuracy, std::move(name), "up") {}

SparseCategoricalAccuracy::SparseCategoricalAccuracy(std::string name)
    : MeanMetricWrapper(sparse_categorical_accuracy, std::move(name), "up") {}

RootMeanSquaredError::RootMeanSquaredError(std::string name)
    : MeanMetricWrapper(
          [](const Tensor& y_true, const Tensor& y_pred) {
            constexpr std::string_view fn = "root_mean_squared_error";
            check(y_true.defined() && y_pred.defined(), "{}: y_true or y_pred is undefined", fn);
            check(is_floating(y_pred.dtype()), "{}: y_pred must be float32 or float64, got {} of shape {}", fn,
                  y_pred.dtype(), y_pred.shape());
            const auto [t, p] = models::detail::squeeze_or_expand_to_same_rank(y_true, y_pred);
            check(t.shape() == p.shape(), "{}: y_true and y_pred must have the same shape, got {} and {}", fn,
                  y_true.shape(), y_pred.shape());
            return ops::square(p - ops::cast(t, p.dtype()));
          },
          std::move(name), "down") {}

void RootMeanSquaredError::update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) {
  // Keras's RootMeanSquaredError is a Mean of the squared errors: y_pred's mask does not weigh them.
  MeanMetricWrapper::update_state(y_true, y_pred.defined() ? y_pred.with_keras_mask(Tensor()) : y_pred,
                                  sample_weight);
}

double RootMeanSquaredError::result() const { return std::sqrt(MeanMetricWrapper::result()); }

TopKCategoricalAccuracy::TopKCategoricalAccuracy(TopKCategoricalAccuracyOptions options)
    : MeanMetricWrapper(
          [k = options.k](const Tensor& t, const Tensor& p) { return top_k_categorical_accuracy(t, p, k); },
          std::move(options.name), "up"),
      k_(options.k) {
  check_k(k_, fmt::format("TopKCategoricalAccuracy '{}'", name()));
}

SparseTopKCategoricalAccuracy::SparseTopKCategoricalAccuracy(SparseTopKCategoricalAccuracyOptions options)
    : MeanMetricWrapper(
          [k = options.k](const Tensor& t, const Tensor& p) { return sparse_top_k_categorical_accuracy(t, p, k); },
          std::move(options.name), "up"),
      k_(options.k) {
  check_k(k_, fmt::format("SparseTopKCategoricalAccuracy '{}'", name()));
}

// ---- Mean ------------------------------------------------------------------------------------------------------

void Mean::update_state(double value, double weight) {
  check(std::isfinite(weight) && weight >= 0.0, "Mean '{}': the weight must be a finite number >= 0, got {}", name_,
        weight);
  total_ += value * weight;
  count_ += weight;
}

void Mean::update_state(const Tensor& values) { update_state(values, Tensor()); }

void Mean::update_state(const Tensor& values, const Tensor& sample_weight) {
  check(values.defined(), "Mean '{}': the values are undefined", name_);
  const auto [sum, count] = samplewise_sum(values, sample_weight, true, fmt::format("Mean '{}'", name_));
  total_ += sum;
  count_ += count;
}

// ---- Sum -------------------------------------------------------------------------------------------------------

void Sum::update_state(const Tensor& values) { update_state(values, Tensor()); }

void Sum::update_state(const Tensor& values, const Tensor& sample_weight) {
  check(values.defined(), "Sum '{}': the values are undefined", name_);
  total_ += samplewise_sum(values, sample_weight, false, fmt::format("Sum '{}'", name_)).first;
}

// ---- get -------------------------------------------------------------------------------------------------------

namespace {

template <class M>
std::shared_ptr<Metric> make(std::string name) {
  return std::make_shared<M>(std::move(name));
}

/// A metric whose options struct carries its name.
template <class M, class Options>
std::shared_ptr<Metric> make_with(std::string name) {
  Options options;
  options.name = std::move(name);
  return std::make_shared<M>(std::move(options));
}

using Maker = std::shared_ptr<Metric> (*)(std::string name);

struct NamedMetric {
  std::string_view name;
  Maker make;
};

// Keras's metric strings (ALL_OBJECTS_DICT): each class name, its snake_case name and the mse/mae aliases.
constexpr std::array<NamedMetric, 42> kMetrics{{
    {"mse", make<MeanSquaredError>},
    {"MSE", make<MeanSquaredError>},
    {"mean_squared_error", make<MeanSquaredError>},
    {"MeanSquaredError", make<MeanSquaredError>},
    {"mae", make<MeanAbsoluteError>},
    {"MAE", make<MeanAbsoluteError>},
    {"mean_absolute_error", make<MeanAbsoluteError>},
    {"MeanAbsoluteError", make<MeanAbsoluteError>},
    {"binary_accuracy", make_with<BinaryAccuracy, BinaryAccuracyOptions>},
    {"BinaryAccuracy", make_with<BinaryAccuracy, BinaryAccuracyOptions>},
    {"categorical_accuracy", make<CategoricalAccuracy>},
    {"CategoricalAccuracy", make<CategoricalAccuracy>},
    {"sparse_categorical_accuracy", make<SparseCategoricalAccuracy>},
    {"SparseCategoricalAccuracy", make<SparseCategoricalAccuracy>},
    {"root_mean_squared_error", make<RootMeanSquaredError>},
    {"RootMeanSquaredError", make<RootMeanSquaredError>},
    {"top_k_categorical_accuracy", make_with<TopKCategoricalAccuracy, TopKCategoricalAccuracyOptions>},
    {"TopKCategoricalAccuracy", make_with<TopKCategoricalAccuracy, TopKCategoricalAccuracyOptions>},
    {"sparse_top_k_categorical_accuracy",
     make_with<SparseTopKCategoricalAccuracy, SparseTopKCategoricalAccuracyOptions>},
    {"SparseTopKCategoricalAccuracy", make_with<SparseTopKCategoricalAccuracy, SparseTopKCategoricalAccuracyOptions>},
    {"auc", make_with<AUC, AUCOptions>},
    {"AUC", make_with<AUC, AUCOptions>},
    {"precision", make_with<Precision, PrecisionOptions>},
    {"Precision", make_with<Precision, PrecisionOptions>},
    {"recall", make_with<Recall, RecallOptions>},
    {"Recall", make_with<Recall, RecallOptions>},
    {"true_positives", make_with<TruePositives, TruePositivesOptions>},
    {"TruePositives", make_with<TruePositives, TruePositivesOptions>},
    {"false_positives", make_with<FalsePositives, FalsePositivesOptions>},
    {"FalsePositives", make_with<FalsePositives, FalsePositivesOptions>},
    {"true_negatives", make_with<TrueNegatives, TrueNegativesOptions>},
    {"TrueNegatives", make_with<TrueNegatives, TrueNegativesOptions>},
    {"false_negatives", make_with<FalseNegatives, FalseNegativesOptions>},
    {"FalseNegatives", make_with<FalseNegatives, FalseNegativesOptions>},
    {"f1_score", make_with<F1Score, F1ScoreOptions>},
    {"F1Score", make_with<F1Score, F1ScoreOptions>},
    {"f_beta_score", make_with<FBetaScore, FBetaScoreOptions>},
    {"FBetaScore", make_with<FBetaScore, FBetaScoreOptions>},
    {"binary_io_u", make_with<BinaryIoU, BinaryIoUOptions>},
    {"BinaryIoU", make_with<BinaryIoU, BinaryIoUOptions>},
    {"accuracy", nullptr},  // chosen by the shapes, below
    {"acc", nullptr},
}};

struct MetricNeedingArguments {
  std::string_view snake_case;
  std::string_view class_name;
  std::string_view arguments;
};

// Keras's strings for classes that cannot be built without arguments (Keras fails on them in compile too).
constexpr std::array<MetricNeedingArguments, 8> kNeedArguments{{
    {"precision_at_recall", "PrecisionAtRecall", "recall"},
    {"recall_at_precision", "RecallAtPrecision", "precision"},
    {"sensitivity_at_specificity", "SensitivityAtSpecificity", "specificity"},
    {"specificity_at_sensitivity", "SpecificityAtSensitivity", "sensitivity"},
    {"io_u", "IoU", "num_classes and target_class_ids"},
    {"mean_io_u", "MeanIoU", "num_classes"},
    {"one_hot_io_u", "OneHotIoU", "num_classes and target_class_ids"},
    {"one_hot_mean_io_u", "OneHotMeanIoU", "num_classes"},
}};

bool is_accuracy(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
  return lower == "accuracy" || lower == "acc";
}

}  // namespace

std::shared_ptr<Metric> get(std::string_view name, const Shape& y_true_shape, const Shape& y_pred_shape) {
  const std::string given(name);
  if (is_accuracy(name)) {
    check(!y_true_shape.empty() && !y_pred_shape.empty(),
          "metrics::get: '{}' chooses binary, sparse or categorical accuracy from the shapes, which needs y_true "
          "and y_pred of rank >= 1; got {} and {}",
          given, y_true_shape, y_pred_shape);
    // Keras's rule (compile_utils.is_binary_or_sparse_categorical): one output unit is binary; labels without
    // the class axis, or with it of size 1 against several classes, are sparse; anything else categorical.
    if (y_pred_shape.back() == 1) return make_with<BinaryAccuracy, BinaryAccuracyOptions>(given);
    if (y_true_shape.size() < y_pred_shape.size() || (y_true_shape.back() == 1 && y_pred_shape.back() > 1))
      return make<SparseCategoricalAccuracy>(given);
    return make<CategoricalAccuracy>(given);
  }
  for (const NamedMetric& m : kMetrics)
    if (m.name == name && m.make != nullptr) return m.make(given);
  for (const MetricNeedingArguments& m : kNeedArguments)
    check(name != m.snake_case && name != m.class_name,
          "metrics::get: '{}' is Keras's {}, which needs {}: construct metrics::{}(...) and pass the object", given,
          m.class_name, m.arguments, m.class_name);
  std::vector<std::string_view> known;
  for (const NamedMetric& m : kMetrics) known.push_back(m.name);
  throw Error(fmt::format("metrics::get: unknown metric '{}'; known: {} ('accuracy' and 'acc', in any case, choose "
                          "by the shapes of y_true and y_pred)",
                          given, fmt::join(known, ", ")));
}

}  // namespace loom::layers::metrics
