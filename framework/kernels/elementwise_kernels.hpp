#pragma once
// Elementwise kernels with NumPy broadcasting: out[i] = f(inputs[i]...) for any number of inputs, each read
// through its own shape and strides (views, 0 strides from broadcast_to), written into a fresh contiguous
// output. A template for the ops' .cpp files:
//
//   Tensor out = Tensor::zeros(broadcast_shapes(a.shape(), b.shape(), "add"), DType::f32);
//   kernels::map_into<float, float, float>(out, [](float x, float y) { return x + y; }, a, b);
//
// Plain loops rather than xtensor assignment: docs/benchmarks.md, "Kernels: plain loops rather than xtensor
// expressions".
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <utility>

#include "framework/kernels/strided.hpp"
#include "framework/runtime/detail/parallel.hpp"
#include "framework/tensor/tensor.hpp"

namespace loom::kernels {

/// `t`'s strides when broadcast to `shape`: 0 along the dimensions it lacks or has of size 1.
inline Strides broadcast_strides(const Tensor& t, const Shape& shape) {
  Strides strides(shape.size(), 0);
  const std::size_t lead = shape.size() - t.shape().size();
  for (std::size_t d = 0; d < t.shape().size(); ++d)
    if (t.shape()[d] != 1) strides[lead + d] = t.strides()[d];
  return strides;
}

/// Elements per piece of parallel work: a piece is about ten microseconds of a memory-bound loop, well
/// above what handing it to a pool thread costs.
inline constexpr std::int64_t kElementwiseGrain = 32768;

namespace detail {

/// How a kernel reads an input of the output's element count: element i of a dense array, or one value for
/// every i (a scalar operand). Two reader types instead of one stride keep the loops vectorizable.
template <class T>
struct DenseReader {
  const T* p;
  T operator[](std::int64_t i) const { return p[i]; }
};
template <class T>
struct ScalarReader {
  T value;
  T operator[](std::int64_t) const { return value; }
};

template <class Fn>
void with_readers(Fn&& fn) {
  fn();
}

/// Calls fn(reader...) with a ScalarReader for each one-element input and a DenseReader for the others.
template <class In0, class... In, class Fn, class Input0, class... Inputs>
void with_readers(Fn&& fn, const Input0& first, const Inputs&... rest) {
  const auto then = [&](auto reader) {
    with_readers<In...>([&](auto... readers) { fn(reader, readers...); }, rest...);
  };
  if (first.numel() == 1) then(ScalarReader<In0>{*first.template data<In0>()});
  else then(DenseReader<In0>{first.template data<In0>()});
}

}  // namespace detail

/// Writes f(inputs[i]...) into `out`, which must be contiguous with the broadcast shape of the inputs.
/// Out is out's element type and In... the inputs' (given explicitly, one per input):
/// map_into<float, bool, float, float>(out, select, condition, a, b). Large outputs are split over the
/// pool's threads (framework/runtime/detail/parallel.hpp); f must therefore be safe to call concurrently.
template <class Out, class... In, class F, class... Inputs>
void map_into(const Tensor& out, F f, const Inputs&... inputs) {
  static_assert(sizeof...(In) == sizeof...(Inputs), "map_into: name one element type per input");
  constexpr std::size_t N = sizeof...(Inputs);
  const std::int64_t n = out.numel();
  if (n == 0) return;
  Out* o = out.data<Out>();
  // With equal element counts, a broadcast-compatible input differs from `out` only by leading size-1
  // dimensions, so a contiguous one is read in the same order as out is written.
  const auto flat = [n](const Tensor& t) { return (t.numel() == n && t.is_contiguous()) || t.numel() == 1; };
  if ((flat(inputs) && ...)) {
    // The hot path (same-shape contiguous operands, maybe with scalars such as x * 2.0): one loop the
    // compiler vectorizes, with no set-up cost, which matters for the many small tensors of a model.
    detail::with_readers<In...>(
        [&](auto... read) {
          parallel::for_ranges(n, kElementwiseGrain, [&](std::int64_t begin, std::int64_t end) {
            for (std::int64_t i = begin; i < end; ++i) o[i] = f(read[i]...);
          });
        },
        inputs...);
    return;
  }
  // General broadcast over strided views: one walk over out and every input (strided.hpp), whose
  // innermost runs are as long as the merged dimensions allow (a bias add [B, T, C] + [C] runs over C).
  // Pieces are ranges of the outermost dimension longer than 1.
  const Shape& shape = out.shape();
  const Strides out_strides = contiguous_strides(shape);
  const std::array<Strides, N> in_strides{broadcast_strides(inputs, shape)...};
  std::array<const Strides*, N + 1> sets{&out_strides};
  for (std::size_t k = 0; k < N; ++k) sets[k + 1] = &in_strides[k];
  const std::tuple<const In*...> base{inputs.template data<In>()...};
  std::size_t split = 0;
  while (shape[split] == 1) ++split;  // some dimension is longer than 1: out has more than one element here
  const std::int64_t inner = n / shape[split];
  parallel::for_ranges(shape[split], std::max<std::int64_t>(1, kElementwiseGrain / inner), [&](std::int64_t begin,
                                                                                               std::int64_t end) {
    Shape piece = shape;
    piece[split] = end - begin;
    loom::detail::for_each_run<N + 1>(piece, sets, [&](const auto& pos, const auto& step, std::int64_t len) {
      [&]<std::size_t... K>(std::index_sequence<K...>) {
        Out* dst = o + begin * out_strides[split] + pos[0];  // out is contiguous: its runs have step 1
        const std::tuple<const In*...> row{std::get<K>(base) + begin * in_strides[K][split] + pos[K + 1]...};
        for (std::int64_t j = 0; j < len; ++j) dst[j] = f(std::get<K>(row)[j * step[K + 1]]...);
      }(std::make_index_sequence<N>{});
    });
  });
}

}  // namespace loom::kernels
