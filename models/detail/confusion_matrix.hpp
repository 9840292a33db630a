#pragma once
// Keras's metrics_utils.update_confusion_matrix_variables, behind Precision, Recall, AUC, the four counts and
// the sensitivity / specificity metrics: weighted counts of true and false positives and negatives at each
// threshold, where a prediction is positive when it is above the threshold and a label when it is non-zero.
// Not installed.
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "framework/tensor/tensor.hpp"

namespace loom::models::detail {

/// The counts to add to, each of size thresholds (or thresholds x labels, row-major, with multi_label);
/// null ones are not computed.
struct ConfusionMatrixCounts {
  std::vector<double>* true_positives = nullptr;
  std::vector<double>* false_positives = nullptr;
  std::vector<double>* true_negatives = nullptr;
  std::vector<double>* false_negatives = nullptr;
};

struct ConfusionMatrixOptions {
  /// Sorted ascending when thresholds_distributed_evenly.
  std::vector<double> thresholds = {};
  /// Only the k highest predictions of each row count (the others become -1e10), as Keras's _filter_top_k.
  std::optional<std::int64_t> top_k = std::nullopt;
  /// Only this class (last axis) counts.
  std::optional<std::int64_t> class_id = std::nullopt;
  /// Counts per label (the last axis of a [N, labels] y_pred) instead of over every element.
  bool multi_label = false;
  /// Weights of the labels along y_pred's last axis (not with multi_label); empty: none.
  std::vector<double> label_weights = {};
  /// Keras's bucketed algorithm for evenly spaced thresholds (predictions clipped to [0, 1]); a first
  /// threshold below 0 or a last above 1 marks them as the epsilon endpoints that take every prediction.
  bool thresholds_distributed_evenly = false;
};

/// Adds one batch: y_true and y_pred of the same shape after Keras's rank rule; sample_weight (undefined:
/// 1) gains a trailing axis and must then broadcast to y_pred's shape (after the class_id slice). Bad shapes,
/// top_k outside [1, classes] and class_id outside [0, classes) are a loom::Error naming `owner`, and then
/// nothing is added.
void update_confusion_matrix(const ConfusionMatrixCounts& counts, const Tensor& y_true, const Tensor& y_pred,
                             const Tensor& sample_weight, const ConfusionMatrixOptions& options,
                             std::string_view owner);

/// Keras's is_evenly_distributed_thresholds: at least 3 thresholds, each within 1e-7 + 1e-5 relative of
/// i / (n - 1) computed in float32.
bool is_evenly_distributed_thresholds(const std::vector<double>& thresholds);

}  // namespace loom::models::detail
