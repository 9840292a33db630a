#include "layers/merging/subtract.hpp"

#include "framework/ops/ops.hpp"

namespace loom::layers {

Subtract::Subtract(SubtractOptions options) : Merge("subtract", options.name) {}

Tensor Subtract::merge(const std::vector<Tensor>& inputs) { return inputs[0] - inputs[1]; }

}  // namespace loom::layers
