#include "models/f_score_metrics.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <utility>

#include "framework/autograd/tape.hpp"

namespace loom::layers::metrics {

namespace {

/// Keras's backend.epsilon(), added to every denominator.
constexpr double kEpsilon = 1e-7;

/// A prediction at its row's maximum counts only when it is not (about) 0, so a row of zeros has none.
constexpr double kZeroPrediction = 1e-9;

FBetaScoreOptions fbeta_options(F1ScoreOptions options) {
  return {.average = std::move(options.average), .beta = 1.0, .threshold = options.threshold,
          .name = std::move(options.name)};
}

}  // namespace

FBetaScore::FBetaScore(FBetaScoreOptions options) : FBetaScore(std::move(options), "FBetaScore") {}

FBetaScore::FBetaScore(FBetaScoreOptions options, const char* class_name)
    : Metric(options.name), options_(std::move(options)), class_name_(class_name) {
  const std::string owner = fmt::format("{} '{}'", class_name_, name());
  const auto& average = options_.average;
  check(!average || *average == "micro" || *average == "macro" || *average == "weighted",
        "{}: average must be none, \"micro\", \"macro\" or \"weighted\", got '{}'", owner, average.value_or(""));
  check(std::isfinite(options_.beta) && options_.beta > 0.0, "{}: beta must be > 0, got {}", owner, options_.beta);
  check(!options_.threshold || (*options_.threshold > 0.0 && *options_.threshold <= 1.0),
        "{}: threshold must be in (0, 1], got {}", owner, options_.threshold.value_or(0.0));
}

F1Score::F1Score(F1ScoreOptions options) : FBetaScore(fbeta_options(std::move(options)), "F1Score") {}

void FBetaScore::build(const Shape& y_true_shape, const Shape& y_pred_shape) {
  check(y_true_shape.size() == 2 && y_pred_shape.size() == 2,
        "{} '{}': expects y_true and y_pred of shape [batch, classes], got y_true {} and y_pred {}", class_name_,
        name(), y_true_shape, y_pred_shape);
  if (classes_ > 0) return;
  classes_ = y_pred_shape[1];
  const std::size_t size = options_.average == "micro" ? 1 : std::size_t(classes_);
  for (auto* v : {&true_positives_, &false_positives_, &false_negatives_, &intermediate_weights_})
    v->assign(size, 0.0);
}

void FBetaScore::update_state(const Tensor& y_true, const Tensor& y_pred) { update_state(y_true, y_pred, Tensor()); }

void FBetaScore::update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) {
  NoGradGuard no_grad;
  const std::string owner = fmt::format("{} '{}'", class_name_, name());
  check(y_true.defined() && y_pred.defined(), "{}: y_true or y_pred is undefined", owner);
  check(y_true.shape() == y_pred.shape() && y_pred.ndim() == 2,
        "{}: expects y_true and y_pred of the same shape [batch, classes], got y_true {} and y_pred {}", owner,
        y_true.shape(), y_pred.shape());
  const bool micro = options_.average == "micro";  // one total: any number of classes
  check(micro || classes_ == 0 || y_pred.shape()[1] == classes_, "{}: built for {} classes, got y_pred of shape {}",
        owner, classes_, y_pred.shape());
  const std::size_t rows = std::size_t(y_pred.shape()[0]);
  std::vector<double> w;
  if (sample_weight.defined()) {
    // Keras multiplies by expand_dims(sample_weight, 1): one weight per row.
    const Shape& ws = sample_weight.shape();
    check((ws.size() == 1 || (ws.size() == 2 && ws[1] == 1)) && ws[0] == std::int64_t(rows),
          "{}: sample_weight must have shape [{}] (one weight per sample), got {}", owner, rows, ws);
    w = sample_weight.to_vector<double>();
  }
  build(y_true.shape(), y_pred.shape());

  const std::vector<double> t = y_true.to_vector<double>();
  const std::vector<double> p = y_pred.to_vector<double>();
  const std::size_t classes = std::size_t(y_pred.shape()[1]);
  for (std::size_t r = 0; r < rows; ++r) {
    const double* row = p.data() + r * classes;
    const double row_max = options_.threshold ? 0.0 : *std::max_element(row, row + classes);
    const double wt = w.empty() ? 1.0 : w[r];
    for (std::size_t c = 0; c < classes; ++c) {
      const bool positive =
          options_.threshold ? row[c] > *options_.threshold : (row[c] >= row_max && std::abs(row[c]) > kZeroPrediction);
      const double predicted = positive ? 1.0 : 0.0;
      const double label = t[r * classes + c];
      const std::size_t at = micro ? 0 : c;
      true_positives_[at] += predicted * label * wt;
      false_positives_[at] += predicted * (1.0 - label) * wt;
      false_negatives_[at] += (1.0 - predicted) * label * wt;
      intermediate_weights_[at] += label * wt;
    }
  }
}

std::vector<double> FBetaScore::scores() const {
  const double beta2 = options_.beta * options_.beta;
  std::vector<double> out(true_positives_.size());
  for (std::size_t c = 0; c < out.size(); ++c) {
    const double tp = true_positives_[c];
    const double precision = tp / (tp + false_positives_[c] + kEpsilon);
    const double recall = tp / (tp + false_negatives_[c] + kEpsilon);
    const double mean = precision * recall / (beta2 * precision + recall + kEpsilon);
    out[c] = mean * (1.0 + beta2);
  }
  return out;
}

double FBetaScore::result() const {
  if (classes_ == 0) return 0.0;
  const std::vector<double> f = scores();
  if (options_.average == "weighted") {
    const double total = std::accumulate(intermediate_weights_.begin(), intermediate_weights_.end(), 0.0);
    double sum = 0.0;
    for (std::size_t c = 0; c < f.size(); ++c) sum += f[c] * (intermediate_weights_[c] / (total + kEpsilon));
    return sum;
  }
  return std::accumulate(f.begin(), f.end(), 0.0) / double(f.size());
}

Tensor FBetaScore::result_tensor() const {
  if (options_.average || classes_ == 0) return Tensor::scalar(result(), DType::f64);
  const std::vector<double> f = scores();
  return Tensor::from_vector(f, Shape{std::int64_t(f.size())});
}

void FBetaScore::reset_state() {
  for (auto* v : {&true_positives_, &false_positives_, &false_negatives_, &intermediate_weights_})
    std::fill(v->begin(), v->end(), 0.0);
}

std::vector<double> FBetaScore::state() const {
  std::vector<double> out;
  for (const auto* v : {&true_positives_, &false_positives_, &false_negatives_, &intermediate_weights_})
    out.insert(out.end(), v->begin(), v->end());
  return out;
}

void FBetaScore::set_state(const std::vector<double>& state) {
  const std::string owner = fmt::format("{} '{}'", class_name_, name());
  const bool micro = options_.average == "micro";
  if (classes_ == 0) {
    check(!state.empty() && state.size() % 4 == 0 && (!micro || state.size() == 4),
          "{}: set_state expects 4 variables of {} values, got {}", owner, micro ? "1" : "classes", state.size());
    // "micro" keeps one value per variable, so its number of classes stays unknown until a batch says it.
    if (!micro) build({1, std::int64_t(state.size() / 4)}, {1, std::int64_t(state.size() / 4)});
    else build({1, 1}, {1, 1});
  }
  const std::size_t part = true_positives_.size();
  check(state.size() == 4 * part, "{}: set_state expects {} values (4 variables of {}), got {}", owner, 4 * part,
        part, state.size());
  std::size_t at = 0;
  for (auto* v : {&true_positives_, &false_positives_, &false_negatives_, &intermediate_weights_}) {
    std::copy(state.begin() + std::ptrdiff_t(at), state.begin() + std::ptrdiff_t(at + part), v->begin());
    at += part;
  }
}

}  // namespace loom::layers::metrics
