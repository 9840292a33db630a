#pragma once
// Keras's F-scores (keras/src/metrics/f_score_metrics.py): FBetaScore and F1Score over y_true and y_pred of
// shape [N, classes] (one-hot or multi-label targets; probabilities or scores). A prediction is positive
// when it is above `threshold`, or without one when it is its row's maximum (and not 0); true / false
// positives and false negatives accumulate per class (one total for average "micro"), weighted by a
// sample_weight of shape [N]. result():
//   average none:       the per-class scores: result() their mean, result_tensor() the vector [classes]
//   average "micro":    one score from the counts summed over classes
//   average "macro":    the mean of the per-class scores
//   average "weighted": the per-class scores weighted by each class's (weighted) number of true labels
// Each division adds Keras's epsilon 1e-7 to its denominator, so a class never seen scores 0. The number of
// classes comes from the first batch (or build()); later batches must have as many. state():
// true_positives, false_positives, false_negatives, intermediate_weights, each [classes] (or one value for
// "micro").
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/metric.hpp"

namespace loom::layers::metrics {

/// Options of FBetaScore, in Keras's order.
struct FBetaScoreOptions {
  /// None, "micro", "macro" or "weighted".
  std::optional<std::string> average = std::nullopt;
  /// > 0: recall weighs beta times as much as precision.
  double beta = 1.0;
  /// In (0, 1]; none: each row's maximum is the positive prediction.
  std::optional<double> threshold = std::nullopt;
  std::string name = "fbeta_score";
};

struct F1ScoreOptions {
  std::optional<std::string> average = std::nullopt;
  std::optional<double> threshold = std::nullopt;
  std::string name = "f1_score";
};

/// (1 + beta²) precision recall / (beta² precision + recall), per class or averaged.
class FBetaScore : public Metric {
 public:
  explicit FBetaScore(FBetaScoreOptions options = {});
  using Metric::update_state;
  void update_state(const Tensor& y_true, const Tensor& y_pred) override;
  void update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) override;
  double result() const override;
  Tensor result_tensor() const override;
  void reset_state() override;
  std::vector<double> state() const override;
  void set_state(const std::vector<double>& state) override;
  void build(const Shape& y_true_shape, const Shape& y_pred_shape) override;
  std::string direction() const override { return "up"; }
  const FBetaScoreOptions& options() const { return options_; }

 protected:
  /// The class that names itself in messages ("FBetaScore", "F1Score").
  FBetaScore(FBetaScoreOptions options, const char* class_name);

 private:
  /// The per-class scores (one for "micro").
  std::vector<double> scores() const;

  FBetaScoreOptions options_;
  const char* class_name_;
  std::int64_t classes_ = 0;  // 0 until built
  std::vector<double> true_positives_, false_positives_, false_negatives_, intermediate_weights_;
};

/// FBetaScore with beta = 1: the harmonic mean of precision and recall.
class F1Score : public FBetaScore {
 public:
  explicit F1Score(F1ScoreOptions options = {});
};

}  // namespace loom::layers::metrics
