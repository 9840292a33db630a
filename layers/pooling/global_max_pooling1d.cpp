#include "layers/pooling/global_max_pooling1d.hpp"

#include "framework/ops/ops.hpp"
#include "layers/pooling/detail/global_pooling_1d.hpp"

namespace loom::layers {

GlobalMaxPooling1D::GlobalMaxPooling1D(GlobalMaxPooling1DOptions options)
    : Layer("global_max_pooling1d", options.name),
      steps_axis_(detail::steps_axis(detail::standardize_data_format(options.data_format, name()))),
      keepdims_(options.keepdims) {}

Shape GlobalMaxPooling1D::compute_output_shape(const Shape& input_shape) const {
  return detail::global_pooling_1d_shape(input_shape, steps_axis_, keepdims_, name());
}

Tensor GlobalMaxPooling1D::call(const Tensor& x, bool) {
  compute_output_shape(x.shape());
  check(is_floating(x.dtype()), "{}: expected a float32 or float64 input, got {} of shape {}", name(), x.dtype(),
        x.shape());
  return ops::max(x, {steps_axis_}, keepdims_);
}

}  // namespace loom::layers
