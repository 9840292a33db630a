#pragma once
// Keras's confusion metrics (keras/src/metrics/confusion_metrics.py): weighted counts of true / false positives
// and negatives at one or more thresholds, and the metrics made of them: TruePositives, FalsePositives,
// TrueNegatives, FalseNegatives, Precision, Recall, SensitivityAtSpecificity, SpecificityAtSensitivity,
// PrecisionAtRecall, RecallAtPrecision and AUC.
//
// A prediction counts as positive when it is above the threshold; a label when it is non-zero. y_true and
// y_pred have the same shape (after Keras's rank rule: [N] labels pair with [N, 1] predictions), and every
// element is one decision unless class_id or multi_label says otherwise. sample_weight gains a trailing axis
// and must then broadcast to y_pred's shape, as in Keras: [N] weighs the rows of [N, C] (or [N, 1]), [N, C]
// each element, a scalar everything. Counts accumulate in double whatever the input's dtype, as Keras with
// dtype="float64". Where Keras's result() is a vector (several thresholds), result() is its mean and
// result_tensor() the vector. state() lists Keras's variables in Keras's order (see each class).
//
//   M::Precision precision({.thresholds = {0.3, 0.5, 0.7}});
//   precision.update_state(labels, probabilities, weights);
//   Tensor per_threshold = precision.result_tensor();   // [3]
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/metric.hpp"

namespace loom::layers::metrics {

// ---- the four counts ------------------------------------------------------------------------------------------

/// Keras's _ConfusionMatrixConditionCount: one count per threshold (default 0.5; each in [0, 1]). result() is
/// the count for one threshold; state() is Keras's accumulator, one value per threshold.
class ConfusionMatrixConditionCount : public Metric {
 public:
  using Metric::update_state;
  void update_state(const Tensor& y_true, const Tensor& y_pred) override;
  void update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) override;
  double result() const override;
  Tensor result_tensor() const override;
  void reset_state() override;
  std::vector<double> state() const override { return accumulator_; }
  void set_state(const std::vector<double>& state) override;
  /// The thresholds as given (empty: Keras's None, the default 0.5), for saving.
  const std::vector<double>& given_thresholds() const { return given_thresholds_; }
  /// The thresholds used.
  const std::vector<double>& thresholds() const { return thresholds_; }

 protected:
  enum class Condition { true_positives, false_positives, true_negatives, false_negatives };
  ConfusionMatrixConditionCount(Condition condition, std::vector<double> thresholds, std::string name,
                                const char* class_name);

 private:
  Condition condition_;
  const char* class_name_;
  std::vector<double> given_thresholds_;
  std::vector<double> thresholds_;
  bool thresholds_distributed_evenly_;
  std::vector<double> accumulator_;
};

struct TruePositivesOptions {
  /// Empty: 0.5.
  std::vector<double> thresholds = {};
  std::string name = "true_positives";
};
struct FalsePositivesOptions {
  std::vector<double> thresholds = {};
  std::string name = "false_positives";
};
struct TrueNegativesOptions {
  std::vector<double> thresholds = {};
  std::string name = "true_negatives";
};
struct FalseNegativesOptions {
  std::vector<double> thresholds = {};
  std::string name = "false_negatives";
};

class TruePositives : public ConfusionMatrixConditionCount {
 public:
  explicit TruePositives(TruePositivesOptions options = {});
};
class FalsePositives : public ConfusionMatrixConditionCount {
 public:
  explicit FalsePositives(FalsePositivesOptions options = {});
};
class TrueNegatives : public ConfusionMatrixConditionCount {
 public:
  explicit TrueNegatives(TrueNegativesOptions options = {});
};
class FalseNegatives : public ConfusionMatrixConditionCount {
 public:
  explicit FalseNegatives(FalseNegativesOptions options = {});
};

// ---- Precision and Recall -------------------------------------------------------------------------------------

/// Options of Precision and Recall, in Keras's order.
struct PrecisionOptions {
  /// Each in [0, 1]; empty: 0.5, or with top_k no threshold (every prediction among the k highest counts).
  std::vector<double> thresholds = {};
  /// Only the k highest predictions of each row can be positive (k in [1, classes]).
  std::optional<std::int64_t> top_k = std::nullopt;
  /// Only this class (y_pred's last axis) counts; in [0, classes).
  std::optional<std::int64_t> class_id = std::nullopt;
  std::string name = "precision";
};
struct RecallOptions {
  std::vector<double> thresholds = {};
  std::optional<std::int64_t> top_k = std::nullopt;
  std::optional<std::int64_t> class_id = std::nullopt;
  std::string name = "recall";
};

/// Precision and Recall: tp / (tp + other) at each threshold (0 where the denominator is), `other` being the
/// false positives (Precision) or the false negatives (Recall). state(): true_positives, then the other
/// count, one per threshold.
class PrecisionRecallBase : public Metric {
 public:
  using Metric::update_state;
  void update_state(const Tensor& y_true, const Tensor& y_pred) override;
  void update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) override;
  double result() const override;
  Tensor result_tensor() const override;
  void reset_state() override;
  std::vector<double> state() const override;
  void set_state(const std::vector<double>& state) override;
  std::string direction() const override { return "up"; }
  /// The thresholds used (Keras's NEG_INF, -1e10, for top_k without thresholds).
  const std::vector<double>& thresholds() const { return thresholds_; }

 protected:
  enum class Other { false_positives, false_negatives };
  PrecisionRecallBase(Other other, const std::vector<double>& thresholds, std::optional<std::int64_t> top_k,
                      std::optional<std::int64_t> class_id, std::string name, const char* class_name);

 private:
  Other other_;
  const char* class_name_;
  std::optional<std::int64_t> top_k_, class_id_;
  std::vector<double> thresholds_;
  bool thresholds_distributed_evenly_;
  std::vector<double> true_positives_, other_count_;
};

/// tp / (tp + fp): of the predicted positives, how many are.
class Precision : public PrecisionRecallBase {
 public:
  explicit Precision(PrecisionOptions options = {});
  const PrecisionOptions& options() const { return options_; }

 private:
  PrecisionOptions options_;
};

/// tp / (tp + fn): of the positives, how many were predicted.
class Recall : public PrecisionRecallBase {
 public:
  explicit Recall(RecallOptions options = {});
  const RecallOptions& options() const { return options_; }

 private:
  RecallOptions options_;
};

// ---- one rate at a constraint on another ----------------------------------------------------------------------

/// Keras's SensitivitySpecificityBase: all four counts at num_thresholds thresholds, 0, (i + 1) / (n - 1), ...,
/// 1 (one threshold: 0.5), and result() the largest of one rate among the thresholds where the other meets the
/// constraint (0 when none does). state(): true_positives, false_positives, true_negatives, false_negatives.
class SensitivitySpecificityBase : public Metric {
 public:
  using Metric::update_state;
  void update_state(const Tensor& y_true, const Tensor& y_pred) override;
  void update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) override;
  void reset_state() override;
  std::vector<double> state() const override;
  void set_state(const std::vector<double>& state) override;
  std::string direction() const override { return "up"; }
  /// The constraint's value (the specificity of SensitivityAtSpecificity, ...).
  double value() const { return value_; }
  std::int64_t num_thresholds() const { return std::int64_t(thresholds_.size()); }
  std::optional<std::int64_t> class_id() const { return class_id_; }
  const std::vector<double>& thresholds() const { return thresholds_; }

 protected:
  SensitivitySpecificityBase(double value, const char* value_name, std::int64_t num_thresholds,
                             std::optional<std::int64_t> class_id, std::string name, const char* class_name);
  /// The largest `dependent` where `constrained` >= value(), or 0.
  double max_under_constraint(const std::vector<double>& constrained, const std::vector<double>& dependent) const;
  std::vector<double> sensitivities() const;   // tp / (tp + fn): recall
  std::vector<double> specificities() const;   // tn / (tn + fp)
  std::vector<double> precisions() const;      // tp / (tp + fp)

 private:
  double value_;
  std::optional<std::int64_t> class_id_;
  const char* class_name_;
  std::vector<double> thresholds_;
  bool thresholds_distributed_evenly_;
  std::vector<double> true_positives_, false_positives_, true_negatives_, false_negatives_;
};

struct SensitivityAtSpecificityOptions {
  /// >= 1.
  std::int64_t num_thresholds = 200;
  std::optional<std::int64_t> class_id = std::nullopt;
  std::string name = "sensitivity_at_specificity";
};
struct SpecificityAtSensitivityOptions {
  std::int64_t num_thresholds = 200;
  std::optional<std::int64_t> class_id = std::nullopt;
  std::string name = "specificity_at_sensitivity";
};
struct PrecisionAtRecallOptions {
  std::int64_t num_thresholds = 200;
  std::optional<std::int64_t> class_id = std::nullopt;
  std::string name = "precision_at_recall";
};
struct RecallAtPrecisionOptions {
  std::int64_t num_thresholds = 200;
  std::optional<std::int64_t> class_id = std::nullopt;
  std::string name = "recall_at_precision";
};

/// The best sensitivity (recall) among the thresholds whose specificity is >= `specificity` (in [0, 1]).
class SensitivityAtSpecificity : public SensitivitySpecificityBase {
 public:
  explicit SensitivityAtSpecificity(double specificity, SensitivityAtSpecificityOptions options = {});
  double result() const override;
};
/// The best specificity among the thresholds whose sensitivity is >= `sensitivity`.
class SpecificityAtSensitivity : public SensitivitySpecificityBase {
 public:
  explicit SpecificityAtSensitivity(double sensitivity, SpecificityAtSensitivityOptions options = {});
  double result() const override;
};
/// The best precision among the thresholds whose recall is >= `recall`.
class PrecisionAtRecall : public SensitivitySpecificityBase {
 public:
  explicit PrecisionAtRecall(double recall, PrecisionAtRecallOptions options = {});
  double result() const override;
};
/// The best recall among the thresholds whose precision is >= `precision`.
class RecallAtPrecision : public SensitivitySpecificityBase {
 public:
  explicit RecallAtPrecision(double precision, RecallAtPrecisionOptions options = {});
  double result() const override;
};

// ---- AUC ------------------------------------------------------------------------------------------------------

/// Options of AUC, in Keras's order.
struct AUCOptions {
  /// Thresholds 0 - 1e-7, (i + 1) / (n - 1) for i < n - 2, 1 + 1e-7; > 1. Ignored when `thresholds` is given.
  std::int64_t num_thresholds = 200;
  /// "ROC" (true positive rate against false positive rate), "PR" (precision against recall) or "PRGAIN";
  /// Keras's lower-case spellings too.
  std::string curve = "ROC";
  /// "interpolation" (trapezoids for ROC; Davis & Goadrich's interpolation for PR), "minoring" or "majoring".
  std::string summation_method = "interpolation";
  std::string name = "auc";
  /// Thresholds in [0, 1] (sorted, between the two epsilon endpoints) instead of num_thresholds evenly.
  std::vector<double> thresholds = {};
  /// y_pred [N, labels]: one curve per label, their AUCs averaged (weighted by label_weights when given).
  bool multi_label = false;
  /// With multi_label, the number of labels, so the state exists before the first batch.
  std::optional<std::int64_t> num_labels = std::nullopt;
  /// One non-negative weight per label (y_pred's last axis): weighs the elements' counts, or with multi_label
  /// the labels' AUCs.
  std::vector<double> label_weights = {};
  /// Predictions are logits: the sigmoid is applied first.
  bool from_logits = false;
};

/// Keras's AUC: the area under the ROC or PR curve from the four counts at each threshold, by Keras's
/// Riemann sums. state(): true_positives, false_positives, true_negatives, false_negatives, each
/// [num_thresholds] (or [num_thresholds, labels] with multi_label, row-major).
class AUC : public Metric {
 public:
  explicit AUC(AUCOptions options = {});
  using Metric::update_state;
  void update_state(const Tensor& y_true, const Tensor& y_pred) override;
  void update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) override;
  double result() const override;
  void reset_state() override;
  std::vector<double> state() const override;
  void set_state(const std::vector<double>& state) override;
  void build(const Shape& y_true_shape, const Shape& y_pred_shape) override;
  std::string direction() const override { return "up"; }
  const AUCOptions& options() const { return options_; }
  /// The number of thresholds, the endpoints included (given thresholds + 2).
  std::int64_t num_thresholds() const { return std::int64_t(thresholds_.size()); }
  /// Every threshold, the epsilon endpoints included (Keras's AUC.thresholds).
  const std::vector<double>& thresholds() const { return thresholds_; }

 private:
  enum class Curve { roc, pr, prgain };
  enum class Summation { interpolation, minoring, majoring };
  void build_labels(std::int64_t labels);
  double interpolate_pr_auc() const;
  /// The labels' AUCs averaged (multi_label), or the one AUC.
  double average_over_labels(const std::vector<double>& terms) const;

  AUCOptions options_;
  Curve curve_;
  Summation summation_;
  std::vector<double> thresholds_;
  bool thresholds_distributed_evenly_;
  std::int64_t labels_ = 0;  // 1 without multi_label; 0 until built
  std::vector<double> true_positives_, false_positives_, true_negatives_, false_negatives_;
};

}  // namespace loom::layers::metrics
