#include "layers/merging/minimum.hpp"

#include "framework/ops/ops.hpp"

namespace loom::layers {

Minimum::Minimum(MinimumOptions options) : Merge("minimum", options.name) {}

Tensor Minimum::merge(const std::vector<Tensor>& inputs) {
  return merge_with_masks(inputs, [](const Tensor& a, const Tensor& b) { return ops::minimum(a, b); });
}

}  // namespace loom::layers
