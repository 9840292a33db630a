#include "layers/merging/average.hpp"

#include "framework/ops/ops.hpp"

namespace loom::layers {

Average::Average(AverageOptions options) : Merge("average", options.name) {}

Tensor Average::merge(const std::vector<Tensor>& inputs) {
  Tensor sum = inputs[0];
  for (std::size_t i = 1; i < inputs.size(); ++i) sum = sum + inputs[i];
  return sum / double(inputs.size());
}

}  // namespace loom::layers
