#pragma once
// AxisList: one axis or several, for options that take Keras's "int or list" (LayerNormalization and
// RMSNormalization's axis). Both `.axis = -1` and `.axis = {1, 2}` compile. Also the input check that the
// normalization layers share.
#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <utility>
#include <vector>

#include "framework/error.hpp"
#include "framework/shape.hpp"
#include "framework/tensor.hpp"

namespace loom::layers {

struct AxisList {
  AxisList(std::int64_t axis) : axes{axis} {}  // NOLINT: an int converts, as in Keras
  AxisList(std::initializer_list<std::int64_t> list) : axes(list) {}
  AxisList(std::vector<std::int64_t> list) : axes(std::move(list)) {}  // NOLINT
  std::vector<std::int64_t> axes;

  /// The axes of an input of this rank, non-negative and sorted; an empty list, an axis out of range or a
  /// repeated one is a loom::Error naming `layer`.
  std::vector<std::int64_t> resolve(std::int64_t rank, std::string_view layer) const {
    check(!axes.empty(), "{}: axis must name at least one axis", layer);
    return normalize_axes(axes, rank, layer);
  }
};

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
