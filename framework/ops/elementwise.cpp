#include "framework/ops/elementwise.hpp"

#include <cmath>
#include <numbers>
#include <type_traits>

#include "framework/autograd/record.hpp"
#include "framework/autograd/tape.hpp"
#include "framework/graph/symbolic.hpp"
#include "framework/kernels/dispatch.hpp"
#include "framework/kernels/elementwise_kernels.hpp"
#include "framework/ops/detail/input_checks.hpp"
#include "framework/ops/ops.hpp"

namespace loom::ops {

namespace {

using Grads = std::vector<Tensor>;

// gelu's tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as Keras.
constexpr double kGeluTanhScale = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double kGeluTanhCubic = 0.044715;

/// Both operands defined and of one dtype: loom never promotes implicitly.
void check_same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  check(a.defined() && b.defined(), "{}: operand {} is undefined", op, a.defined() ? "b" : "a");
  check(a.dtype() == b.dtype(),
        "{}: operands must have the same dtype (no implicit promotion; use ops::cast), got {} of shape {} and {} of "
        "shape {}",
        op, a.dtype(), a.shape(), b.dtype(), b.shape());
}

/// A fresh output of the broadcast shape; equal shapes (the common case) skip building a new Shape. Not
/// zero-filled: map_into writes every element of its output (the elementwise outputs below rely on that).
Tensor broadcast_output(const Tensor& a, const Tensor& b, DType dtype, const char* op) {
  return a.shape() == b.shape() ? Tensor::empty(a.shape(), dtype)
                                : Tensor::empty(broadcast_shapes(a.shape(), b.shape(), op), dtype);
}

/// f(a, b) elementwise for float operands; f is generic over float and double.
template <class F>
Tensor arithmetic(const Tensor& a, const Tensor& b, const char* op, F f) {
  check_same_dtype(a, b, op);
  check(is_floating(a.dtype()), "{}: expected float32 or float64 operands, got {} of shapes {} and {}", op,
        a.dtype(), a.shape(), b.shape());
  Tensor y = broadcast_output(a, b, a.dtype(), op);
  visit_floating(a.dtype(), op, [&]<class T>() {
    kernels::map_into<T, T, T>(y, [f](T u, T v) -> T { return f(u, v); }, a, b);
  });
  return y;
}

/// f(x) elementwise for a float tensor; f is generic over float and double.
template <class F>
Tensor unary(const Tensor& x, const char* op, F f) {
  check_floating(x, op);
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  visit_floating(x.dtype(), op, [&]<class T>() {
    kernels::map_into<T, T>(y, [f](T v) -> T { return f(v); }, x);
  });
  return y;
}

/// Boolean f(a, b) for f32/f64/i64 operands of one dtype.
template <class F>
Tensor compare(const Tensor& a, const Tensor& b, const char* op, F f) {
  check_same_dtype(a, b, op);
  check(a.dtype() != DType::boolean,
        "{}: expected f32, f64 or i64 operands, got bool of shapes {} and {} (use the logical ops on masks)", op,
        a.shape(), b.shape());
  Tensor out = broadcast_output(a, b, DType::boolean, op);
  visit_dtype(a.dtype(), [&]<class T>() {
    if constexpr (!std::is_same_v<T, bool>)
      kernels::map_into<bool, T, T>(out, [f](T u, T v) -> bool { return f(u, v); }, a, b);
  });
  return out;
}

template <class F>
Tensor logical(const Tensor& a, const Tensor& b, const char* op, F f) {
  check_same_dtype(a, b, op);
  check(a.dtype() == DType::boolean, "{}: expected boolean operands, got {} of shapes {} and {}", op, a.dtype(),
        a.shape(), b.shape());
  Tensor out = broadcast_output(a, b, DType::boolean, op);
  kernels::map_into<bool, bool, bool>(out, f, a, b);
  return out;
}

Tensor scalar_like(double value, const Tensor& t) { return Tensor::scalar(value, t.dtype()); }

/// g where mask is true, 0 elsewhere: how gradients are routed through max, clip, relu and where.
Tensor pass_where(const Tensor& mask, const Tensor& g) { return where(mask, g, scalar_like(0.0, g)); }
Tensor block_where(const Tensor& mask, const Tensor& g) { return where(mask, scalar_like(0.0, g), g); }

/// g where y > 0, 0 elsewhere: relu's backward in one pass, without a mask tensor. Its own gradient with
/// respect to g routes the same way; y only selects, so it gets none.
Tensor relu_backward(const Tensor& y, const Tensor& g) {
  Tensor out = broadcast_output(y, g, g.dtype(), "relu_backward");
  visit_floating(g.dtype(), "relu_backward", [&]<class T>() {
    kernels::map_into<T, T, T>(out, [](T v, T d) { return v > 0 ? d : T(0); }, y, g);
  });
  if (autograd::needs_recording({&g}))
    autograd::record("relu_backward", {y, g}, {out}, [y](const Grads& gg) {
      return Grads{Tensor(), relu_backward(y, gg[0])};
    });
  return out;
}

}  // namespace

// ---- binary arithmetic ----

Tensor add(const Tensor& a, const Tensor& b) {
  if (graph::any_symbolic(a, b))
    return graph::record_op("add", {a, b}, [](const std::vector<Tensor>& v) { return add(v[0], v[1]); });
  Tensor y = arithmetic(a, b, "add", [](auto u, auto v) { return u + v; });
  if (autograd::needs_recording({&a, &b}))
    autograd::record("add", {a, b}, {y}, [](const Grads& g) { return Grads{g[0], g[0]}; });
  return y;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  if (graph::any_symbolic(a, b))
    return graph::record_op("sub", {a, b}, [](const std::vector<Tensor>& v) { return sub(v[0], v[1]); });
  Tensor y = arithmetic(a, b, "sub", [](auto u, auto v) { return u - v; });
  if (autograd::needs_recording({&a, &b}))
    autograd::record("sub", {a, b}, {y}, [](const Grads& g) { return Grads{g[0], neg(g[0])}; });
  return y;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  if (graph::any_symbolic(a, b))
    return graph::record_op("mul", {a, b}, [](const std::vector<Tensor>& v) { return mul(v[0], v[1]); });
  Tensor y = arithmetic(a, b, "mul", [](auto u, auto v) { return u * v; });
  if (autograd::needs_recording({&a, &b}))
    autograd::record("mul", {a, b}, {y}, [a, b](const Grads& g) { return Grads{mul(g[0], b), mul(g[0], a)}; });
  return y;
}

Tensor div(const Tensor& a, const Tensor& b) {
  if (graph::any_symbolic(a, b))
    return graph::record_op("div", {a, b}, [](const std::vector<Tensor>& v) { return div(v[0], v[1]); });
  Tensor y = arithmetic(a, b, "div", [](auto u, auto v) { return u / v; });
  if (autograd::needs_recording({&a, &b}))
    autograd::record("div", {a, b}, {y}, [b, y](const Grads& g) {
      Tensor ga = div(g[0], b);
      return Grads{ga, neg(mul(ga, y))};  // d(a/b)/db = -(1/b) * (a/b)
    });
  return y;
}

Tensor pow(const Tensor& a, const Tensor& b) {
  if (graph::any_symbolic(a, b))
    return graph::record_op("pow", {a, b}, [](const std::vector<Tensor>& v) { return pow(v[0], v[1]); });
  Tensor y = arithmetic(a, b, "pow", [](auto u, auto v) { return std::pow(u, v); });
  if (autograd::needs_recording({&a, &b}))
    autograd::record("pow", {a, b}, {y}, [a, b, y](const Grads& g) {
      // d/db a^b = a^b log a; taken as 0 at a == 0, where a^b is flat (0) for b > 0 and log a is -inf.
      Tensor db = block_where(equal(a, scalar_like(0.0, a)), mul(y, log(a)));
      return Grads{mul(g[0], mul(b, pow(a, sub(b, scalar_like(1.0, b))))), mul(g[0], db)};
    });
  return y;
}

Tensor pow(const Tensor& a, double exponent) {
  if (graph::any_symbolic(a))
    return graph::record_op("pow", {a}, [=](const std::vector<Tensor>& v) { return pow(v[0], exponent); },
                            {{"x2", exponent}});
  Tensor y = unary(a, "pow", [exponent](auto v) { return std::pow(v, decltype(v)(exponent)); });
  if (autograd::needs_recording({&a}))
    autograd::record("pow", {a}, {y}, [a, exponent](const Grads& g) {
      // a^0 is constant; the general rule would give 0 * a^-1 = NaN at a == 0.
      if (exponent == 0.0) return Grads{Tensor::zeros_like(g[0])};
      return Grads{mul(g[0], pow(a, exponent - 1.0) * exponent)};
    });
  return y;
}

Tensor maximum(const Tensor& a, const Tensor& b) {
  if (graph::any_symbolic(a, b))
    return graph::record_op("maximum", {a, b}, [](const std::vector<Tensor>& v) { return maximum(v[0], v[1]); });
  // NaN in either operand propagates, as NumPy's maximum.
  Tensor y = arithmetic(a, b, "maximum", [](auto u, auto v) { return u >= v || u != u ? u : v; });
  if (autograd::needs_recording({&a, &b}))
    autograd::record("maximum", {a, b}, {y}, [a, b](const Grads& g) {
      Tensor to_a = greater_equal(a, b);
      return Grads{pass_where(to_a, g[0]), block_where(to_a, g[0])};
    });
  return y;
}

Tensor minimum(const Tensor& a, const Tensor& b) {
  if (graph::any_symbolic(a, b))
    return graph::record_op("minimum", {a, b}, [](const std::vector<Tensor>& v) { return minimum(v[0], v[1]); });
  Tensor y = arithmetic(a, b, "minimum", [](auto u, auto v) { return u <= v || u != u ? u : v; });
  if (autograd::needs_recording({&a, &b}))
    autograd::record("minimum", {a, b}, {y}, [a, b](const Grads& g) {
      Tensor to_a = less_equal(a, b);
      return Grads{pass_where(to_a, g[0]), block_where(to_a, g[0])};
    });
  return y;
}

// ---- unary math ----

Tensor neg(const Tensor& x) {
  if (graph::any_symbolic(x))
    return graph::record_op("neg", {x}, [](const std::vector<Tensor>& v) { return neg(v[0]); });
  Tensor y = unary(x, "neg", [](auto v) { return -v; });
  if (autograd::needs_recording({&x}))
    autograd::record("neg", {x}, {y}, [](const Grads& g) { return Grads{neg(g[0])}; });
  return y;
}

Tensor square(const Tensor& x) {
  if (graph::any_symbolic(x))
    return graph::record_op("square", {x}, [](const std::vector<Tensor>& v) { return square(v[0]); });
  Tensor y = unary(x, "square", [](auto v) { return v * v; });
  if (autograd::needs_recording({&x}))
    autograd::record("square", {x}, {y}, [x](const Grads& g) { return Grads{mul(g[0], x * 2.0)}; });
  return y;
}

Tensor sqrt(const Tensor& x) {
  if (graph::any_symbolic(x))
    return graph::record_op("sqrt", {x}, [](const std::vector<Tensor>& v) { return sqrt(v[0]); });
  Tensor y = unary(x, "sqrt", [](auto v) { return std::sqrt(v); });
  if (autograd::needs_recording({&x}))
    autograd::record("sqrt", {x}, {y}, [y](const Grads& g) { return Grads{div(g[0], y * 2.0)}; });
  return y;
}

Tensor rsqrt(const Tensor& x) {
  if (graph::any_symbolic(x))
    return graph::record_op("rsqrt", {x}, [](const std::vector<Tensor>& v) { return rsqrt(v[0]); });
  Tensor y = unary(x, "rsqrt", [](auto v) { return decltype(v)(1) / std::sqrt(v); });
  if (autograd::needs_recording({&x}))  // d/dx x^-1/2 = -1/2 x^-3/2 = -1/2 y^3
    autograd::record("rsqrt", {x}, {y}, [y](const Grads& g) { return Grads{mul(g[0], mul(y, square(y)) * -0.5)}; });
  return y;
}

Tensor exp(const Tensor& x) {
  if (graph::any_symbolic(x))
    return graph::record_op("exp", {x}, [](const std::vector<Tensor>& v) { return exp(v[0]); });
  Tensor y = unary(x, "exp", [](auto v) { return std::exp(v); });
  if (autograd::needs_recording({&x}))
    autograd::record("exp", {x}, {y}, [y](const Grads& g) { return Grads{mul(g[0], y)}; });
  return y;
}

Tensor log(const Tensor& x) {
  if (graph::any_symbolic(x))
    return graph::record_op("log", {x}, [](const std::vector<Tensor>& v) { return log(v[0]); });
  Tensor y = unary(x, "log", [](auto v) { return std::log(v); });
  if (autograd::needs_recording({&x}))
    autograd::record("log", {x}, {y}, [x](const Grads& g) { return Grads{div(g[0], x)}; });
  return y;
}

Tensor abs(const Tensor& x) {
  if (graph::any_symbolic(x))
    return graph::record_op("abs", {x}, [](const std::vector<Tensor>& v) { return abs(v[0]); });
  Tensor y = unary(x, "abs", [](auto v) { return std::abs(v); });
  if (autograd::needs_recording({&x}))
    autograd::record("abs", {x}, {y}, [x](const Grads& g) { return Grads{mul(g[0], sign(x))}; });
  return y;
}

Tensor sign(const Tensor& x) {
  if (graph::any_symbolic(x))
    return graph::record_op("sign", {x}, [](const std::vector<Tensor>& v) { return sign(v[0]); });
  // Keeps 0 (and -0) and NaN as they are, as NumPy. Not recorded: its gradient is zero almost everywhere.
  return unary(x, "sign", [](auto v) { return v > 0 ? decltype(v)(1) : v < 0 ? decltype(v)(-1) : v; });
}

Tensor clip(const Tensor& x, double lo, double hi) {
  if (graph::any_symbolic(x))
    return graph::record_op("clip", {x}, [=](const std::vector<Tensor>& v) { return clip(v[0], lo, hi); },
                            {{"x_min", lo}, {"x_max", hi}});
  check(lo <= hi, "clip: expected lo <= hi, got lo={} and hi={} (tensor of shape {})", lo, hi,
        x.defined() ? fmt::format("{}", x.shape()) : "undefined");
  Tensor y = unary(x, "clip", [lo, hi](auto v) {
    using T = decltype(v);
    return v < T(lo) ? T(lo) : v > T(hi) ? T(hi) : v;
  });
  if (autograd::needs_recording({&x}))
    autograd::record("clip", {x}, {y}, [x, lo, hi](const Grads& g) {
      return Grads{
          pass_where(logical_and(greater_equal(x, scalar_like(lo, x)), less_equal(x, scalar_like(hi, x))), g[0])};
    });
  return y;
}

Tensor erf(const Tensor& x) {
  if (graph::any_symbolic(x))
    return graph::record_op("erf", {x}, [](const std::vector<Tensor>& v) { return erf(v[0]); });
  Tensor y = unary(x, "erf", [](auto v) { return std::erf(v); });
  if (autograd::needs_recording({&x}))
    autograd::record("erf", {x}, {y}, [x](const Grads& g) {
      return Grads{mul(g[0], exp(neg(square(x))) * (2.0 * std::numbers::inv_sqrtpi))};
    });
  return y;
}

// ---- activations ----

Tensor tanh(const Tensor& x) {
  if (graph::any_symbolic(x))
    return graph::record_op("tanh", {x}, [](const std::vector<Tensor>& v) { return tanh(v[0]); });
  Tensor y = unary(x, "tanh", [](auto v) { return std::tanh(v); });
  if (autograd::needs_recording({&x}))
    autograd::record("tanh", {x}, {y}, [y](const Grads& g) { return Grads{mul(g[0], 1.0 - square(y))}; });
  return y;
}

Tensor sigmoid(const Tensor& x) {
  if (graph::any_symbolic(x))
    return graph::record_op("sigmoid", {x}, [](const std::vector<Tensor>& v) { return sigmoid(v[0]); });
  // exp of a non-positive argument only, so large |x| neither overflows nor gives inf/inf.
  Tensor y = unary(x, "sigmoid", [](auto v) {
    using T = decltype(v);
    if (v >= 0) return T(1) / (T(1) + std::exp(-v));
    const T e = std::exp(v);
    return e / (T(1) + e);
  });
  if (autograd::needs_recording({&x}))
    autograd::record("sigmoid", {x}, {y}, [y](const Grads& g) { return Grads{mul(g[0], mul(y, 1.0 - y))}; });
  return y;
}

Tensor relu(const Tensor& x) {
  if (graph::any_symbolic(x))
    return graph::record_op("relu", {x}, [](const std::vector<Tensor>& v) { return relu(v[0]); });
  Tensor y = unary(x, "relu", [](auto v) { return v < 0 ? decltype(v)(0) : v; });  // NaN stays NaN
  if (autograd::needs_recording({&x}))  // gradient 0 at x == 0, as Keras and PyTorch
    autograd::record("relu", {x}, {y}, [y](const Grads& g) { return Grads{relu_backward(y, g[0])}; });
  return y;
}

Tensor gelu(const Tensor& x, bool approximate) {
  if (graph::any_symbolic(x))
    return graph::record_op("gelu", {x}, [=](const std::vector<Tensor>& v) { return gelu(v[0], approximate); },
                            {{"approximate", approximate}});
  const auto tanh_form = [](auto v) {
    using T = decltype(v);
    return T(0.5) * v * (T(1) + std::tanh(T(kGeluTanhScale) * (v + T(kGeluTanhCubic) * v * v * v)));
  };
  const auto erf_form = [](auto v) {
    using T = decltype(v);
    return T(0.5) * v * (T(1) + std::erf(v * T(std::numbers::sqrt2 / 2)));
  };
  Tensor y = approximate ? unary(x, "gelu", tanh_form) : unary(x, "gelu", erf_form);
  if (!autograd::needs_recording({&x})) return y;
  if (approximate) {
    // y = x/2 (1 + t), t = tanh(c (x + k x^3));  dy/dx = (1 + t)/2 + x/2 (1 - t^2) c (1 + 3k x^2)
    autograd::record("gelu", {x}, {y}, [x](const Grads& g) {
      Tensor x2 = square(x);
      Tensor t = tanh(mul(x, x2 * kGeluTanhCubic + 1.0) * kGeluTanhScale);
      Tensor slope = mul(mul(x, 1.0 - square(t)), x2 * (3.0 * kGeluTanhCubic) + 1.0) * (0.5 * kGeluTanhScale);
      return Grads{mul(g[0], (t + 1.0) * 0.5 + slope)};
    });
  } else {
    // y = x Phi(x);  dy/dx = Phi(x) + x phi(x)
    autograd::record("gelu", {x}, {y}, [x](const Grads& g) {
      Tensor cdf = (erf(x * (std::numbers::sqrt2 / 2)) + 1.0) * 0.5;
      Tensor pdf = exp(square(x) * -0.5) * (std::numbers::inv_sqrtpi / std::numbers::sqrt2);
      return Grads{mul(g[0], cdf + mul(x, pdf))};
    });
  }
  return y;
}

// ---- comparisons ----

Tensor equal(const Tensor& a, const Tensor& b) {
  if (graph::any_symbolic(a, b))
    return graph::record_op("equal", {a, b}, [](const std::vector<Tensor>& v) { return equal(v[0], v[1]); });
  return compare(a, b, "equal", [](auto u, auto v) { return u == v; });
}
Tensor not_equal(const Tensor& a, const Tensor& b) {
  if (graph::any_symbolic(a, b))
    return graph::record_op("not_equal", {a, b}, [](const std::vector<Tensor>& v) { return not_equal(v[0], v[1]); });
  return compare(a, b, "not_equal", [](auto u, auto v) { return u != v; });
}
Tensor less(const Tensor& a, const Tensor& b) {
  if (graph::any_symbolic(a, b))
    return graph::record_op("less", {a, b}, [](const std::vector<Tensor>& v) { return less(v[0], v[1]); });
  return compare(a, b, "less", [](auto u, auto v) { return u < v; });
}
Tensor less_equal(const Tensor& a, const Tensor& b) {
  if (graph::any_symbolic(a, b))
    return graph::record_op("less_equal", {a, b}, [](const std::vector<Tensor>& v) { return less_equal(v[0], v[1]); });
  return compare(a, b, "less_equal", [](auto u, auto v) { return u <= v; });
}
Tensor greater(const Tensor& a, const Tensor& b) {
  if (graph::any_symbolic(a, b))
    return graph::record_op("greater", {a, b}, [](const std::vector<Tensor>& v) { return greater(v[0], v[1]); });
  return compare(a, b, "greater", [](auto u, auto v) { return u > v; });
}
Tensor greater_equal(const Tensor& a, const Tensor& b) {
  if (graph::any_symbolic(a, b))
    return graph::record_op("greater_equal", {a, b},
                            [](const std::vector<Tensor>& v) { return greater_equal(v[0], v[1]); });
  return compare(a, b, "greater_equal", [](auto u, auto v) { return u >= v; });
}

Tensor logical_and(const Tensor& a, const Tensor& b) {
  if (graph::any_symbolic(a, b))
    return graph::record_op("logical_and", {a, b},
                            [](const std::vector<Tensor>& v) { return logical_and(v[0], v[1]); });
  return logical(a, b, "logical_and", [](bool u, bool v) { return u && v; });
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  if (graph::any_symbolic(a, b))
    return graph::record_op("logical_or", {a, b}, [](const std::vector<Tensor>& v) { return logical_or(v[0], v[1]); });
  return logical(a, b, "logical_or", [](bool u, bool v) { return u || v; });
}
Tensor logical_not(const Tensor& x) {
  if (graph::any_symbolic(x))
    return graph::record_op("logical_not", {x}, [](const std::vector<Tensor>& v) { return logical_not(v[0]); });
  check_defined(x, "logical_not");
  check(x.dtype() == DType::boolean, "logical_not: expected a boolean tensor, got {} of shape {}", x.dtype(),
        x.shape());
  Tensor out = Tensor::empty(x.shape(), DType::boolean);
  kernels::map_into<bool, bool>(out, [](bool v) { return !v; }, x);
  return out;
}

// ---- selection ----

Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
  if (graph::any_symbolic(condition, a, b))
    return graph::record_op("where", {condition, a, b},
                            [](const std::vector<Tensor>& v) { return where(v[0], v[1], v[2]); });
  check(condition.defined(), "where: the condition is undefined");
  check_same_dtype(a, b, "where");
  check(condition.dtype() == DType::boolean, "where: the condition must be boolean, got {} of shape {}",
        condition.dtype(), condition.shape());
  Shape shape;
  try {
    shape = broadcast_shapes(broadcast_shapes(condition.shape(), a.shape(), "where"), b.shape(), "where");
  } catch (const Error&) {
    throw Error(fmt::format("where: the condition {}, a {} and b {} cannot be broadcast together", condition.shape(),
                            a.shape(), b.shape()));
  }
  Tensor y = Tensor::empty(shape, a.dtype());
  visit_dtype(a.dtype(), [&]<class T>() {
    kernels::map_into<T, bool, T, T>(y, [](bool c, T u, T v) { return c ? u : v; }, condition, a, b);
  });
  if (autograd::needs_recording({&a, &b}))
    autograd::record("where", {a, b}, {y}, [condition](const Grads& g) {
      return Grads{pass_where(condition, g[0]), block_where(condition, g[0])};
    });
  return y;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  if (graph::any_symbolic(x, mask))
    return graph::record_op("masked_fill", {x, mask},
                            [=](const std::vector<Tensor>& v) { return masked_fill(v[0], v[1], value); });
  check_defined(x, "masked_fill");
  check(mask.defined(), "masked_fill: the mask is undefined");
  check(mask.dtype() == DType::boolean, "masked_fill: the mask must be boolean, got {} of shape {}", mask.dtype(),
        mask.shape());
  check(broadcast_shapes(x.shape(), mask.shape(), "masked_fill") == x.shape(),
        "masked_fill: the mask of shape {} must broadcast to the shape of x, {}", mask.shape(), x.shape());
  return where(mask, scalar_like(value, x), x);
}

Tensor cast(const Tensor& x, DType dtype) {
  if (graph::any_symbolic(x))
    return graph::record_op("cast", {x}, [=](const std::vector<Tensor>& v) { return cast(v[0], dtype); },
                            {{"dtype", std::string(dtype_name(dtype))}});
  check_defined(x, "cast");
  if (x.dtype() == dtype) return x;
  Tensor y = Tensor::empty(x.shape(), dtype);
  visit_dtype(x.dtype(), [&]<class From>() {
    visit_dtype(dtype, [&]<class To>() {
      if constexpr (std::is_same_v<To, bool>) {
        kernels::map_into<bool, From>(y, [](From v) { return v != From{}; }, x);
      } else if constexpr (std::is_integral_v<To> && !std::is_integral_v<From>) {
        // Truncates toward zero, as NumPy's astype; a value with no i64 counterpart is an error, not garbage.
        const auto to_integer = [&x](From v) {
          check(v >= From(-0x1p63) && v < From(0x1p63),
                "cast: the {} value {} of a tensor of shape {} does not fit in {}", x.dtype(), v, x.shape(),
                dtype_of<To>());
          return static_cast<To>(v);
        };
        kernels::map_into<To, From>(y, to_integer, x);
      } else {
        kernels::map_into<To, From>(y, [](From v) { return static_cast<To>(v); }, x);
      }
    });
  });
  if (is_differentiable(dtype) && is_differentiable(x.dtype()) && autograd::needs_recording({&x}))
    autograd::record("cast", {x}, {y}, [from = x.dtype()](const Grads& g) {
      // A bf16 tensor's gradient is carried in float32 (tape.cpp), so a cast from bf16 passes it on unrounded.
      return Grads{cast(g[0], compute_dtype(from))};
    });
  return y;
}

}  // namespace loom::ops

namespace loom {

Tensor operator+(const Tensor& a, const Tensor& b) { return ops::add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return ops::sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return ops::mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return ops::div(a, b); }
Tensor operator-(const Tensor& x) { return ops::neg(x); }

namespace {
/// The scalar operand of a tensor-scalar operator, in the tensor's dtype.
Tensor scalar_for(double value, const Tensor& t, const char* op) {
  check(t.defined(), "{}: the tensor operand is undefined", op);
  return Tensor::scalar(value, t.dtype());
}
}  // namespace

Tensor operator+(const Tensor& a, double b) { return ops::add(a, scalar_for(b, a, "add")); }
Tensor operator-(const Tensor& a, double b) { return ops::sub(a, scalar_for(b, a, "sub")); }
Tensor operator*(const Tensor& a, double b) { return ops::mul(a, scalar_for(b, a, "mul")); }
Tensor operator/(const Tensor& a, double b) { return ops::div(a, scalar_for(b, a, "div")); }
Tensor operator+(double a, const Tensor& b) { return ops::add(scalar_for(a, b, "add"), b); }
Tensor operator-(double a, const Tensor& b) { return ops::sub(scalar_for(a, b, "sub"), b); }
Tensor operator*(double a, const Tensor& b) { return ops::mul(scalar_for(a, b, "mul"), b); }
Tensor operator/(double a, const Tensor& b) { return ops::div(scalar_for(a, b, "div"), b); }

}  // namespace loom
