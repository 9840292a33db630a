#include "layers/merging/add.hpp"

#include "framework/ops/ops.hpp"

namespace loom::layers {

Add::Add(AddOptions options) : Merge("add", options.name) {}

Tensor Add::merge(const std::vector<Tensor>& inputs) {
  Tensor sum = inputs[0];
  for (std::size_t i = 1; i < inputs.size(); ++i) sum = sum + inputs[i];
  return sum;
}

}  // namespace loom::layers
