#include "layers/reshaping/reshape.hpp"

#include <algorithm>

#include "framework/ops/ops.hpp"

namespace loom::layers {

Reshape::Reshape(Shape target_shape, ReshapeOptions options)
    : Layer("reshape", options.name), target_shape_(std::move(target_shape)) {
  for (auto d : target_shape_)
    check(d > 0 || d == -1, "{}: target_shape {} must hold positive sizes and at most one -1", name(), target_shape_);
  check(std::count(target_shape_.begin(), target_shape_.end(), -1) <= 1, "{}: target_shape {} has more than one -1",
        name(), target_shape_);
}

Shape Reshape::compute_output_shape(const Shape& input_shape) const {
  check(!input_shape.empty(), "{}: expected an input with a batch axis, got a scalar", name());
  // A sample size not known yet (-1 after the batch axis, from an Input) leaves -1 in the target unknown too.
  if (std::any_of(input_shape.begin() + 1, input_shape.end(), [](std::int64_t d) { return d < 0; })) {
    Shape out{input_shape[0]};
    out.insert(out.end(), target_shape_.begin(), target_shape_.end());
    return out;
  }
  const std::int64_t sample = numel(Shape(input_shape.begin() + 1, input_shape.end()));
  std::int64_t known = 1;
  for (auto d : target_shape_)
    if (d != -1) known *= d;
  const bool inferred = std::count(target_shape_.begin(), target_shape_.end(), -1) == 1;
  check(inferred ? sample % known == 0 : sample == known,
        "{}: cannot reshape an input of shape {} ({} values per sample) to target_shape {}", name(), input_shape,
        sample, target_shape_);
  Shape out{input_shape[0]};
  for (auto d : target_shape_) out.push_back(d == -1 ? sample / known : d);
  return out;
}

Tensor Reshape::call(const Tensor& x, bool) { return ops::reshape(x, compute_output_shape(x.shape())); }

}  // namespace loom::layers
