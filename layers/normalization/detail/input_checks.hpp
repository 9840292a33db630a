#pragma once
// The checks the normalization layers share: their axis options resolved against an input's rank, and an
// input checked against the shape the layer was built for. Not installed.
#include <cstdint>
#include <string_view>
#include <vector>

#include "framework/tensor/error.hpp"
#include "framework/tensor/shape.hpp"
#include "framework/tensor/tensor.hpp"

namespace loom::layers {

/// The axes of an input of this rank, non-negative and sorted; an empty list, an axis out of range or a
/// repeated one is a loom::Error naming `layer`.
inline std::vector<std::int64_t> resolve_axes(const Axes& axes, std::int64_t rank, std::string_view layer) {
  check(!axes.empty(), "{}: axis must name at least one axis", layer);
  return normalize_axes(axes, rank, layer);
}

/// The dimensions of `shape` at `axes` (the shape of a per-feature weight).
inline Shape dims_at(const Shape& shape, const std::vector<std::int64_t>& axes) {
  Shape dims;
  for (auto a : axes) dims.push_back(shape[std::size_t(a)]);
  return dims;
}

/// A normalization layer's weights fit only inputs of the built rank, with the built dimensions at its
/// axes, and of its dtype: anything else is a loom::Error naming `layer`.
inline void check_input_matches_build(const Tensor& x, const Shape& built_shape, const std::vector<std::int64_t>& axes,
                                      DType dtype, std::string_view layer) {
  check(x.ndim() == std::int64_t(built_shape.size()) && dims_at(x.shape(), axes) == dims_at(built_shape, axes),
        "{}: expected an input of rank {} with dimensions {} at axes {} (the layer was built for {}), got {}", layer,
        built_shape.size(), dims_at(built_shape, axes), axes, built_shape, x.shape());
  check(x.dtype() == dtype, "{}: expected a {} input (the dtype the layer was built with), got {} of shape {}", layer,
        dtype, x.dtype(), x.shape());
}

}  // namespace loom::layers
