#include "models/detail/confusion_matrix.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>

#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "models/detail/targets.hpp"

namespace loom::models::detail {

namespace {

/// Keras's NEG_INF: what top_k filtering gives the predictions it drops.
constexpr double kNegInf = -1e10;

/// Keras's _filter_top_k on y_pred's rows (its last axis): the k highest keep their value (the lower index
/// first among equals, as top_k orders them), the others become -1e10.
std::vector<double> filter_top_k(std::vector<double> values, std::size_t classes, std::size_t k) {
  std::vector<std::size_t> order(classes);
  std::vector<bool> keep(classes);
  for (std::size_t row = 0; row < values.size() / classes; ++row) {
    double* v = values.data() + row * classes;
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(), [v](std::size_t a, std::size_t b) { return v[a] > v[b]; });
    std::fill(keep.begin(), keep.end(), false);
    for (std::size_t i = 0; i < k; ++i) keep[order[i]] = true;
    for (std::size_t c = 0; c < classes; ++c)
      if (!keep[c]) v[c] = kNegInf;
  }
  return values;
}

/// Adds `from` into `to` (both of the same size) when `to` is wanted.
void add_into(std::vector<double>* to, const std::vector<double>& from) {
  if (to == nullptr) return;
  for (std::size_t i = 0; i < from.size(); ++i) (*to)[i] += from[i];
}

}  // namespace

bool is_evenly_distributed_thresholds(const std::vector<double>& thresholds) {
  const std::size_t n = thresholds.size();
  if (n < 3) return false;
  for (std::size_t i = 0; i < n; ++i) {
    // NumPy's arange(n, dtype=float32) / (n - 1), compared by allclose(atol=1e-7) in double.
    const double even = double(float(i) / float(n - 1));
    if (!(std::abs(thresholds[i] - even) <= 1e-7 + 1e-5 * std::abs(even))) return false;
  }
  return true;
}

void update_confusion_matrix(const ConfusionMatrixCounts& counts, const Tensor& y_true, const Tensor& y_pred,
                             const Tensor& sample_weight, const ConfusionMatrixOptions& options,
                             std::string_view owner) {
  NoGradGuard no_grad;
  check(y_true.defined() && y_pred.defined(), "{}: y_true or y_pred is undefined", owner);
  auto [pred, truth] = squeeze_or_expand_to_same_rank(ops::cast(y_pred, DType::f64), ops::cast(y_true, DType::f64));
  check(pred.shape() == truth.shape(),
        "{}: y_true and y_pred must have the same shape (a trailing 1 aside), got y_true {} and y_pred {}", owner,
        y_true.shape(), y_pred.shape());
  Tensor weight;
  if (sample_weight.defined()) {
    // Keras: the weights gain a trailing axis, which goes again when they then outrank y_true by one.
    weight = ops::expand_dims(ops::cast(sample_weight, DType::f64), -1);
    if (weight.ndim() == truth.ndim() + 1 && weight.shape().back() == 1) weight = ops::squeeze(weight, -1);
  }
  const std::int64_t classes = pred.ndim() >= 1 ? pred.shape().back() : 1;
  std::vector<double> p;
  if (options.top_k) {
    const std::int64_t k = *options.top_k;
    check(pred.ndim() >= 1 && k >= 1 && k <= classes,
          "{}: top_k must be in [1, classes] for y_pred's last axis, got top_k {} for y_pred {}", owner, k,
          y_pred.shape());
    p = filter_top_k(pred.to_vector<double>(), std::size_t(classes), std::size_t(k));
    pred = Tensor::from_vector(p, pred.shape());
  }
  if (options.class_id) {
    const std::int64_t id = *options.class_id;
    check(pred.ndim() >= 2, "{}: class_id needs y_pred of shape [samples, classes], got y_pred {}", owner,
          y_pred.shape());
    check(id >= 0 && id < classes, "{}: class_id {} is outside [0, {}) for y_pred {}", owner, id, classes,
          y_pred.shape());
    pred = ops::slice(pred, -1, id, id + 1);
    truth = ops::slice(truth, -1, id, id + 1);
  }
  if (weight.defined()) {
    check(broadcasts_to(weight.shape(), pred.shape()),
          "{}: sample_weight of shape {} does not broadcast to y_pred's shape {} (the weights gain a trailing axis "
          "of 1 first, as in Keras)",
          owner, sample_weight.shape(), pred.shape());
    weight = ops::broadcast_to(weight, pred.shape());
  }
  const std::size_t label_weight_count = options.label_weights.size();
  if (label_weight_count > 0) {
    check(!options.multi_label, "{}: label_weights with multi_label are applied by the metric, not per element",
          owner);
    check(broadcasts_to(Shape{1, std::int64_t(label_weight_count)}, pred.shape()),
          "{}: {} label_weights do not broadcast along the last axis of y_pred {}", owner, label_weight_count,
          pred.shape());
  }
  if (options.multi_label)
    check(pred.ndim() == 2, "{}: multi_label needs y_pred of shape [samples, labels], got {}", owner, y_pred.shape());

  p = pred.to_vector<double>();
  const std::vector<double> t = truth.to_vector<double>();
  const std::vector<double> w = weight.defined() ? weight.to_vector<double>() : std::vector<double>();
  const std::size_t elements = p.size();
  const std::size_t last = pred.ndim() >= 1 ? std::size_t(pred.shape().back()) : 1;
  const std::size_t labels = options.multi_label ? last : 1;
  const std::size_t thresholds = options.thresholds.size();
  const auto weight_of = [&](std::size_t e) {
    double v = w.empty() ? 1.0 : w[e];
    if (label_weight_count > 0) v *= options.label_weights[label_weight_count == 1 ? 0 : e % last];
    return v;
  };

  const std::size_t size = thresholds * labels;
  std::vector<double> tp(size, 0.0), fp(size, 0.0), tn(size, 0.0), fn(size, 0.0);
  if (options.thresholds_distributed_evenly) {
    // Keras's bucketed form: a prediction p falls in bucket ceil(p (n - 1)) - 1 (the epsilon endpoints move
    // bucket -1 to 0), counts positive at every threshold up to its bucket, and negatives are what is left.
    const bool with_epsilon = options.thresholds.front() < 0.0 || options.thresholds.back() > 1.0;
    std::vector<double> total_true(labels, 0.0), total_false(labels, 0.0);
    for (std::size_t e = 0; e < elements; ++e) {
      const std::size_t label = e % labels;
      const double positive = t[e] != 0.0 ? 1.0 : 0.0;
      const double wt = weight_of(e);
      const double true_label = positive * wt, false_label = (1.0 - positive) * wt;
      total_true[label] += true_label;
      total_false[label] += false_label;
      const double clipped = std::min(std::max(p[e], 0.0), 1.0);
      double bucket = std::ceil(clipped * double(thresholds - 1)) - 1.0;
      if (with_epsilon) bucket = std::max(bucket, 0.0);
      if (!(bucket >= 0.0 && bucket < double(thresholds))) continue;  // Keras's segment_sum drops these
      const std::size_t at = std::size_t(bucket) * labels + label;
      tp[at] += true_label;
      fp[at] += false_label;
    }
    for (std::size_t i = thresholds - 1; i-- > 0;)
      for (std::size_t l = 0; l < labels; ++l) {
        tp[i * labels + l] += tp[(i + 1) * labels + l];
        fp[i * labels + l] += fp[(i + 1) * labels + l];
      }
    for (std::size_t i = 0; i < thresholds; ++i)
      for (std::size_t l = 0; l < labels; ++l) {
        fn[i * labels + l] = total_true[l] - tp[i * labels + l];
        tn[i * labels + l] = total_false[l] - fp[i * labels + l];
      }
  } else {
    for (std::size_t i = 0; i < thresholds; ++i) {
      const double threshold = options.thresholds[i];
      for (std::size_t e = 0; e < elements; ++e) {
        const std::size_t at = i * labels + e % labels;
        const bool positive = t[e] != 0.0;
        const bool predicted = p[e] > threshold;
        const double wt = weight_of(e);
        if (positive && predicted) tp[at] += wt;
        else if (positive) fn[at] += wt;
        else if (predicted) fp[at] += wt;
        else tn[at] += wt;
      }
    }
  }
  add_into(counts.true_positives, tp);
  add_into(counts.false_positives, fp);
  add_into(counts.true_negatives, tn);
  add_into(counts.false_negatives, fn);
}

}  // namespace loom::models::detail
