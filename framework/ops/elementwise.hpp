#pragma once
// Elementwise ops with NumPy broadcasting, and the tensor operators. Every floating op here is
// differentiable; its backward rule is written with loom ops, so nested tapes give higher-order gradients.
#include "framework/tensor/tensor.hpp"

namespace loom::ops {

// ---- binary arithmetic (f32/f64, both operands of one dtype, shapes broadcast) ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, double exponent);
Tensor maximum(const Tensor& a, const Tensor& b);  // gradient goes to a where a >= b
Tensor minimum(const Tensor& a, const Tensor& b);  // gradient goes to a where a <= b

// ---- unary math ----
Tensor neg(const Tensor& x);
Tensor square(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor exp(const Tensor& x);
/// Natural log; as NumPy, log(0) = -inf and log of a negative number is NaN (math, not bad input).
Tensor log(const Tensor& x);
Tensor abs(const Tensor& x);   // gradient sign(x), 0 at 0
Tensor sign(const Tensor& x);  // not differentiable (zero gradient)
Tensor clip(const Tensor& x, double lo, double hi);  // gradient passes where lo <= x <= hi
/// The error function; gradient 2/sqrt(pi) exp(-x^2) (gelu's backward rule uses it).
Tensor erf(const Tensor& x);

// ---- activations ----
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
/// approximate = false: x * Phi(x) with the exact erf; true: the tanh approximation (Keras approximate=True).
Tensor gelu(const Tensor& x, bool approximate = false);

// ---- comparisons: f32, f64 or i64 operands of one dtype, boolean results, never differentiated ----
Tensor equal(const Tensor& a, const Tensor& b);
Tensor not_equal(const Tensor& a, const Tensor& b);
Tensor less(const Tensor& a, const Tensor& b);
Tensor less_equal(const Tensor& a, const Tensor& b);
Tensor greater(const Tensor& a, const Tensor& b);
Tensor greater_equal(const Tensor& a, const Tensor& b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& x);

// ---- selection ----
/// Elementwise condition ? a : b; condition is boolean, a and b share a dtype (any), the three shapes
/// broadcast together. Differentiable in a and b.
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
/// x with `value` wherever mask (boolean, broadcastable to x) is true.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

/// Converts to `dtype`; differentiable between f32, f64 and bf16 (the gradient is cast back; a bf16 tensor's
/// in float32). To bf16: round to nearest even. To bool: nonzero;
/// from bool: 0 or 1; float to i64 truncates toward zero, and NaN, inf or values out of i64's range are an
/// error. Casting to the tensor's own dtype returns it unchanged (no copy).
Tensor cast(const Tensor& x, DType dtype);

}  // namespace loom::ops

namespace loom {
// Operators on tensors and scalars; a scalar takes the tensor's dtype.
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
}  // namespace loom
