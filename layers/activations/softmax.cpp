#include "layers/activations/softmax.hpp"

#include "framework/graph/symbolic.hpp"
#include "framework/ops/ops.hpp"

namespace loom::layers {

Softmax::Softmax(SoftmaxOptions options) : Layer("softmax", options.name), axis_(std::move(options.axis)) {
  check(!axis_.empty(), "{}: axis must name at least one axis", name());
}

Tensor Softmax::operator()(const Tensor& x, const Tensor& mask, bool training) & {
  return run_with_mask(x, mask, training, nullptr);
}

Tensor Softmax::operator()(const Tensor& x, const Tensor& mask, bool training) && {
  if (!graph::any_symbolic(x, mask)) return run_with_mask(x, mask, training, nullptr);
  std::shared_ptr<Layer> owned = std::move(*this).move_into_shared();
  auto& self = static_cast<Softmax&>(*owned);
  return self.run_with_mask(x, mask, training, std::move(owned));
}

Tensor Softmax::run_with_mask(const Tensor& x, const Tensor& mask, bool training, std::shared_ptr<Layer> owner) {
  if (!mask.defined() && !owner) return (*this)(x, training);
  check(x.defined(), "{}: the input is undefined", name());
  maybe_build(x.shape(), is_floating(x.dtype()) ? x.dtype() : DType::f32);
  if (graph::any_symbolic(x, mask)) {
    const bool masked = mask.defined();
    auto call = [masked](Layer& layer, const std::vector<Tensor>& v, bool t) {
      auto& self = static_cast<Softmax&>(layer);
      return std::vector<Tensor>{masked ? self(v[0], v[1], t) : self(v[0], t)};
    };
    return record_call(masked ? std::vector<Tensor>{x, mask} : std::vector<Tensor>{x}, call, std::move(owner))
        .front();
  }
  const Tensor y = call_on_data(x, mask, training);
  note_output(y);
  // Keras sets the call's mask on the output (its compute_mask passes the mask on).
  return y.with_keras_mask(keep_mask(x, mask));
}

Tensor Softmax::keep_mask(const Tensor& x, const Tensor& mask) const {
  check(mask.ndim() <= x.ndim() && broadcasts_to(mask.shape(), x.shape()),
        "{}: the mask must broadcast to the input (at most its rank, each dimension 1 or the input's, "
        "right-aligned); got input {} and mask {}",
        name(), x.shape(), mask.shape());
  if (mask.dtype() == DType::boolean) return mask;
  return ops::greater(ops::cast(mask, DType::f64), Tensor::scalar(0.5, DType::f64));
}

Tensor Softmax::call(const Tensor& x, bool) {
  check(is_floating(x.dtype()), "{}: expected a float32 or float64 input, got {} of shape {}", name(), x.dtype(),
        x.shape());
  const std::vector<std::int64_t> axes = normalize_axes(axis_, x.ndim(), name());
  if (axes.size() == 1) return ops::softmax(x, axes[0]);
  const Axes joint(axes);
  return ops::exp(x - ops::logsumexp(x, joint, /*keepdims=*/true));
}

Tensor Softmax::call_with_mask(const Tensor& x, const Tensor& mask, bool training) {
  check(is_floating(x.dtype()), "{}: expected a float32 or float64 input, got {} of shape {}", name(), x.dtype(),
        x.shape());
  const Tensor keep = keep_mask(x, mask);
  // Keras 3: where(mask, x, -1e9) (its _large_negative_number for float32 and float64), then where(mask, y, 0).
  const Tensor y = call(ops::where(keep, x, Tensor::scalar(-1e9, x.dtype())), training);
  return ops::where(keep, y, Tensor::scalar(0.0, y.dtype()));
}

}  // namespace loom::layers
