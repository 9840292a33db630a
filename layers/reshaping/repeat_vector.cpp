#include "layers/reshaping/repeat_vector.hpp"

#include "framework/ops/ops.hpp"

namespace loom::layers {

RepeatVector::RepeatVector(std::int64_t n, RepeatVectorOptions options) : Layer("repeat_vector", options.name), n_(n) {
  check(n_ > 0, "{}: n must be a positive integer, got {}", name(), n_);
}

Shape RepeatVector::compute_output_shape(const Shape& input_shape) const {
  check(input_shape.size() == 2, "{}: expected a rank-2 input [batch, features], got shape {}", name(), input_shape);
  return {input_shape[0], n_, input_shape[1]};
}

Tensor RepeatVector::call(const Tensor& x, bool) {
  const Shape out = compute_output_shape(x.shape());
  return ops::contiguous(ops::broadcast_to(ops::expand_dims(x, 1), out));
}

}  // namespace loom::layers
