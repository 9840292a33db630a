#pragma once
// Keras's intersection-over-union metrics (keras/src/metrics/iou_metrics.py): IoU, MeanIoU, BinaryIoU,
// OneHotIoU and OneHotMeanIoU, for semantic segmentation and classification. Each batch adds to a
// [num_classes, num_classes] confusion matrix (rows: true class, columns: predicted class) with every element
// of y_true and y_pred flattened; a class's IoU is tp / (tp + fp + fn), and result() the mean over the
// target classes that occur (true or predicted), with Keras's epsilon 1e-7 in both divisions.
//
// Class ids are int64 or whole numbers in a float tensor; ids outside [0, num_classes), and elements whose
// true class is ignore_class, do not count (as Keras's bounds mask). With sparse_y_true (sparse_y_pred) false
// the ids are the argmax over `axis` of one-hot or score tensors. sample_weight weighs each element: a
// scalar, or as many weights as elements (any shape, flattened). The matrix accumulates in double, as Keras
// with dtype="float64" (Keras's default dtype is int, which truncates fractional weights). state() is the
// matrix, row-major.
//
//   M::MeanIoU miou(3, {.ignore_class = 0});
//   miou.update_state(labels, predicted_labels);   // any shapes with as many elements
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/metric.hpp"

namespace loom::layers::metrics {

/// Options of IoU after num_classes and target_class_ids, in Keras's order.
struct IoUOptions {
  std::string name = "io_u";
  std::optional<std::int64_t> ignore_class = std::nullopt;
  /// y_true holds class ids (true) or one-hot / scores along `axis` (false).
  bool sparse_y_true = true;
  /// y_pred holds class ids (true) or scores along `axis` (false).
  bool sparse_y_pred = true;
  std::int64_t axis = -1;
};

struct MeanIoUOptions {
  std::string name = "mean_io_u";
  std::optional<std::int64_t> ignore_class = std::nullopt;
  bool sparse_y_true = true;
  bool sparse_y_pred = true;
  std::int64_t axis = -1;
};

struct BinaryIoUOptions {
  /// Which of the classes 0 and 1 to average over.
  std::vector<std::int64_t> target_class_ids = {0, 1};
  /// y_pred >= threshold is class 1 (compared in float32, as Keras).
  double threshold = 0.5;
  std::string name = "binary_io_u";
};

struct OneHotIoUOptions {
  std::string name = "one_hot_io_u";
  std::optional<std::int64_t> ignore_class = std::nullopt;
  bool sparse_y_pred = false;
  std::int64_t axis = -1;
};

struct OneHotMeanIoUOptions {
  std::string name = "one_hot_mean_io_u";
  std::optional<std::int64_t> ignore_class = std::nullopt;
  bool sparse_y_pred = false;
  std::int64_t axis = -1;
};

/// The mean IoU over target_class_ids (each in [0, num_classes)).
class IoU : public Metric {
 public:
  IoU(std::int64_t num_classes, std::vector<std::int64_t> target_class_ids, IoUOptions options = {});
  using Metric::update_state;
  void update_state(const Tensor& y_true, const Tensor& y_pred) override;
  void update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) override;
  double result() const override;
  void reset_state() override;
  std::vector<double> state() const override { return total_cm_; }
  void set_state(const std::vector<double>& state) override;
  std::string direction() const override { return "up"; }

  std::int64_t num_classes() const { return num_classes_; }
  const std::vector<std::int64_t>& target_class_ids() const { return target_class_ids_; }
  const IoUOptions& options() const { return options_; }
  /// Keras's total_confusion_matrix, [num_classes, num_classes] row-major.
  const std::vector<double>& total_confusion_matrix() const { return total_cm_; }

 protected:
  IoU(std::int64_t num_classes, std::vector<std::int64_t> target_class_ids, IoUOptions options,
      const char* class_name);
  /// The class named in messages.
  const char* class_name() const { return class_name_; }

 private:
  std::int64_t num_classes_;
  std::vector<std::int64_t> target_class_ids_;
  IoUOptions options_;
  const char* class_name_;
  std::vector<double> total_cm_;
};

/// IoU averaged over every class.
class MeanIoU : public IoU {
 public:
  explicit MeanIoU(std::int64_t num_classes, MeanIoUOptions options = {});
};

/// IoU of two classes from probabilities: y_pred >= threshold is class 1, y_true holds 0 and 1.
class BinaryIoU : public IoU {
 public:
  explicit BinaryIoU(BinaryIoUOptions options = {});
  using IoU::update_state;
  void update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) override;
  double threshold() const { return threshold_; }

 private:
  double threshold_;
};

/// IoU with one-hot y_true.
class OneHotIoU : public IoU {
 public:
  OneHotIoU(std::int64_t num_classes, std::vector<std::int64_t> target_class_ids, OneHotIoUOptions options = {});
};

/// MeanIoU with one-hot y_true.
class OneHotMeanIoU : public IoU {
 public:
  explicit OneHotMeanIoU(std::int64_t num_classes, OneHotMeanIoUOptions options = {});
};

}  // namespace loom::layers::metrics
