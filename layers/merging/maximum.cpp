#include "layers/merging/maximum.hpp"

#include "framework/ops/ops.hpp"

namespace loom::layers {

Maximum::Maximum(MaximumOptions options) : Merge("maximum", options.name) {}

Tensor Maximum::merge(const std::vector<Tensor>& inputs) {
  return merge_with_masks(inputs, [](const Tensor& a, const Tensor& b) { return ops::maximum(a, b); });
}

}  // namespace loom::layers
