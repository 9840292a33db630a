#pragma once
// Walking the elements of a strided tensor in row-major order: the one loop behind copies, conversions and
// printing of views.
#include <cstdint>
#include <vector>

#include "framework/shape.hpp"

namespace loom {

/// Calls visit(i, storage_index) for every element, i counting 0..numel-1 in row-major order and
/// storage_index = offset + sum(index[d] * strides[d]).
template <class Visit>
void for_each_strided(const Shape& shape, const Strides& strides, std::int64_t offset, Visit&& visit) {
  const std::int64_t n = numel(shape);
  if (n == 0) return;
  const std::size_t rank = shape.size();
  if (rank == 0) {
    visit(std::int64_t{0}, offset);
    return;
  }
  std::vector<std::int64_t> index(rank, 0);
  std::int64_t position = offset;
  const std::int64_t inner = shape[rank - 1];
  const std::int64_t inner_stride = strides[rank - 1];
  for (std::int64_t i = 0; i < n;) {
    for (std::int64_t j = 0; j < inner; ++j, ++i) visit(i, position + j * inner_stride);
    // advance the outer dimensions like an odometer
    for (std::size_t d = rank - 1; d-- > 0;) {
      position += strides[d];
      if (++index[d] < shape[d]) break;
      position -= strides[d] * shape[d];
      index[d] = 0;
    }
  }
}

}  // namespace loom
