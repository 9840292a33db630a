#include "models/confusion_metrics.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <utility>

#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "models/detail/confusion_matrix.hpp"

namespace loom::layers::metrics {

namespace {

using models::detail::ConfusionMatrixCounts;
using models::detail::ConfusionMatrixOptions;

/// Keras's backend.epsilon(), AUC's endpoint margin.
constexpr double kEpsilon = 1e-7;
/// Keras's NEG_INF, the threshold of Precision and Recall with top_k and no thresholds.
constexpr double kNegInf = -1e10;

/// Keras's parse_init_thresholds: the given thresholds, each in [0, 1], or the default.
std::vector<double> parse_thresholds(const std::vector<double>& given, double fallback, std::string_view owner) {
  for (const double t : given)
    check(t >= 0.0 && t <= 1.0, "{}: thresholds must be in [0, 1], got {} in [{}]", owner, t, fmt::join(given, ", "));
  return given.empty() ? std::vector<double>{fallback} : given;
}

/// Keras's divide_no_nan, elementwise: 0 where the denominator is 0.
std::vector<double> divide_no_nan(const std::vector<double>& num, const std::vector<double>& den) {
  std::vector<double> out(num.size());
  for (std::size_t i = 0; i < num.size(); ++i) out[i] = den[i] == 0.0 ? 0.0 : num[i] / den[i];
  return out;
}

std::vector<double> plus(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> out(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) out[i] = a[i] + b[i];
  return out;
}

double mean_of(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
}

/// result() of a per-threshold vector: its value for one threshold, its mean for several.
double scalar_of(const std::vector<double>& v) { return v.size() == 1 ? v[0] : mean_of(v); }

/// result_tensor() of a per-threshold vector: a scalar for one threshold, as Keras.
Tensor tensor_of(const std::vector<double>& v) {
  return v.size() == 1 ? Tensor::scalar(v[0], DType::f64) : Tensor::from_vector(v, Shape{std::int64_t(v.size())});
}

std::vector<double> concat(std::initializer_list<const std::vector<double>*> parts) {
  std::vector<double> out;
  for (const auto* part : parts) out.insert(out.end(), part->begin(), part->end());
  return out;
}

/// Splits a state() vector into equal parts; a length that does not divide is a loom::Error.
void split_state(const std::vector<double>& state, std::initializer_list<std::vector<double>*> parts,
                 std::size_t part_size, const std::string& owner) {
  check(state.size() == parts.size() * part_size, "{}: set_state expects {} values ({} variables of {}), got {}",
        owner, parts.size() * part_size, parts.size(), part_size, state.size());
  std::size_t at = 0;
  for (auto* part : parts) {
    part->assign(state.begin() + std::ptrdiff_t(at), state.begin() + std::ptrdiff_t(at + part_size));
    at += part_size;
  }
}

void zero(std::initializer_list<std::vector<double>*> parts) {
  for (auto* part : parts) std::fill(part->begin(), part->end(), 0.0);
}

std::string owner_of(const char* class_name, const std::string& name) {
  return fmt::format("{} '{}'", class_name, name);
}

}  // namespace

// ---- the four counts ------------------------------------------------------------------------------------------

ConfusionMatrixConditionCount::ConfusionMatrixConditionCount(Condition condition, std::vector<double> thresholds,
                                                             std::string name, const char* class_name)
    : Metric(std::move(name)),
      condition_(condition),
      class_name_(class_name),
      given_thresholds_(std::move(thresholds)),
      thresholds_(parse_thresholds(given_thresholds_, 0.5, owner_of(class_name, this->name()))),
      thresholds_distributed_evenly_(models::detail::is_evenly_distributed_thresholds(thresholds_)),
      accumulator_(thresholds_.size(), 0.0) {}

void ConfusionMatrixConditionCount::update_state(const Tensor& y_true, const Tensor& y_pred) {
  update_state(y_true, y_pred, Tensor());
}

void ConfusionMatrixConditionCount::update_state(const Tensor& y_true, const Tensor& y_pred,
                                                 const Tensor& sample_weight) {
  std::vector<double> added(accumulator_.size(), 0.0);
  ConfusionMatrixCounts counts;
  switch (condition_) {
    case Condition::true_positives: counts.true_positives = &added; break;
    case Condition::false_positives: counts.false_positives = &added; break;
    case Condition::true_negatives: counts.true_negatives = &added; break;
    case Condition::false_negatives: counts.false_negatives = &added; break;
  }
  models::detail::update_confusion_matrix(
      counts, y_true, y_pred, sample_weight,
      {.thresholds = thresholds_, .thresholds_distributed_evenly = thresholds_distributed_evenly_},
      owner_of(class_name_, name()));
  for (std::size_t i = 0; i < added.size(); ++i) accumulator_[i] += added[i];
}

double ConfusionMatrixConditionCount::result() const { return scalar_of(accumulator_); }
Tensor ConfusionMatrixConditionCount::result_tensor() const { return tensor_of(accumulator_); }
void ConfusionMatrixConditionCount::reset_state() { zero({&accumulator_}); }

void ConfusionMatrixConditionCount::set_state(const std::vector<double>& state) {
  split_state(state, {&accumulator_}, thresholds_.size(), owner_of(class_name_, name()));
}

TruePositives::TruePositives(TruePositivesOptions options)
    : ConfusionMatrixConditionCount(Condition::true_positives, std::move(options.thresholds), std::move(options.name),
                                    "TruePositives") {}
FalsePositives::FalsePositives(FalsePositivesOptions options)
    : ConfusionMatrixConditionCount(Condition::false_positives, std::move(options.thresholds),
                                    std::move(options.name), "FalsePositives") {}
TrueNegatives::TrueNegatives(TrueNegativesOptions options)
    : ConfusionMatrixConditionCount(Condition::true_negatives, std::move(options.thresholds), std::move(options.name),
                                    "TrueNegatives") {}
FalseNegatives::FalseNegatives(FalseNegativesOptions options)
    : ConfusionMatrixConditionCount(Condition::false_negatives, std::move(options.thresholds),
                                    std::move(options.name), "FalseNegatives") {}

// ---- Precision and Recall -------------------------------------------------------------------------------------

namespace {

/// The top_k and class_id checks Precision and Recall make when they are built.
void check_top_k_and_class(const std::optional<std::int64_t>& top_k, const std::optional<std::int64_t>& class_id,
                           const std::string& owner) {
  check(!top_k || *top_k >= 1, "{}: top_k must be >= 1, got {}", owner, top_k.value_or(0));
  check(!class_id || *class_id >= 0, "{}: class_id must be >= 0, got {}", owner, class_id.value_or(0));
}

}  // namespace

PrecisionRecallBase::PrecisionRecallBase(Other other, const std::vector<double>& thresholds,
                                         std::optional<std::int64_t> top_k, std::optional<std::int64_t> class_id,
                                         std::string name, const char* class_name)
    : Metric(std::move(name)),
      other_(other),
      class_name_(class_name),
      top_k_(top_k),
      class_id_(class_id),
      thresholds_(parse_thresholds(thresholds, top_k ? kNegInf : 0.5, owner_of(class_name, this->name()))),
      thresholds_distributed_evenly_(models::detail::is_evenly_distributed_thresholds(thresholds_)),
      true_positives_(thresholds_.size(), 0.0),
      other_count_(thresholds_.size(), 0.0) {
  check_top_k_and_class(top_k_, class_id_, owner_of(class_name_, this->name()));
}

void PrecisionRecallBase::update_state(const Tensor& y_true, const Tensor& y_pred) {
  update_state(y_true, y_pred, Tensor());
}

void PrecisionRecallBase::update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) {
  ConfusionMatrixCounts counts{.true_positives = &true_positives_};
  (other_ == Other::false_positives ? counts.false_positives : counts.false_negatives) = &other_count_;
  models::detail::update_confusion_matrix(counts, y_true, y_pred, sample_weight,
                                          {.thresholds = thresholds_, .top_k = top_k_, .class_id = class_id_,
                                           .thresholds_distributed_evenly = thresholds_distributed_evenly_},
                                          owner_of(class_name_, name()));
}

double PrecisionRecallBase::result() const {
  return scalar_of(divide_no_nan(true_positives_, plus(true_positives_, other_count_)));
}
Tensor PrecisionRecallBase::result_tensor() const {
  return tensor_of(divide_no_nan(true_positives_, plus(true_positives_, other_count_)));
}
void PrecisionRecallBase::reset_state() { zero({&true_positives_, &other_count_}); }
std::vector<double> PrecisionRecallBase::state() const { return concat({&true_positives_, &other_count_}); }
void PrecisionRecallBase::set_state(const std::vector<double>& state) {
  split_state(state, {&true_positives_, &other_count_}, thresholds_.size(), owner_of(class_name_, name()));
}

Precision::Precision(PrecisionOptions options)
    : PrecisionRecallBase(Other::false_positives, options.thresholds, options.top_k, options.class_id, options.name,
                          "Precision"),
      options_(std::move(options)) {}

Recall::Recall(RecallOptions options)
    : PrecisionRecallBase(Other::false_negatives, options.thresholds, options.top_k, options.class_id, options.name,
                          "Recall"),
      options_(std::move(options)) {}

// ---- one rate at a constraint on another ----------------------------------------------------------------------

SensitivitySpecificityBase::SensitivitySpecificityBase(double value, const char* value_name,
                                                       std::int64_t num_thresholds,
                                                       std::optional<std::int64_t> class_id, std::string name,
                                                       const char* class_name)
    : Metric(std::move(name)), value_(value), class_id_(class_id), class_name_(class_name) {
  const std::string owner = owner_of(class_name_, this->name());
  check(value >= 0.0 && value <= 1.0, "{}: {} must be in [0, 1], got {}", owner, value_name, value);
  check(num_thresholds > 0, "{}: num_thresholds must be > 0, got {}", owner, num_thresholds);
  check(!class_id || *class_id >= 0, "{}: class_id must be >= 0, got {}", owner, class_id.value_or(0));
  if (num_thresholds == 1) {
    thresholds_ = {0.5};
    thresholds_distributed_evenly_ = false;
  } else {
    thresholds_.push_back(0.0);
    for (std::int64_t i = 0; i < num_thresholds - 2; ++i) thresholds_.push_back(double(i + 1) * 1.0 / double(num_thresholds - 1));
    thresholds_.push_back(1.0);
    thresholds_distributed_evenly_ = true;
  }
  for (auto* v : {&true_positives_, &false_positives_, &true_negatives_, &false_negatives_})
    v->assign(thresholds_.size(), 0.0);
}

void SensitivitySpecificityBase::update_state(const Tensor& y_true, const Tensor& y_pred) {
  update_state(y_true, y_pred, Tensor());
}

void SensitivitySpecificityBase::update_state(const Tensor& y_true, const Tensor& y_pred,
                                              const Tensor& sample_weight) {
    models::detail::update_confusion_matrix(
        {.true_positives = &true_positives_, .false_positives = &false_positives_,
         .true_negatives = &true_negatives_, .false_negatives = &false_negatives_},
        y_true, y_pred, sample_weight,
        {.thresholds = thresholds_, .class_id = class_id_,
         .thresholds_distributed_evenly = thresholds_distributed_evenly_},
        owner_of(class_name_, name()));
}

void SensitivitySpecificityBase::reset_state() {
  zero({&true_positives_, &false_positives_, &true_negatives_, &false_negatives_});
}

std::vector<double> SensitivitySpecificityBase::state() const {
  return concat({&true_positives_, &false_positives_, &true_negatives_, &false_negatives_});
}

void SensitivitySpecificityBase::set_state(const std::vector<double>& state) {
  split_state(state, {&true_positives_, &false_positives_, &true_negatives_, &false_negatives_},
              thresholds_.size(), owner_of(class_name_, name()));
}

double SensitivitySpecificityBase::max_under_constraint(const std::vector<double>& constrained,
                                                        const std::vector<double>& dependent) const {
  double best = 0.0;  // Keras: max(where(feasible, dependent, 0), initial=0)
  for (std::size_t i = 0; i < constrained.size(); ++i) best = std::max(best, constrained[i] >= value_ ? dependent[i] : 0.0);
  return best;
}

std::vector<double> SensitivitySpecificityBase::sensitivities() const {
  return divide_no_nan(true_positives_, plus(true_positives_, false_negatives_));
}
std::vector<double> SensitivitySpecificityBase::specificities() const {
  return divide_no_nan(true_negatives_, plus(true_negatives_, false_positives_));
}
std::vector<double> SensitivitySpecificityBase::precisions() const {
  return divide_no_nan(true_positives_, plus(true_positives_, false_positives_));
}

SensitivityAtSpecificity::SensitivityAtSpecificity(double specificity, SensitivityAtSpecificityOptions options)
    : SensitivitySpecificityBase(specificity, "specificity", options.num_thresholds, options.class_id,
                                 std::move(options.name), "SensitivityAtSpecificity") {}
double SensitivityAtSpecificity::result() const { return max_under_constraint(specificities(), sensitivities()); }

SpecificityAtSensitivity::SpecificityAtSensitivity(double sensitivity, SpecificityAtSensitivityOptions options)
    : SensitivitySpecificityBase(sensitivity, "sensitivity", options.num_thresholds, options.class_id,
                                 std::move(options.name), "SpecificityAtSensitivity") {}
double SpecificityAtSensitivity::result() const { return max_under_constraint(sensitivities(), specificities()); }

PrecisionAtRecall::PrecisionAtRecall(double recall, PrecisionAtRecallOptions options)
    : SensitivitySpecificityBase(recall, "recall", options.num_thresholds, options.class_id, std::move(options.name),
                                 "PrecisionAtRecall") {}
double PrecisionAtRecall::result() const { return max_under_constraint(sensitivities(), precisions()); }

RecallAtPrecision::RecallAtPrecision(double precision, RecallAtPrecisionOptions options)
    : SensitivitySpecificityBase(precision, "precision", options.num_thresholds, options.class_id,
                                 std::move(options.name), "RecallAtPrecision") {}
double RecallAtPrecision::result() const { return max_under_constraint(precisions(), sensitivities()); }

// ---- AUC ------------------------------------------------------------------------------------------------------

AUC::AUC(AUCOptions options) : Metric(options.name), options_(std::move(options)) {
  const std::string owner = owner_of("AUC", name());
  const std::string& curve = options_.curve;
  if (curve == "ROC" || curve == "roc") curve_ = Curve::roc;
  else if (curve == "PR" || curve == "pr") curve_ = Curve::pr;
  else if (curve == "PRGAIN" || curve == "prgain") curve_ = Curve::prgain;
  else throw Error(fmt::format("{}: unknown curve '{}'; expected \"ROC\", \"PR\" or \"PRGAIN\"", owner, curve));
  const std::string& method = options_.summation_method;
  if (method == "interpolation" || method == "Interpolation") summation_ = Summation::interpolation;
  else if (method == "minoring" || method == "Minoring") summation_ = Summation::minoring;
  else if (method == "majoring" || method == "Majoring") summation_ = Summation::majoring;
  else
    throw Error(fmt::format("{}: unknown summation_method '{}'; expected \"interpolation\", \"minoring\" or "
                            "\"majoring\"", owner, method));

  std::vector<double> inner;
  if (!options_.thresholds.empty()) {
    for (const double t : options_.thresholds)
      check(t >= 0.0 && t <= 1.0, "{}: thresholds must be in [0, 1], got {} in [{}]", owner, t,
            fmt::join(options_.thresholds, ", "));
    inner = options_.thresholds;
    std::sort(inner.begin(), inner.end());
    std::vector<double> with_ends{0.0};
    with_ends.insert(with_ends.end(), inner.begin(), inner.end());
    with_ends.push_back(1.0);
    thresholds_distributed_evenly_ = models::detail::is_evenly_distributed_thresholds(with_ends);
  } else {
    const std::int64_t n = options_.num_thresholds;
    check(n > 1, "{}: num_thresholds must be > 1, got {}", owner, n);
    for (std::int64_t i = 0; i < n - 2; ++i) inner.push_back(double(i + 1) * 1.0 / double(n - 1));
    thresholds_distributed_evenly_ = true;
  }
  // Endpoints below 0 and above 1 take every prediction in [0, 1] whatever its rounding.
  thresholds_.push_back(0.0 - kEpsilon);
  thresholds_.insert(thresholds_.end(), inner.begin(), inner.end());
  thresholds_.push_back(1.0 + kEpsilon);

  for (const double w : options_.label_weights)
    check(w >= 0.0, "{}: label_weights must be non-negative, got {} in [{}]", owner, w,
          fmt::join(options_.label_weights, ", "));
  if (options_.multi_label) {
    if (options_.num_labels) {
      check(*options_.num_labels >= 1, "{}: num_labels must be >= 1, got {}", owner, *options_.num_labels);
      build_labels(*options_.num_labels);
    }
  } else {
    check(!options_.num_labels, "{}: num_labels is needed only when multi_label is true (got num_labels {})", owner,
          options_.num_labels.value_or(0));
    build_labels(1);
  }
}

void AUC::build_labels(std::int64_t labels) {
  const std::string owner = owner_of("AUC", name());
  check(!options_.multi_label || options_.label_weights.empty() ||
            std::int64_t(options_.label_weights.size()) == labels,
        "{}: {} label_weights for {} labels; expected one per label", owner, options_.label_weights.size(), labels);
  labels_ = labels;
  for (auto* v : {&true_positives_, &false_positives_, &true_negatives_, &false_negatives_})
    v->assign(thresholds_.size() * std::size_t(labels), 0.0);
}

void AUC::build(const Shape& /*y_true_shape*/, const Shape& y_pred_shape) {
  if (labels_ > 0) return;
  check(y_pred_shape.size() == 2, "AUC '{}': multi_label needs y_pred of rank 2 [samples, labels], got shape {}",
        name(), y_pred_shape);
  build_labels(y_pred_shape[1]);
}

void AUC::update_state(const Tensor& y_true, const Tensor& y_pred) { update_state(y_true, y_pred, Tensor()); }

void AUC::update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) {
  const std::string owner = owner_of("AUC", name());
  check(y_true.defined() && y_pred.defined(), "{}: y_true or y_pred is undefined", owner);
  if (options_.multi_label) {
    build(y_true.shape(), y_pred.shape());
    check(y_pred.ndim() == 2 && y_pred.shape()[1] == labels_,
          "{}: multi_label was built for {} labels; got y_pred of shape {}", owner, labels_, y_pred.shape());
  }
  Tensor pred = y_pred;
  if (options_.from_logits) {
    NoGradGuard no_grad;
    pred = ops::sigmoid(ops::cast(y_pred, DType::f64));
  }
    models::detail::update_confusion_matrix(
        {.true_positives = &true_positives_, .false_positives = &false_positives_,
         .true_negatives = &true_negatives_, .false_negatives = &false_negatives_},
        y_true, pred, sample_weight,
        {.thresholds = thresholds_, .multi_label = options_.multi_label,
         .label_weights = options_.multi_label ? std::vector<double>() : options_.label_weights,
         .thresholds_distributed_evenly = thresholds_distributed_evenly_},
        owner);
}

double AUC::average_over_labels(const std::vector<double>& terms) const {
  // terms: [thresholds - 1, labels] row-major; each label's AUC is its column's sum.
  const std::size_t labels = std::size_t(labels_);
  std::vector<double> by_label(labels, 0.0);
  for (std::size_t i = 0; i < terms.size(); ++i) by_label[i % labels] += terms[i];
  if (!options_.multi_label) return by_label[0];
  if (options_.label_weights.empty()) return mean_of(by_label);
  double weighted = 0.0, total = 0.0;
  for (std::size_t l = 0; l < labels; ++l) {
    weighted += by_label[l] * options_.label_weights[l];
    total += options_.label_weights[l];
  }
  return total == 0.0 ? 0.0 : weighted / total;
}

// Davis & Goadrich's interpolation of the PR curve between thresholds, Keras's interpolate_pr_auc.
double AUC::interpolate_pr_auc() const {
  const std::size_t labels = std::size_t(labels_);
  const std::size_t steps = (thresholds_.size() - 1) * labels;
  const auto& tp = true_positives_;
  const auto& fp = false_positives_;
  const auto& fn = false_negatives_;
  std::vector<double> terms(steps);
  for (std::size_t i = 0; i < steps; ++i) {
    const std::size_t next = i + labels;  // the same label at the next threshold
    const double dtp = tp[i] - tp[next];
    const double p = tp[i] + fp[i], p_next = tp[next] + fp[next];
    const double dp = p - p_next;
    const double dp_safe = std::max(dp, 0.0);
    const double prec_slope = dp_safe == 0.0 ? 0.0 : dtp / dp_safe;
    const double intercept = tp[next] - prec_slope * p_next;
    const double p_next_safe = std::max(p_next, 0.0);
    const double safe_p_ratio = (p > 0.0 && p_next > 0.0) ? (p_next_safe == 0.0 ? 0.0 : p / p_next_safe) : 1.0;
    const double numerator = prec_slope * (dtp + intercept * std::log(safe_p_ratio));
    const double denominator = std::max(tp[next] + fn[next], 0.0);
    terms[i] = denominator == 0.0 ? 0.0 : numerator / denominator;
  }
  return average_over_labels(terms);
}

double AUC::result() const {
  if (labels_ == 0) return 0.0;  // multi_label, before the first batch
  if (curve_ == Curve::pr && summation_ == Summation::interpolation) return interpolate_pr_auc();
  const std::vector<double>& tp = true_positives_;
  const std::vector<double>& fp = false_positives_;
  const std::vector<double>& tn = true_negatives_;
  const std::vector<double>& fn = false_negatives_;
  const std::vector<double> recall = divide_no_nan(tp, plus(tp, fn));
  std::vector<double> x, y;
  if (curve_ == Curve::roc) {
    x = divide_no_nan(fp, plus(fp, tn));
    y = recall;
  } else if (curve_ == Curve::pr) {
    x = recall;
    y = divide_no_nan(tp, plus(tp, fp));
  } else {
    // Precision-recall gain (Flach & Kull), with Keras's fixes: no true positives give recall gain 0 and
    // precision gain 1, and a negative recall gain becomes 0.
    const std::vector<double> scaling = divide_no_nan(plus(tp, fn), plus(tn, fp));
    const std::vector<double> fn_over_tp = divide_no_nan(fn, tp), fp_over_tp = divide_no_nan(fp, tp);
    x.resize(tp.size());
    y.resize(tp.size());
    for (std::size_t i = 0; i < tp.size(); ++i) {
      const double recall_gain = tp[i] == 0.0 ? 0.0 : 1.0 - scaling[i] * fn_over_tp[i];
      const double precision_gain = tp[i] == 0.0 ? 1.0 : 1.0 - scaling[i] * fp_over_tp[i];
      x[i] = std::max(recall_gain, 0.0);
      y[i] = precision_gain;
    }
  }
  const std::size_t labels = std::size_t(labels_);
  const std::size_t steps = (thresholds_.size() - 1) * labels;
  std::vector<double> terms(steps);
  for (std::size_t i = 0; i < steps; ++i) {
    const std::size_t next = i + labels;
    double height;
    if (summation_ == Summation::interpolation) height = (y[i] + y[next]) / 2.0;
    else if (summation_ == Summation::minoring) height = std::min(y[i], y[next]);
    else height = std::max(y[i], y[next]);
    terms[i] = (x[i] - x[next]) * height;
  }
  return average_over_labels(terms);
}

void AUC::reset_state() { zero({&true_positives_, &false_positives_, &true_negatives_, &false_negatives_}); }

std::vector<double> AUC::state() const {
  return concat({&true_positives_, &false_positives_, &true_negatives_, &false_negatives_});
}

void AUC::set_state(const std::vector<double>& state) {
  const std::string owner = owner_of("AUC", name());
  if (labels_ == 0) {
    // multi_label before any batch: the state's length tells the number of labels.
    const std::size_t per_label = 4 * thresholds_.size();
    check(!state.empty() && state.size() % per_label == 0,
          "{}: set_state expects 4 x {} thresholds x labels values, got {}", owner, thresholds_.size(), state.size());
    build_labels(std::int64_t(state.size() / per_label));
  }
  split_state(state, {&true_positives_, &false_positives_, &true_negatives_, &false_negatives_},
              thresholds_.size() * std::size_t(labels_), owner);
}

}  // namespace loom::layers::metrics
