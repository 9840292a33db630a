#include "layers/pooling/global_average_pooling1d.hpp"

#include <vector>

#include "framework/graph/symbolic.hpp"
#include "framework/ops/ops.hpp"

namespace loom::layers {

GlobalAveragePooling1D::GlobalAveragePooling1D(GlobalAveragePooling1DOptions options)
    : BaseGlobalPooling("global_average_pooling1d", options.name, 1, Reduction::mean, options.data_format,
                        options.keepdims) {}

Tensor GlobalAveragePooling1D::compute_mask(const Tensor&, const Tensor&) const { return Tensor(); }

Tensor GlobalAveragePooling1D::operator()(const Tensor& x, const Tensor& mask, bool training) & {
  return run_with_mask(x, mask, training, nullptr);
}

Tensor GlobalAveragePooling1D::operator()(const Tensor& x, const Tensor& mask, bool training) && {
  if (!graph::any_symbolic(x, mask)) return run_with_mask(x, mask, training, nullptr);
  std::shared_ptr<Layer> owned = std::move(*this).move_into_shared();
  auto& self = static_cast<GlobalAveragePooling1D&>(*owned);
  return self.run_with_mask(x, mask, training, std::move(owned));
}

Tensor GlobalAveragePooling1D::run_with_mask(const Tensor& x, const Tensor& mask, bool training,
                                             std::shared_ptr<Layer> owner) {
  if (!mask.defined() && !owner) return (*this)(x, training);
  check(x.defined(), "{}: the input is undefined", name());
  maybe_build(x.shape(), is_floating(x.dtype()) ? x.dtype() : DType::f32);
  if (graph::any_symbolic(x, mask)) {
    compute_output_shape(x.shape());
    const bool masked = mask.defined();
    auto call = [masked](Layer& layer, const std::vector<Tensor>& v, bool t) {
      auto& self = static_cast<GlobalAveragePooling1D&>(layer);
      return std::vector<Tensor>{masked ? self(v[0], v[1], t) : self(v[0], t)};
    };
    return record_call(masked ? std::vector<Tensor>{x, mask} : std::vector<Tensor>{x}, call, std::move(owner))
        .front();
  }
  const Tensor y = call_on_data(x, mask, training);
  note_output(y);
  return y;
}

Tensor GlobalAveragePooling1D::call_with_mask(const Tensor& x, const Tensor& mask, bool) {
  check_input(x);
  const std::int64_t steps_axis = spatial_axes()[0];
  const Shape expected = {x.shape()[0], x.shape()[std::size_t(steps_axis)]};
  check(mask.shape() == expected, "{}: expected a mask of shape [batch, steps] = {} for the input of shape {}, got {}",
        name(), expected, x.shape(), mask.shape());
  // Keras: where(mask, x, 0) summed over the steps, divided by the number of unmasked steps.
  const Tensor keep = ops::expand_dims(ops::cast(mask, DType::boolean), steps_axis == 1 ? 2 : 1);
  const Tensor total = ops::sum(ops::where(keep, x, Tensor::scalar(0.0, x.dtype())), {steps_axis}, keepdims());
  const Tensor count = ops::sum(ops::cast(keep, x.dtype()), {steps_axis}, keepdims());
  return total / count;
}

}  // namespace loom::layers
