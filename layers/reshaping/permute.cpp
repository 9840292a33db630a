#include "layers/reshaping/permute.hpp"

#include <algorithm>
#include <numeric>

#include "framework/ops/ops.hpp"

namespace loom::layers {

Permute::Permute(std::vector<std::int64_t> dims, PermuteOptions options)
    : Layer("permute", options.name), dims_(std::move(dims)) {
  std::vector<std::int64_t> sorted = dims_, expected(dims_.size());
  std::sort(sorted.begin(), sorted.end());
  std::iota(expected.begin(), expected.end(), 1);
  check(sorted == expected,
        "{}: dims must be a permutation of 1..{} (consecutive axes numbered from 1; the batch axis 0 stays), got {}",
        name(), dims_.size(), dims_);
}

Shape Permute::compute_output_shape(const Shape& input_shape) const {
  check(input_shape.size() == dims_.size() + 1, "{}: dims {} permute {} axes, so the input must have rank {}; got {}",
        name(), dims_, dims_.size(), dims_.size() + 1, input_shape);
  Shape out = {input_shape[0]};
  for (auto d : dims_) out.push_back(input_shape[std::size_t(d)]);
  return out;
}

Tensor Permute::call(const Tensor& x, bool) {
  compute_output_shape(x.shape());
  std::vector<std::int64_t> axes = {0};
  axes.insert(axes.end(), dims_.begin(), dims_.end());
  return ops::permute(x, axes);
}

}  // namespace loom::layers
