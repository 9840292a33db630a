#pragma once
// Reductions over axes. `axes` empty = all axes; negative axes count from the end; keepdims keeps reduced
// axes as size 1. Inputs may be any strided view. float32 sums accumulate in double. NaN propagates through
// max/min (as NumPy). Reducing over zero elements: sum gives 0, logsumexp -inf; mean, var, max, min, argmax
// and argmin throw (NumPy's mean would warn and return NaN).
#include <cstdint>
#include <vector>

#include "framework/tensor/tensor.hpp"

namespace loom::ops {

Tensor sum(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
Tensor mean(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
/// Biased variance (divides by the number of elements reduced), as Keras and NumPy's default.
Tensor var(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
/// Gradient is split equally between tied maxima (as TensorFlow).
Tensor max(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
Tensor min(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
/// Index of the first maximum along `axis`, as i64. Not differentiable.
Tensor argmax(const Tensor& x, std::int64_t axis = -1, bool keepdims = false);
Tensor argmin(const Tensor& x, std::int64_t axis = -1, bool keepdims = false);
/// log(sum(exp(x))) computed stably (shifted by the max). All -inf gives -inf (log 0) with a zero gradient;
/// +inf gives +inf.
Tensor logsumexp(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
/// Sums a broadcast result back down to `shape` (the reverse of broadcast_to): sums the leading extra axes and
/// those where `shape` has 1; used by the tape. Returns x itself when the shapes are equal; throws when
/// `shape` does not broadcast to x's shape.
Tensor sum_to(const Tensor& x, const Shape& shape);

}  // namespace loom::ops
