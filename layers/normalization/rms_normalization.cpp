#include "layers/normalization/rms_normalization.hpp"

#include "framework/ops/ops.hpp"
#include "layers/normalization/detail/input_checks.hpp"

namespace loom::layers {

RMSNormalization::RMSNormalization(RMSNormalizationOptions options)
    : Layer("rms_normalization", options.name), options_(std::move(options)) {
  check(!options_.axis.empty(), "{}: axis must name at least one axis", name());
  check(options_.epsilon > 0.0, "{}: epsilon must be positive, got {}", name(), options_.epsilon);
}

void RMSNormalization::build(const Shape& input_shape) {
  axes_ = resolve_axes(options_.axis, std::int64_t(input_shape.size()), name());
  built_shape_ = input_shape;
  scale_ = add_weight("scale", dims_at(input_shape, axes_), "ones");
}

Tensor RMSNormalization::call(const Tensor& x, bool) {
  check_input_matches_build(x, built_shape_, axes_, dtype(), name());
  return ops::rms_norm(x, scale_, axes_, options_.epsilon);
}

}  // namespace loom::layers
