#pragma once
// Walking strided arrays: the one loop behind copies, gathers, conversions, printing, reductions, softmax and
// broadcasting elementwise kernels. A walk simplifies the geometry once (drops size-1 dimensions, merges
// dimensions contiguous in every stride set), then hands out whole innermost runs, so a contiguous or
// row-contiguous walk becomes a few long loops. Internal: included by .cpp files and kernel headers only.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "framework/tensor/shape.hpp"

namespace loom {

namespace detail {

/// A row-major walk over `shape` carrying one storage position per stride set (starting at 0). Calling it
/// with run(pos, step, n) visits each innermost run: element j of the run is at pos[k] + j * step[k] in set
/// k. Size-1 dimensions are dropped and dimensions contiguous in every set are merged, so runs are long.
/// Built once, a walk can be replayed (e.g. once per slab) at no further set-up cost.
template <std::size_t K>
class RunWalk {
 public:
  /// memory_order: visit in the storage order of the first stride set (largest stride outermost) instead of
  /// row-major, for order-free work such as sums over a transposed view.
  RunWalk(const Shape& shape, const std::array<const Strides*, K>& strides, bool memory_order = false)
      : empty_(numel(shape) == 0) {
    const auto add = [&](std::size_t d) {
      if (shape[d] == 1) return;
      bool merge = !dims_.empty();
      for (std::size_t k = 0; k < K; ++k) merge = merge && st_[k].back() == (*strides[k])[d] * shape[d];
      if (merge) {
        dims_.back() *= shape[d];
        for (std::size_t k = 0; k < K; ++k) st_[k].back() = (*strides[k])[d];
      } else {
        dims_.push_back(shape[d]);
        for (std::size_t k = 0; k < K; ++k) st_[k].push_back((*strides[k])[d]);
      }
    };
    if (!memory_order) {
      for (std::size_t d = 0; d < shape.size(); ++d) add(d);
      return;
    }
    std::vector<std::size_t> order(shape.size());
    for (std::size_t d = 0; d < order.size(); ++d) order[d] = d;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return std::abs((*strides[0])[a]) > std::abs((*strides[0])[b]);
    });
    for (std::size_t d : order) add(d);
  }

  /// True when the shape holds no element: the walk visits nothing.
  bool empty() const { return empty_; }
  /// The simplified geometry, outermost first: the sizes left after dropping and merging (none for a single
  /// element), and stride set k's strides for them. For kernels that walk it their own way (tiled copies).
  const Shape& dims() const { return dims_; }
  const Strides& strides(std::size_t k) const { return st_[k]; }

  template <class Run>
  void operator()(Run&& run) const {
    if (empty_) return;
    std::array<std::int64_t, K> pos{}, step{};
    if (dims_.empty()) {
      run(pos, step, std::int64_t{1});
      return;
    }
    const std::size_t rank = dims_.size();
    for (std::size_t k = 0; k < K; ++k) step[k] = st_[k][rank - 1];
    const std::int64_t inner = dims_[rank - 1];
    if (rank == 1) {
      run(pos, step, inner);
      return;
    }
    const std::int64_t runs = numel(dims_) / inner;
    std::vector<std::int64_t> index(rank, 0);
    for (std::int64_t r = 0; r < runs; ++r) {
      run(pos, step, inner);
      for (std::size_t d = rank - 1; d-- > 0;) {  // odometer over the outer dimensions
        for (std::size_t k = 0; k < K; ++k) pos[k] += st_[k][d];
        if (++index[d] < dims_[d]) break;
        for (std::size_t k = 0; k < K; ++k) pos[k] -= st_[k][d] * dims_[d];
        index[d] = 0;
      }
    }
  }

 private:
  bool empty_;
  Shape dims_;
  std::array<Strides, K> st_;
};

template <std::size_t K, class Run>
void for_each_run(const Shape& shape, const std::array<const Strides*, K>& strides, Run&& run,
                  bool memory_order = false) {
  RunWalk<K>(shape, strides, memory_order)(run);
}

/// acc[o] = combine(acc[o], x) for every element x of `in`, o being its position in the walk's second
/// stride set (the output's strides, 0 along reduced axes). `merge(a, b)` joins two partial results and
/// `identity` starts one: a run reduced to a single output is split over four independent accumulators so
/// the loop is not bound by the latency of one chain of adds.
template <class Acc, class T, class Combine, class Merge>
void reduce_into(Acc* acc, const T* in, const RunWalk<2>& walk, Acc identity, Combine&& combine, Merge&& merge) {
  walk([&](const auto& pos, const auto& step, std::int64_t n) {
    const T* x = in + pos[0];
    const std::int64_t s = step[0];
    if (step[1] != 0) {
      for (std::int64_t j = 0; j < n; ++j) {
        Acc& a = acc[std::size_t(pos[1] + j * step[1])];
        a = combine(a, x[j * s]);
      }
      return;
    }
    Acc l0 = identity, l1 = identity, l2 = identity, l3 = identity;
    std::int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
      l0 = combine(l0, x[j * s]);
      l1 = combine(l1, x[(j + 1) * s]);
      l2 = combine(l2, x[(j + 2) * s]);
      l3 = combine(l3, x[(j + 3) * s]);
    }
    for (; j < n; ++j) l0 = combine(l0, x[j * s]);
    Acc& a = acc[std::size_t(pos[1])];
    a = merge(a, merge(merge(l0, l1), merge(l2, l3)));
  });
}

template <class Acc, class T, class Combine, class Merge>
void reduce_into(std::vector<Acc>& acc, const T* in, const RunWalk<2>& walk, Acc identity, Combine&& combine,
                 Merge&& merge) {
  reduce_into(acc.data(), in, walk, identity, combine, merge);
}

/// The same over `in` of this shape and strides, walked in memory order.
template <class Acc, class T, class Combine, class Merge>
void reduce_into(std::vector<Acc>& acc, const T* in, const Shape& shape, const Strides& in_strides,
                 const Strides& to_out, Acc identity, Combine&& combine, Merge&& merge) {
  reduce_into(acc, in, RunWalk<2>(shape, {&in_strides, &to_out}, /*memory_order=*/true), identity, combine, merge);
}

}  // namespace detail

/// Calls visit(i, storage_index) for every element, i counting 0..numel-1 in row-major order and
/// storage_index = offset + sum(index[d] * strides[d]). A row-major walk keeps row-major order when it merges
/// dimensions, so i is simply counted along its runs.
template <class Visit>
void for_each_strided(const Shape& shape, const Strides& strides, std::int64_t offset, Visit&& visit) {
  std::int64_t i = 0;
  detail::RunWalk<1>(shape, {&strides})([&](const auto& pos, const auto& step, std::int64_t n) {
    const std::int64_t at = offset + pos[0];
    for (std::int64_t j = 0; j < n; ++j) visit(i + j, at + j * step[0]);
    i += n;
  });
}

}  // namespace loom
