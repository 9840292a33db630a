#pragma once
// Keras's metrics, with its stateful protocol (models/metric.hpp): update_state() accumulates over batches,
// result() reads the value so far, reset_state() starts over (fit resets them at each epoch). Values
// accumulate in double, weighted by sample count (and sample_weight), so an epoch's result equals the metric
// over all its samples. This header gives every metric: the mean-type ones here (accuracies, errors, Mean,
// Sum), the confusion metrics (Precision, Recall, AUC, ...), the F-scores and the IoU family.
//
//   L::metrics::SparseCategoricalAccuracy acc;
//   acc.update_state(labels, logits);   acc.result();   acc.reset_state();
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "framework/tensor/tensor.hpp"
#include "models/confusion_metrics.hpp"
#include "models/f_score_metrics.hpp"
#include "models/iou_metrics.hpp"
#include "models/metric.hpp"

namespace loom::layers::metrics {

/// A metric by Keras string, resolved for these shapes of y_true and y_pred: "accuracy"/"acc" (and
/// "crossentropy"-style auto-selection) picks binary, sparse categorical or categorical accuracy by Keras's
/// rule; "mae", "mse", "mean_absolute_error", "mean_squared_error", "binary_accuracy",
/// "categorical_accuracy", "sparse_categorical_accuracy", "root_mean_squared_error", "top_k_categorical_accuracy",
/// "sparse_top_k_categorical_accuracy" (k = 5) and the class names. The metric is named by the string given.
std::shared_ptr<Metric> get(std::string_view name, const Shape& y_true_shape, const Shape& y_pred_shape);

// ---- Keras's metrics ----------------------------------------------------------------------------------------

/// Per-sample values of a metric from (y_true, y_pred): shape [N] or [N, ...], one row per sample.
using MetricFunction = std::function<Tensor(const Tensor& y_true, const Tensor& y_pred)>;

/// Keras's MeanMetricWrapper: the mean over all samples seen of `fn(y_true, y_pred)`. A sample's value is the
/// mean of its row (values of shape [N, T] count N samples, each averaged over T), so batches of different
/// sizes and lengths weigh by their number of samples, as in Keras. Computes without recording on any tape.
/// `direction` is Keras's: "up", "down" or empty (unknown).
class MeanMetricWrapper : public Metric {
 public:
  MeanMetricWrapper(MetricFunction fn, std::string name, std::string direction = {});
  void update_state(const Tensor& y_true, const Tensor& y_pred) override;
  /// As Keras: the weights times y_pred's Keras mask (when it has one); each sample's value is the mean of
  /// value * weight over its other axes and counts for the mean of its weights, so the result is the
  /// weighted mean.
  void update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) override;
  std::string direction() const override { return direction_; }

 private:
  MetricFunction fn_;
  std::string direction_;
};

class MeanSquaredError : public MeanMetricWrapper {
 public:
  explicit MeanSquaredError(std::string name = "mean_squared_error");
};

class MeanAbsoluteError : public MeanMetricWrapper {
 public:
  explicit MeanAbsoluteError(std::string name = "mean_absolute_error");
};

struct BinaryAccuracyOptions {
  std::string name = "binary_accuracy";
  /// y_pred above it counts as 1, at or below it as 0.
  double threshold = 0.5;
};

/// The fraction of y_pred > threshold that equal y_true (0 or 1), per element; [N] labels pair with [N, 1]
/// predictions.
class BinaryAccuracy : public MeanMetricWrapper {
 public:
  explicit BinaryAccuracy(BinaryAccuracyOptions options = {});
  double threshold() const { return threshold_; }

 private:
  double threshold_;
};

/// One-hot (or soft) y_true against y_pred of the same shape: does the argmax agree (first maximum on ties)?
class CategoricalAccuracy : public MeanMetricWrapper {
 public:
  explicit CategoricalAccuracy(std::string name = "categorical_accuracy");
};

/// int64 class ids y_true of y_pred's shape without its last axis (or with it of size 1): is the id y_pred's
/// argmax? Ids outside [0, classes) are an error.
class SparseCategoricalAccuracy : public MeanMetricWrapper {
 public:
  explicit SparseCategoricalAccuracy(std::string name = "sparse_categorical_accuracy");
};

/// Keras's RootMeanSquaredError: the square root of the mean over samples of each sample's mean squared error
/// (y_true and y_pred of the same shape after squeeze_or_expand_to_same_rank). total() / count() is the mean
/// of squares, result() its root.
class RootMeanSquaredError : public MeanMetricWrapper {
 public:
  explicit RootMeanSquaredError(std::string name = "root_mean_squared_error");
  using MeanMetricWrapper::update_state;
  /// As Keras's (a Mean of the squared errors): y_pred's Keras mask does not weigh them.
  void update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) override;
  double result() const override;
};

struct TopKCategoricalAccuracyOptions {
  /// How many of the highest scores count as a hit; k >= 1.
  std::int64_t k = 5;
  std::string name = "top_k_categorical_accuracy";
};

/// One-hot y_true against y_pred of the same shape: is y_true's argmax among y_pred's k highest scores?
/// As Keras's in_top_k, ties count in: a class ranks 1 + the number of scores strictly above it, so every
/// class tied with the k-th score is a hit; a NaN score at the true class is never one.
class TopKCategoricalAccuracy : public MeanMetricWrapper {
 public:
  explicit TopKCategoricalAccuracy(TopKCategoricalAccuracyOptions options = {});
  std::int64_t k() const { return k_; }

 private:
  std::int64_t k_;
};

struct SparseTopKCategoricalAccuracyOptions {
  /// How many of the highest scores count as a hit; k >= 1.
  std::int64_t k = 5;
  std::string name = "sparse_top_k_categorical_accuracy";
};

/// Class ids y_true (as for SparseCategoricalAccuracy) against scores y_pred: is the id among the k highest
/// scores, with TopKCategoricalAccuracy's tie rule? (Keras's from_sorted_ids is not supported.)
class SparseTopKCategoricalAccuracy : public MeanMetricWrapper {
 public:
  explicit SparseTopKCategoricalAccuracy(SparseTopKCategoricalAccuracyOptions options = {});
  std::int64_t k() const { return k_; }

 private:
  std::int64_t k_;
};

/// The per-sample functions behind the accuracies (keras.metrics.binary_accuracy, ...): 1 where the
/// prediction is right, 0 elsewhere, in y_pred's float dtype, shaped like y_pred without the class axis
/// (binary: like y_pred).
Tensor binary_accuracy(const Tensor& y_true, const Tensor& y_pred, double threshold = 0.5);
Tensor categorical_accuracy(const Tensor& y_true, const Tensor& y_pred);
Tensor sparse_categorical_accuracy(const Tensor& y_true, const Tensor& y_pred);
Tensor top_k_categorical_accuracy(const Tensor& y_true, const Tensor& y_pred, std::int64_t k = 5);
Tensor sparse_top_k_categorical_accuracy(const Tensor& y_true, const Tensor& y_pred, std::int64_t k = 5);

/// Keras's Mean: a weighted running mean of values, such as fit's loss tracker (each batch's loss weighted
/// by its batch size). It is not a Metric: it averages given values rather than comparing y_true with y_pred,
/// so compile does not take it.
class Mean {
 public:
  explicit Mean(std::string name = "mean") : name_(std::move(name)) {}
  const std::string& name() const { return name_; }

  /// One value standing for `weight` samples (weight >= 0).
  void update_state(double value, double weight = 1.0);
  /// Values of weight 1: a scalar is one sample, [N] is N samples, and [N, ...] is N samples each averaged
  /// over its other axes (Keras's Mean).
  void update_state(const Tensor& values);
  /// Keras's Mean.update_state(values, sample_weight): each sample's value is the mean of value * weight over
  /// its other axes and weighs the mean of its weights.
  void update_state(const Tensor& values, const Tensor& sample_weight);
  /// The weighted mean so far; 0 before any update or when every weight was 0, as Keras.
  double result() const { return count_ > 0.0 ? total_ / count_ : 0.0; }
  void reset_state() { total_ = 0.0; count_ = 0.0; }
  /// The running mean's state, result() = total() / count().
  double total() const { return total_; }
  double count() const { return count_; }

 private:
  std::string name_;
  double total_ = 0.0;
  double count_ = 0.0;
};

/// Keras's Sum: the running sum of values, for custom logging. Like Mean it is not a Metric.
class Sum {
 public:
  explicit Sum(std::string name = "sum") : name_(std::move(name)) {}
  const std::string& name() const { return name_; }

  void update_state(double value) { total_ += value; }
  /// Adds every element of `values`, whatever its shape (Keras's Sum).
  void update_state(const Tensor& values);
  /// Adds every element of values * sample_weight (broadcast after the rank rule, as Keras's Sum).
  void update_state(const Tensor& values, const Tensor& sample_weight);
  /// The sum so far; 0 before any update.
  double result() const { return total_; }
  void reset_state() { total_ = 0.0; }

 private:
  std::string name_;
  double total_ = 0.0;
};

}  // namespace loom::layers::metrics
