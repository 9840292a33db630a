#include "layers/core/dense.hpp"

#include "framework/ops/ops.hpp"

namespace loom::layers {

Dense::Dense(std::int64_t units, DenseOptions options)
    : Layer("dense", options.name),
      units_(units),
      options_(std::move(options)),
      activation_(options_.activation.function(name())) {
  check(units > 0, "{}: units must be positive, got {}", name(), units);
  if (options_.dtype) set_dtype_policy(*options_.dtype);
  set_activity_regularizer(options_.activity_regularizer);
}

void Dense::check_input(const Shape& input_shape) const {
  check(input_shape.size() >= 2, "{}: expected an input of rank >= 2 ([batch, ..., features]), got shape {}", name(),
        input_shape);
  if (kernel_.defined())
    check(input_shape.back() == kernel_.shape()[0],
          "{}: expected {} features on the last axis (the kernel is {}), got an input of shape {}", name(),
          kernel_.shape()[0], kernel_.shape(), input_shape);
}

Shape Dense::compute_output_shape(const Shape& input_shape) const {
  check_input(input_shape);
  Shape out = input_shape;
  out.back() = units_;
  return out;
}

void Dense::build(const Shape& input_shape) {
  check_input(input_shape);
  kernel_ = add_weight("kernel", {input_shape.back(), units_}, options_.kernel_initializer, true, std::nullopt,
                       options_.kernel_regularizer, options_.kernel_constraint);
  if (options_.use_bias)
    bias_ = add_weight("bias", {units_}, options_.bias_initializer, true, std::nullopt, options_.bias_regularizer,
                       options_.bias_constraint);
}

Tensor Dense::call(const Tensor& x, bool) {
  check_input(x.shape());
  check(x.dtype() == dtype() || (dtype_policy().mixed_bfloat16 && is_differentiable(x.dtype())),
        "{}: expected a {} input (the dtype of its weights), got {} of shape {}", name(), dtype(), x.dtype(),
        x.shape());
  // One gemm over all leading axes, the bias added inside it.
  return apply_activation(activation_, ops::dense(matmul_operand(x), matmul_operand(kernel_),
                                                  bias_.defined() ? bias_.value() : Tensor()));
}

}  // namespace loom::layers
