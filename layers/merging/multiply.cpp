#include "layers/merging/multiply.hpp"

#include <algorithm>

#include "framework/ops/ops.hpp"

namespace loom::layers {

Multiply::Multiply(MultiplyOptions options) : Merge("multiply", options.name) {}

Tensor Multiply::merge(const std::vector<Tensor>& inputs) {
  // Keras's Multiply._merge_function.
  const bool has_output_mask =
      std::all_of(inputs.begin(), inputs.end(), [](const Tensor& x) { return x.keras_mask().defined(); });
  Tensor output, output_mask;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    Tensor x = inputs[i];
    if (const Tensor mask = mask_over(x, i); mask.defined()) {
      x = ops::where(mask, x, Tensor::scalar(1.0, x.dtype()));
      if (has_output_mask) output_mask = output_mask.defined() ? ops::logical_or(output_mask, mask) : mask;
    }
    output = output.defined() ? output * x : x;
  }
  if (!has_output_mask) return output;
  output = ops::where(output_mask, output, Tensor::scalar(0.0, output.dtype()));
  return output.with_keras_mask(any_last_axis(output_mask));
}

}  // namespace loom::layers
