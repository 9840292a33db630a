#pragma once
// The base of every metric, with Keras's stateful protocol: update_state() accumulates a batch, result()
// reads the value over everything since the last reset_state(). The metrics themselves are in
// models/metrics.hpp (one include gives them all).
//
// A metric of one's own derives from Metric, adds `using Metric::update_state;` (so that the other form stays
// visible) and implements update_state(y_true, y_pred); one that takes sample weights also overrides
// update_state(y_true, y_pred, sample_weight). Its state lives where it likes; the base keeps a running
// (total, count) for mean-type metrics.
#include <string>
#include <vector>

#include "framework/tensor/tensor.hpp"

namespace loom::layers::metrics {

class Metric {
 public:
  virtual ~Metric() = default;
  /// The key in fit's logs ("accuracy", "mae", "loss").
  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  /// Accumulates one batch, each sample weighing 1. Shapes follow the matching loss (loom::losses); a
  /// mismatch is a loom::Error naming the metric and both shapes.
  virtual void update_state(const Tensor& y_true, const Tensor& y_pred) = 0;
  /// Keras's update_state(y_true, y_pred, sample_weight): each sample (or element) weighs its weight, which
  /// broadcasts by the metric's Keras rule; an undefined weight is weight 1. Every loom metric takes
  /// weights; the base (for a metric of one's own that overrides only the two-argument form) forwards an
  /// undefined weight and refuses a defined one.
  virtual void update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight);

  /// The value over everything since the last reset (0 before any update, as Keras): total() / count()
  /// unless the metric says otherwise. Where Keras's result() is a vector (several thresholds, F1Score's
  /// average None), this is its mean, the number Keras's progress bar shows; result_tensor() has the vector.
  virtual double result() const { return count_ > 0.0 ? total_ / count_ : 0.0; }
  /// Keras's result() as a float64 tensor: a scalar, or the vector where Keras returns one.
  virtual Tensor result_tensor() const { return Tensor::scalar(result(), DType::f64); }
  /// Zeroes the state (fit resets every metric at the start of each epoch, evaluate at its start).
  virtual void reset_state() { total_ = 0.0; count_ = 0.0; }

  /// The state as a flat vector of doubles that sums across processes: the state of the union of the data
  /// two metrics saw is the elementwise sum of their states, so a data-parallel run allreduces state() and
  /// reads result() after set_state() of the sum. Mean-type metrics give {total, count}; the others list
  /// their Keras variables in Keras's order, each flattened row-major (Precision: true_positives then
  /// false_positives, one per threshold). A metric whose shape comes from its first batch (AUC with
  /// multi_label and no num_labels, F1Score, FBetaScore) gives an empty vector until then; build() fixes it.
  virtual std::vector<double> state() const { return {total_, count_}; }
  /// Replaces the state with one state() gave (of a metric with the same options); a vector of another
  /// length is a loom::Error naming the metric and both lengths.
  virtual void set_state(const std::vector<double>& state);
  /// Creates the state a batch of these shapes needs, as the first update_state() would (a no-op for most
  /// metrics); shapes that the metric refuses are a loom::Error.
  virtual void build(const Shape& y_true_shape, const Shape& y_pred_shape);

  /// Keras's metric direction: "up" for metrics to maximize (accuracies, AUC, precision), "down" for those
  /// to minimize (errors, crossentropies), empty when unknown (a metric of one's own).
  virtual std::string direction() const { return {}; }

  /// The running mean's state, result() = total() / count(), for mean-type metrics; 0 for the others.
  double total() const { return total_; }
  double count() const { return count_; }

 protected:
  explicit Metric(std::string name) : name_(std::move(name)) {}
  /// Adds `sum` over `count` samples to the running mean.
  void accumulate(double sum, double count) { total_ += sum; count_ += count; }

 private:
  std::string name_;
  double total_ = 0.0;
  double count_ = 0.0;
};

}  // namespace loom::layers::metrics
