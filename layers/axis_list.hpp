#pragma once
// AxisList: one axis or several, for options that take Keras's "int or list" (LayerNormalization and
// RMSNormalization's axis). Both `.axis = -1` and `.axis = {1, 2}` compile.
#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <utility>
#include <vector>

#include "framework/error.hpp"
#include "framework/shape.hpp"

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

}  // namespace loom::layers
