#include "layers/normalization/layer_normalization.hpp"

#include "framework/ops/ops.hpp"
#include "layers/normalization/detail/input_checks.hpp"

namespace loom::layers {

LayerNormalization::LayerNormalization(LayerNormalizationOptions options)
    : Layer("layer_normalization", options.name), options_(std::move(options)) {
  check(!options_.axis.empty(), "{}: axis must name at least one axis", name());
  check(options_.epsilon > 0.0, "{}: epsilon must be positive, got {}", name(), options_.epsilon);
}

void LayerNormalization::build(const Shape& input_shape) {
  axes_ = resolve_axes(options_.axis, std::int64_t(input_shape.size()), name());
  built_shape_ = input_shape;
  const Shape shape = dims_at(input_shape, axes_);
  // Keras: rms_scaling always has gamma and never beta.
  if (options_.scale || options_.rms_scaling) gamma_ = add_weight("gamma", shape, options_.gamma_initializer);
  if (options_.center && !options_.rms_scaling) beta_ = add_weight("beta", shape, options_.beta_initializer);
}

Tensor LayerNormalization::call(const Tensor& x, bool) {
  check_input_matches_build(x, built_shape_, axes_, dtype(), name());
  const Tensor gamma = gamma_.defined() ? gamma_.value() : Tensor();
  const Tensor beta = beta_.defined() ? beta_.value() : Tensor();
  return ops::layer_norm(x, gamma, beta, axes_, options_.epsilon, options_.rms_scaling);
}

}  // namespace loom::layers
