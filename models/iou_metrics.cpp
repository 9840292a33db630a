#include "models/iou_metrics.hpp"

#include <algorithm>
#include <cstddef>
#include <utility>

#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "models/detail/targets.hpp"

namespace loom::layers::metrics {

namespace {

/// Keras's backend.epsilon(), added to both divisions of result().
constexpr double kEpsilon = 1e-7;

std::vector<std::int64_t> every_class(std::int64_t num_classes) {
  std::vector<std::int64_t> ids;
  for (std::int64_t c = 0; c < num_classes; ++c) ids.push_back(c);
  return ids;
}

/// Class ids, flattened: the argmax over `axis` unless `sparse`.
std::vector<std::int64_t> flat_ids(const Tensor& given, bool sparse, std::int64_t axis, const char* which,
                                   const std::string& owner) {
  if (sparse) {
    return models::detail::class_ids(given, fmt::format("{} ({})", owner, which)).to_vector<std::int64_t>();
  }
  check(given.ndim() >= 1 && is_floating(given.dtype()),
        "{}: {} must be float scores along axis {} (its sparse_ flag is false), got {} of shape {}", owner, which,
        axis, given.dtype(), given.shape());
  check(axis >= -given.ndim() && axis < given.ndim(), "{}: axis {} is outside {}'s shape {}", owner, axis, which,
        given.shape());
  return ops::argmax(given, axis).to_vector<std::int64_t>();
}

}  // namespace

IoU::IoU(std::int64_t num_classes, std::vector<std::int64_t> target_class_ids, IoUOptions options)
    : IoU(num_classes, std::move(target_class_ids), std::move(options), "IoU") {}

IoU::IoU(std::int64_t num_classes, std::vector<std::int64_t> target_class_ids, IoUOptions options,
         const char* class_name)
    : Metric(options.name),
      num_classes_(num_classes),
      target_class_ids_(std::move(target_class_ids)),
      options_(std::move(options)),
      class_name_(class_name) {
  const std::string owner = fmt::format("{} '{}'", class_name_, name());
  check(num_classes_ >= 1, "{}: num_classes must be >= 1, got {}", owner, num_classes_);
  check(!target_class_ids_.empty(), "{}: target_class_ids is empty; name at least one class", owner);
  for (const std::int64_t id : target_class_ids_)
    check(id >= 0 && id < num_classes_, "{}: target class id {} is outside [0, {}) (target_class_ids [{}])", owner,
          id, num_classes_, fmt::join(target_class_ids_, ", "));
  total_cm_.assign(std::size_t(num_classes_ * num_classes_), 0.0);
}

void IoU::update_state(const Tensor& y_true, const Tensor& y_pred) { update_state(y_true, y_pred, Tensor()); }

void IoU::update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) {
  NoGradGuard no_grad;
  const std::string owner = fmt::format("{} '{}'", class_name_, name());
  check(y_true.defined() && y_pred.defined(), "{}: y_true or y_pred is undefined", owner);
  const std::vector<std::int64_t> truth = flat_ids(y_true, options_.sparse_y_true, options_.axis, "y_true", owner);
  const std::vector<std::int64_t> pred = flat_ids(y_pred, options_.sparse_y_pred, options_.axis, "y_pred", owner);
  check(truth.size() == pred.size(),
        "{}: y_true and y_pred must hold as many class ids, got {} from y_true {} and {} from y_pred {}", owner,
        truth.size(), y_true.shape(), pred.size(), y_pred.shape());
  std::vector<double> w;
  if (sample_weight.defined()) {
    w = sample_weight.to_vector<double>();
    check(w.size() == 1 || w.size() == truth.size(),
          "{}: sample_weight of shape {} does not broadcast to the {} class ids of y_true {} (a scalar, or one "
          "weight per element)",
          owner, sample_weight.shape(), truth.size(), y_true.shape());
  }
  const std::int64_t classes = num_classes_;
  for (std::size_t i = 0; i < truth.size(); ++i) {
    const std::int64_t t = truth[i], p = pred[i];
    // Keras's bounds mask: ids out of range and the ignored class count for nothing.
    if (t < 0 || t >= classes || p < 0 || p >= classes) continue;
    if (options_.ignore_class && t == *options_.ignore_class) continue;
    total_cm_[std::size_t(t * classes + p)] += w.empty() ? 1.0 : w[w.size() == 1 ? 0 : i];
  }
}

double IoU::result() const {
  const auto classes = std::size_t(num_classes_);
  double iou_sum = 0.0, valid = 0.0;
  for (const std::int64_t id : target_class_ids_) {
    const auto c = std::size_t(id);
    double predicted = 0.0, actual = 0.0;
    for (std::size_t k = 0; k < classes; ++k) {
      predicted += total_cm_[k * classes + c];
      actual += total_cm_[c * classes + k];
    }
    const double tp = total_cm_[c * classes + c];
    const double denominator = predicted + actual - tp;
    if (!(denominator > 1e-9)) continue;  // a class that never occurs is left out
    iou_sum += tp / (denominator + kEpsilon);
    valid += 1.0;
  }
  return iou_sum / (valid + kEpsilon);
}

void IoU::reset_state() { std::fill(total_cm_.begin(), total_cm_.end(), 0.0); }

void IoU::set_state(const std::vector<double>& state) {
  check(state.size() == total_cm_.size(), "{} '{}': set_state expects {} values ({} x {}), got {}", class_name_,
        name(), total_cm_.size(), num_classes_, num_classes_, state.size());
  total_cm_ = state;
}

MeanIoU::MeanIoU(std::int64_t num_classes, MeanIoUOptions options)
    : IoU(num_classes, every_class(num_classes),
          {.name = std::move(options.name), .ignore_class = options.ignore_class,
           .sparse_y_true = options.sparse_y_true, .sparse_y_pred = options.sparse_y_pred, .axis = options.axis},
          "MeanIoU") {}

BinaryIoU::BinaryIoU(BinaryIoUOptions options)
    : IoU(2, std::move(options.target_class_ids), {.name = std::move(options.name)}, "BinaryIoU"),
      threshold_(options.threshold) {}

void BinaryIoU::update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) {
  NoGradGuard no_grad;
  check(y_pred.defined(), "BinaryIoU '{}': y_pred is undefined", name());
  // As Keras: y_pred in float32 against the threshold (a Python float, so float32 too).
  const Tensor predicted = ops::cast(
      ops::greater_equal(ops::cast(y_pred, DType::f32), Tensor::scalar(threshold_, DType::f32)), DType::i64);
  IoU::update_state(y_true, predicted, sample_weight);
}

OneHotIoU::OneHotIoU(std::int64_t num_classes, std::vector<std::int64_t> target_class_ids, OneHotIoUOptions options)
    : IoU(num_classes, std::move(target_class_ids),
          {.name = std::move(options.name), .ignore_class = options.ignore_class, .sparse_y_true = false,
           .sparse_y_pred = options.sparse_y_pred, .axis = options.axis},
          "OneHotIoU") {}

OneHotMeanIoU::OneHotMeanIoU(std::int64_t num_classes, OneHotMeanIoUOptions options)
    : IoU(num_classes, every_class(num_classes),
          {.name = std::move(options.name), .ignore_class = options.ignore_class, .sparse_y_true = false,
           .sparse_y_pred = options.sparse_y_pred, .axis = options.axis},
          "OneHotMeanIoU") {}

}  // namespace loom::layers::metrics
