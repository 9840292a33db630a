#include "framework/tensor/shape.hpp"

#include <algorithm>

#include "framework/tensor/error.hpp"

namespace loom {

std::int64_t numel(const Shape& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

bool fits_in_int64(const Shape& shape, std::int64_t element_size) {
  std::int64_t count = element_size;
  for (auto d : shape)
    if (__builtin_mul_overflow(count, std::max<std::int64_t>(d, 1), &count)) return false;
  return true;
}

std::int64_t checked_add(std::int64_t a, std::int64_t b, std::string_view what) {
  std::int64_t sum = 0;
  check(!__builtin_add_overflow(a, b, &sum), "{}: {} + {} does not fit in a 64-bit size", what, a, b);
  return sum;
}

std::int64_t checked_mul(std::int64_t a, std::int64_t b, std::string_view what) {
  std::int64_t product = 0;
  check(!__builtin_mul_overflow(a, b, &product), "{}: {} * {} does not fit in a 64-bit size", what, a, b);
  return product;
}

std::vector<std::int64_t> unravel_index(std::int64_t flat, const Shape& shape) {
  std::vector<std::int64_t> index(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

Strides contiguous_strides(const Shape& shape) {
  Strides strides(shape.size());
  std::int64_t stride = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= std::max<std::int64_t>(shape[i], 1);
  }
  return strides;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op) {
  const std::size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    const std::int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const std::int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    check(da == db || da == 1 || db == 1, "{}: shapes {} and {} cannot be broadcast together (dimension {}: {} vs {})",
          op, a, b, i, da, db);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

bool broadcasts_to(const Shape& shape, const Shape& target) {
  if (shape.size() > target.size()) return false;
  for (std::size_t i = 1; i <= shape.size(); ++i) {
    const std::int64_t d = shape[shape.size() - i];
    if (d != 1 && d != target[target.size() - i]) return false;
  }
  return true;
}

std::int64_t normalize_axis(std::int64_t axis, std::int64_t rank, std::string_view op) {
  check(axis >= -rank && axis < rank, "{}: axis {} is out of range for a tensor of rank {} (expected {} <= axis < {})",
        op, axis, rank, -rank, rank);
  return axis < 0 ? axis + rank : axis;
}

std::vector<std::int64_t> normalize_axes(const std::vector<std::int64_t>& axes, std::int64_t rank,
                                         std::string_view op) {
  std::vector<std::int64_t> out;
  if (axes.empty()) {
    for (std::int64_t i = 0; i < rank; ++i) out.push_back(i);
    return out;
  }
  for (auto axis : axes) out.push_back(normalize_axis(axis, rank, op));
  std::sort(out.begin(), out.end());
  check(std::adjacent_find(out.begin(), out.end()) == out.end(), "{}: repeated axis in {}", op, axes);
  return out;
}

}  // namespace loom
