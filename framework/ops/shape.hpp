#pragma once
// Shape ops. reshape (of contiguous data), permute/transpose, slice, broadcast_to, expand_dims, squeeze,
// flatten (of contiguous data) and split return views sharing storage; contiguous (of a non-contiguous
// tensor), clone, concat, stack, pad, take and take_along_axis copy. The forward pass accepts every dtype; only
// f32/f64 inputs are differentiated.
#include <cstdint>
#include <utility>
#include <vector>

#include "framework/tensor/tensor.hpp"

namespace loom::ops {

Tensor reshape(const Tensor& x, const Shape& shape);  // one dimension may be -1; copies if x is not contiguous
Tensor permute(const Tensor& x, const std::vector<std::int64_t>& axes);
Tensor transpose(const Tensor& x, std::int64_t axis0 = -2, std::int64_t axis1 = -1);
/// Elements start, start+step, ... < stop along `axis`; negative start/stop count from the end (Python).
Tensor slice(const Tensor& x, std::int64_t axis, std::int64_t start, std::int64_t stop, std::int64_t step = 1);
Tensor broadcast_to(const Tensor& x, const Shape& shape);
Tensor expand_dims(const Tensor& x, std::int64_t axis);
Tensor squeeze(const Tensor& x, std::int64_t axis);
Tensor flatten(const Tensor& x, std::int64_t start_axis = 0);  // collapses start_axis.. into one dimension
Tensor contiguous(const Tensor& x);
Tensor clone(const Tensor& x);

Tensor concat(const std::vector<Tensor>& xs, std::int64_t axis = 0);
Tensor stack(const std::vector<Tensor>& xs, std::int64_t axis = 0);
/// keras.ops.pad in "constant" mode: x with widths[d].first positions before and widths[d].second after it
/// along each axis d, holding `value`. `widths` has one (before, after) pair per axis of x, or one for all
/// (NumPy's pad_width); widths are >= 0. The gradient is the slice of g where x sits.
Tensor pad(const Tensor& x, const std::vector<std::pair<std::int64_t, std::int64_t>>& widths, double value = 0.0);
/// `sections` equal parts along axis (must divide the dimension). The parts are views of x.
std::vector<Tensor> split(const Tensor& x, std::int64_t sections, std::int64_t axis = 0);
/// Parts of the given sizes along axis (must add up to the dimension).
std::vector<Tensor> split(const Tensor& x, const std::vector<std::int64_t>& sizes, std::int64_t axis = 0);

/// NumPy take: picks entries of `x` along `axis` at integer `indices` (i64, any shape); the result's shape is
/// x.shape[:axis] + indices.shape + x.shape[axis+1:]. Embedding lookup is take(table, ids, 0). Gradient
/// scatter-adds into x; indices get none. Out-of-range indices are an error.
Tensor take(const Tensor& x, const Tensor& indices, std::int64_t axis = 0);
/// NumPy take_along_axis: indices has x's rank; picks x[..., indices[...], ...] along axis.
Tensor take_along_axis(const Tensor& x, const Tensor& indices, std::int64_t axis);
/// Alias of take (TensorFlow's name).
inline Tensor gather(const Tensor& x, const Tensor& indices, std::int64_t axis = 0) { return take(x, indices, axis); }

// ---- adjoints of the indexing ops: the backward rules of slice, take and take_along_axis. Each is itself
// differentiable (its gradient is the forward op), which gives second-order gradients. ----

/// Zeros of `shape` with `grad` written at start:stop:step along axis (same conventions as slice).
Tensor slice_backward(const Tensor& grad, const Shape& shape, std::int64_t axis, std::int64_t start,
                      std::int64_t stop, std::int64_t step = 1);
/// Zeros with dimension `size` at `axis` (grad's dimensions elsewhere) into which every entry of grad is
/// added at its index: grad has the shape take(x, indices, axis) gives for x of that shape.
Tensor take_backward(const Tensor& grad, const Tensor& indices, std::int64_t axis, std::int64_t size);
/// Zeros of grad's shape but with dimension `size` at `axis`, into which grad is added along axis at
/// `indices` (i64, grad's rank, broadcast against grad outside axis).
Tensor take_along_axis_backward(const Tensor& grad, const Tensor& indices, std::int64_t axis, std::int64_t size);

}  // namespace loom::ops
