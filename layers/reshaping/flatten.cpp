#include "layers/reshaping/flatten.hpp"

#include <numeric>

#include "framework/ops/ops.hpp"

namespace loom::layers {

Flatten::Flatten(FlattenOptions options)
    : Layer("flatten", options.name), channels_first_(options.data_format == "channels_first") {
  check(options.data_format == "channels_last" || channels_first_,
        "{}: data_format must be channels_last or channels_first, got '{}'", name(), options.data_format);
}

Shape Flatten::compute_output_shape(const Shape& input_shape) const {
  check(!input_shape.empty(), "{}: expected an input of rank >= 1 (the batch axis first), got a scalar", name());
  return {input_shape[0], numel(Shape(input_shape.begin() + 1, input_shape.end()))};
}

Tensor Flatten::call(const Tensor& x, bool) {
  const Shape out = compute_output_shape(x.shape());
  if (!channels_first_ || x.ndim() < 3) return ops::reshape(x, out);
  std::vector<std::int64_t> axes(std::size_t(x.ndim()));
  std::iota(axes.begin() + 1, axes.end() - 1, 2);  // (0, 2, 3, ..., 1)
  axes.back() = 1;
  return ops::reshape(ops::permute(x, axes), out);
}

}  // namespace loom::layers
