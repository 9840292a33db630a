#pragma once
// Shape and strides (in elements, row-major) and the helpers every op uses to validate and broadcast them.
#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <utility>
#include <vector>

namespace loom {

using Shape = std::vector<std::int64_t>;
/// The most dimensions a tensor may have: NumPy's limit (NPY_MAXDIMS), checked by the factories, views and readers.
inline constexpr std::int64_t kMaxRank = 64;
using Strides = std::vector<std::int64_t>;

/// The one axis-list type: one axis or several, for Keras's "int or list" (ops::mean(x, {0, 2}), a
/// reduction's `{}` = every axis, LayerNormalization's `.axis = -1` or `.axis = {1, 2}`). Negative axes count
/// from the end.
struct Axes : std::vector<std::int64_t> {
  Axes() = default;
  Axes(std::int64_t axis) : std::vector<std::int64_t>{axis} {}  // NOLINT: an int converts, as in Keras
  Axes(std::initializer_list<std::int64_t> axes) : std::vector<std::int64_t>(axes) {}
  Axes(std::vector<std::int64_t> axes) : std::vector<std::int64_t>(std::move(axes)) {}  // NOLINT
};

/// Product of the dimensions; 1 for a scalar (rank 0).
std::int64_t numel(const Shape& shape);
/// False when the product of the dimensions times `element_size` does not fit in int64 (dimensions >= 0), a 0
/// counted as 1 so that the strides of an empty tensor fit too: views and allocations that would wrap around.
bool fits_in_int64(const Shape& shape, std::int64_t element_size = 1);
/// a + b and a * b, or a loom::Error "<what>: ... does not fit in a 64-bit size": the one checked arithmetic for
/// sizes, strides, offsets and bands computed from a user's numbers.
std::int64_t checked_add(std::int64_t a, std::int64_t b, std::string_view what);
std::int64_t checked_mul(std::int64_t a, std::int64_t b, std::string_view what);
/// The row-major multi-index [i, j, ...] of element `flat` of a tensor of this shape.
std::vector<std::int64_t> unravel_index(std::int64_t flat, const Shape& shape);
/// Row-major strides of a contiguous tensor of this shape.
Strides contiguous_strides(const Shape& shape);
/// NumPy broadcasting of two shapes; throws loom::Error naming `op` when they are incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op);
/// True when `shape` broadcasts to exactly `target` (no larger rank; each trailing dimension 1 or equal).
bool broadcasts_to(const Shape& shape, const Shape& target);
/// Maps a possibly negative axis into [0, rank); throws loom::Error naming `op` when out of range.
std::int64_t normalize_axis(std::int64_t axis, std::int64_t rank, std::string_view op);
/// Normalizes a list of axes (empty = all axes), sorted, rejecting duplicates.
std::vector<std::int64_t> normalize_axes(const std::vector<std::int64_t>& axes, std::int64_t rank,
                                         std::string_view op);

}  // namespace loom
