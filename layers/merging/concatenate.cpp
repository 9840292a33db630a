#include "layers/merging/concatenate.hpp"

#include <algorithm>

#include "framework/ops/ops.hpp"

namespace loom::layers {

Concatenate::Concatenate(ConcatenateOptions options) : Merge("concatenate", options.name), axis_(options.axis) {}

Shape Concatenate::compute_output_shape(const std::vector<Shape>& input_shapes) const {
  check(input_shapes.size() >= min_inputs(), "{}: expected a list of at least one input, got none", name());
  const std::size_t rank = input_shapes[0].size();
  for (const auto& s : input_shapes)
    check(s.size() == rank, "{}: expected inputs of one rank, got shapes {}", name(), input_shapes);
  const auto axis = std::size_t(normalize_axis(axis_, std::int64_t(rank), name()));
  Shape out = input_shapes[0];
  for (std::size_t k = 1; k < input_shapes.size(); ++k) {
    const Shape& s = input_shapes[k];
    for (std::size_t i = 0; i < rank; ++i) {
      if (i == axis) continue;
      check(out[i] == -1 || s[i] == -1 || out[i] == s[i],
            "{}: expected inputs with matching shapes except for the concatenation axis {}, got shapes {}", name(),
            axis_, input_shapes);
      if (out[i] == -1) out[i] = s[i];
    }
    out[axis] = out[axis] == -1 || s[axis] == -1 ? -1 : out[axis] + s[axis];
  }
  return out;
}

Tensor Concatenate::merge(const std::vector<Tensor>& inputs) { return ops::concat(inputs, axis_); }

Tensor Concatenate::compute_mask(const std::vector<Tensor>& inputs, const std::vector<Tensor>& masks) const {
  check(masks.size() == inputs.size(), "{}: compute_mask got {} masks for {} inputs", name(), masks.size(),
        inputs.size());
  if (std::none_of(masks.begin(), masks.end(), [](const Tensor& m) { return m.defined(); })) return Tensor();
  std::vector<Tensor> full;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    const Tensor& m = masks[i];
    if (!m.defined()) {
      full.push_back(Tensor::ones(x.shape(), DType::boolean));
      continue;
    }
    check(m.dtype() == DType::boolean, "{}: a mask must be boolean, got {} of shape {}", name(), m.dtype(), m.shape());
    if (m.ndim() < x.ndim()) {
      Shape expanded = m.shape();
      expanded.push_back(1);
      check(broadcasts_to(expanded, x.shape()),
            "{}: the mask of input {} has shape {}, which does not fit the input's shape {} (expected the input's "
            "shape without its last axis)",
            name(), i, m.shape(), x.shape());
      full.push_back(ops::broadcast_to(ops::expand_dims(m, -1), x.shape()));
    } else {
      check(m.shape() == x.shape(), "{}: the mask of input {} has shape {}, which does not fit the input's shape {}",
            name(), i, m.shape(), x.shape());
      full.push_back(m);
    }
  }
  return any_last_axis(ops::concat(full, axis_));
}

}  // namespace loom::layers
