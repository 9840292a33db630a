#include "models/loss.hpp"

#include <algorithm>
#include <array>
#include <string_view>

#include <fmt/ranges.h>

#include "framework/ops/ops.hpp"
#include "framework/tensor/error.hpp"
#include "models/detail/targets.hpp"

namespace loom::losses {

namespace {

constexpr std::array<std::string_view, 5> kReductions = {"sum_over_batch_size", "sum", "mean",
                                                         "mean_with_sample_weight", "none"};

/// a / b, or 0 where b is 0 (Keras's divide_no_nan); b is a scalar.
Tensor divide_no_nan(const Tensor& a, const Tensor& b) {
  const Tensor zero = Tensor::scalar(0.0, b.dtype());
  const Tensor safe = ops::where(ops::equal(b, zero), Tensor::scalar(1.0, b.dtype()), b);
  return ops::where(ops::equal(b, zero), zero, ops::div(a, safe));
}

/// A rank-1 weight of one entry per sample against values of higher rank weighs each sample's values alike.
Tensor align_sample_weight(const Tensor& values, Tensor weight) {
  if (weight.ndim() == 1 && values.ndim() > 1 && weight.shape()[0] == values.shape()[0]) {
    Shape shape(std::size_t(values.ndim()), 1);
    shape[0] = weight.shape()[0];
    weight = ops::reshape(weight, shape);
  }
  return weight;
}

}  // namespace

void check_reduction(const std::string& reduction, const std::string& owner) {
  check(std::find(kReductions.begin(), kReductions.end(), reduction) != kReductions.end(),
        "{}: unknown reduction '{}'; expected one of {}", owner, reduction, fmt::join(kReductions, ", "));
}

Tensor apply_mask(const Tensor& sample_weight, const Tensor& mask, DType dtype, const std::string& reduction) {
  if (!mask.defined()) return sample_weight;
  Tensor float_mask = ops::cast(mask, dtype);
  if (reduction == "mean" || reduction == "sum_over_batch_size") {
    const Tensor total = Tensor::scalar(double(mask.numel()), dtype);
    const Tensor valid = ops::sum(float_mask, {}, false);
    float_mask = float_mask * divide_no_nan(total, valid);
  }
  if (!sample_weight.defined()) return float_mask;
  auto [m, w] = models::detail::squeeze_or_expand_to_same_rank(float_mask, ops::cast(sample_weight, dtype));
  return w * m;
}

Tensor reduce_weighted_values(const Tensor& values, const Tensor& sample_weight, const Tensor& mask,
                              const std::string& reduction, const std::string& owner) {
  check_reduction(reduction, owner);
  Tensor weighted = values;
  Tensor weight = apply_mask(sample_weight, mask, values.dtype(), reduction);
  if (weight.defined()) {
    check(is_floating(weight.dtype()) || weight.dtype() == DType::i64 || weight.dtype() == DType::boolean,
          "{}: sample_weight must be numeric, got {}", owner, weight.dtype());
    weight = weight.dtype() == values.dtype() ? weight : ops::cast(weight, values.dtype());
    auto [v, w] = models::detail::squeeze_or_expand_to_same_rank(values, weight);
    w = align_sample_weight(v, w);
    check(broadcasts_to(w.shape(), v.shape()),
          "{}: sample_weight of shape {} does not broadcast against the per-sample losses of shape {}; give one "
          "weight per sample ([{}]) or per value",
          owner, weight.shape(), values.shape(), values.ndim() > 0 ? values.shape()[0] : 1);
    weighted = v * w;
    weight = w;
  }
  if (reduction == "none" || weighted.ndim() == 0 || (weighted.ndim() == 1 && weighted.shape()[0] == 0))
    return weighted;
  const Tensor sum = ops::sum(weighted, {}, false);
  if (reduction == "sum") return sum;
  const Tensor divisor = reduction == "mean_with_sample_weight" && sample_weight.defined()
                             ? ops::sum(ops::broadcast_to(weight, weighted.shape()), {}, false)
                             : Tensor::scalar(double(weighted.numel()), sum.dtype());
  return divide_no_nan(sum, divisor);
}

Loss::Loss(LossFunction fn, std::string name, std::string reduction, std::string class_name, LossConfig config)
    : fn_(std::move(fn)),
      name_(std::move(name)),
      reduction_(std::move(reduction)),
      class_name_(std::move(class_name)),
      config_(std::move(config)) {
  check(static_cast<bool>(fn_), "Loss '{}': the loss function is empty", name_);
  check_reduction(reduction_, fmt::format("Loss '{}'", name_));
}

Tensor Loss::operator()(const Tensor& y_true, const Tensor& y_pred) const { return (*this)(y_true, y_pred, Tensor()); }

Tensor Loss::operator()(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) const {
  const Tensor values = fn_(y_true, y_pred);
  const Tensor mask = y_pred.keras_mask();
  check(!mask.defined() || mask.shape() == values.shape(),
        "{}: y_pred {} carries a Keras mask of shape {}, but the loss gives values of shape {}; a mask must cover "
        "the loss's values (one per timestep)",
        name_, y_pred.shape(), mask.defined() ? mask.shape() : Shape{}, values.shape());
  return reduce_weighted_values(values, sample_weight, mask, reduction_, name_);
}

}  // namespace loom::losses
