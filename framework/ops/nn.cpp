#include "framework/ops/nn.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "framework/autograd/record.hpp"
#include "framework/autograd/tape.hpp"
#include "framework/graph/symbolic.hpp"
#include "framework/kernels/dispatch.hpp"
#include "framework/kernels/strided.hpp"
#include "framework/ops/detail/input_checks.hpp"
#include "framework/ops/elementwise.hpp"
#include "framework/ops/reduction.hpp"
#include "framework/tensor/random.hpp"

namespace loom::ops {

namespace {

/// softmax (or log_softmax) of x along `axis`, slab by slab: a slab is one index of the dimensions before the
/// axis, i.e. a [n, trailing...] block. For the last axis a slab is one row and stays in cache; for an outer
/// axis every pass streams through the slab in memory order instead of walking strided lanes.
template <class T, bool log>
Tensor softmax_kernel(const Tensor& x, std::size_t axis) {
  constexpr T inf = std::numeric_limits<T>::infinity();
  const Shape& shape = x.shape();
  Tensor y = Tensor::zeros(shape, x.dtype());
  const auto at_axis = std::ptrdiff_t(axis);
  const Shape outer(shape.begin(), shape.begin() + at_axis), slab(shape.begin() + at_axis, shape.end());
  const Strides outer_strides(x.strides().begin(), x.strides().begin() + at_axis);
  const Strides in_strides(x.strides().begin() + at_axis, x.strides().end());
  const Strides out_strides = contiguous_strides(slab);
  Shape lanes = slab;  // one lane per trailing index
  lanes[0] = 1;
  Strides to_lane = contiguous_strides(lanes);
  to_lane[0] = 0;
  const std::int64_t slab_size = numel(slab);
  if (slab_size == 0) return y;

  const detail::RunWalk<2> in_lanes(slab, {&in_strides, &to_lane}), out_lanes(slab, {&out_strides, &to_lane});
  const detail::RunWalk<3> in_out_lanes(slab, {&in_strides, &out_strides, &to_lane});
  std::vector<T> shift(std::size_t(numel(lanes)));
  std::vector<double> total(shift.size());  // float32 sums in double
  const auto max_nan = [](T a, T v) { return v > a || std::isnan(v) ? (std::isnan(a) ? a : v) : a; };
  const auto plus = [](double a, auto v) { return a + double(v); };
  const auto plus_exp = [](double a, T v) { return a + double(std::exp(v)); };
  const T* in = x.data<T>();
  T* out = y.data<T>();
  for_each_strided(outer, outer_strides, 0, [&](std::int64_t o, std::int64_t at) {
    const T* xs = in + at;
    T* ys = out + o * slab_size;
    std::fill(shift.begin(), shift.end(), -inf);
    detail::reduce_into(shift, xs, in_lanes, -inf, max_nan, max_nan);
    // An all -inf lane shifts by 0, so exp(-inf - 0) = 0 rather than exp(-inf + inf) = NaN.
    for (T& m : shift) m = m == -inf ? T(0) : m;
    in_out_lanes([&](const auto& pos, const auto& step, std::int64_t n) {
      for (std::int64_t j = 0; j < n; ++j) {
        const T v = xs[pos[0] + j * step[0]] - shift[std::size_t(pos[2] + j * step[2])];
        ys[pos[1] + j * step[1]] = log ? v : std::exp(v);
      }
    });
    std::fill(total.begin(), total.end(), 0.0);
    if constexpr (log) detail::reduce_into(total, static_cast<const T*>(ys), out_lanes, 0.0, plus_exp, plus);
    else detail::reduce_into(total, static_cast<const T*>(ys), out_lanes, 0.0, plus, plus);
    // softmax divides by the total, log_softmax subtracts its log; an all -inf lane (total 0) stays 0 / -inf.
    for (double& t : total) t = t == 0.0 ? 0.0 : (log ? std::log(t) : 1.0 / t);
    out_lanes([&](const auto& pos, const auto& step, std::int64_t n) {
      for (std::int64_t j = 0; j < n; ++j) {
        T& v = ys[pos[0] + j * step[0]];
        const T f = T(total[std::size_t(pos[1] + j * step[1])]);
        v = log ? v - f : v * f;
      }
    });
  });
  return y;
}

std::int64_t softmax_axis(const Tensor& x, std::int64_t axis, std::string_view op) {
  check_floating(x, op);
  return normalize_axis(axis, x.ndim(), op);
}

}  // namespace

Tensor softmax(const Tensor& x, std::int64_t axis) {
  if (graph::any_symbolic(x))
    return graph::record_op("softmax", {x}, [=](const std::vector<Tensor>& v) { return softmax(v[0], axis); },
                            {{"axis", axis}});
  const std::int64_t a = softmax_axis(x, axis, "softmax");
  Tensor y =
      visit_floating(x.dtype(), "softmax", [&]<class T>() { return softmax_kernel<T, false>(x, std::size_t(a)); });
  if (autograd::needs_recording({&x}))
    // dx = y * (g - sum(g * y, axis))
    autograd::record("softmax", {x}, {y}, [y, a](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{mul(y, sub(g[0], sum(mul(g[0], y), {a}, /*keepdims=*/true)))};
    });
  return y;
}

Tensor log_softmax(const Tensor& x, std::int64_t axis) {
  if (graph::any_symbolic(x))
    return graph::record_op("log_softmax", {x}, [=](const std::vector<Tensor>& v) { return log_softmax(v[0], axis); },
                            {{"axis", axis}});
  const std::int64_t a = softmax_axis(x, axis, "log_softmax");
  Tensor y = visit_floating(x.dtype(), "log_softmax",
                           [&]<class T>() { return softmax_kernel<T, true>(x, std::size_t(a)); });
  if (autograd::needs_recording({&x}))
    // dx = g - exp(y) * sum(g, axis)
    autograd::record("log_softmax", {x}, {y}, [y, a](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{sub(g[0], mul(exp(y), sum(g[0], {a}, /*keepdims=*/true)))};
    });
  return y;
}

Tensor log_sigmoid(const Tensor& x) {
  if (graph::any_symbolic(x))
    return graph::record_op("log_sigmoid", {x}, [](const std::vector<Tensor>& v) { return log_sigmoid(v[0]); });
  check_floating(x, "log_sigmoid");
  Tensor y = visit_floating(x.dtype(), "log_sigmoid", [&]<class T>() {
    Tensor out = Tensor::zeros(x.shape(), x.dtype());
    const T* in = x.data<T>();
    T* o = out.data<T>();
    // min(x, 0) - log1p(exp(-|x|)): exp never overflows and the small term keeps its digits.
    for_each_strided(x.shape(), x.strides(), 0, [&](std::int64_t i, std::int64_t at) {
      const T v = in[at];
      o[i] = std::min(v, T(0)) - std::log1p(std::exp(-std::abs(v)));
    });
    return out;
  });
  if (autograd::needs_recording({&x}))
    // dx = g * sigmoid(-x)
    autograd::record("log_sigmoid", {x}, {y}, [x](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{mul(g[0], sigmoid(neg(x)))};
    });
  return y;
}

void check_class_labels(const Tensor& labels, std::int64_t depth, std::string_view op) {
  check(labels.defined(), "{}: the labels tensor is undefined", op);
  check(labels.dtype() == DType::i64, "{}: labels must be int64 class ids, got {} of shape {}", op, labels.dtype(),
        labels.shape());
  const std::vector<std::int64_t> values = labels.to_vector<std::int64_t>();
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (values[i] >= 0 && values[i] < depth) continue;
    std::vector<std::int64_t> index(labels.shape().size());
    for (std::size_t d = index.size(), rest = i; d-- > 0;) {
      index[d] = std::int64_t(rest % std::size_t(labels.shape()[d]));
      rest /= std::size_t(labels.shape()[d]);
    }
    throw Error(fmt::format("{}: label {} at index {} of labels {} is out of range: expected 0 <= label < {}", op,
                            values[i], index, labels.shape(), depth));
  }
}

Tensor one_hot(const Tensor& labels, std::int64_t depth, DType dtype) {
  if (graph::any_symbolic(labels))
    return graph::record_op("one_hot", {labels},
                            [=](const std::vector<Tensor>& v) { return one_hot(v[0], depth, dtype); });
  check(depth > 0, "one_hot: depth must be positive, got {}", depth);
  check(is_floating(dtype), "one_hot: the result dtype must be float32 or float64, got {}", dtype);
  check_class_labels(labels, depth, "one_hot");
  Shape shape = labels.shape();
  shape.push_back(depth);
  Tensor y = Tensor::zeros(shape, dtype);
  visit_floating(dtype, "one_hot", [&]<class T>() {
    const std::int64_t* in = labels.data<std::int64_t>();
    T* out = y.data<T>();
    for_each_strided(labels.shape(), labels.strides(), 0,
                     [&](std::int64_t i, std::int64_t at) { out[i * depth + in[at]] = T(1); });
  });
  return y;
}

Tensor dropout(const Tensor& x, double rate, bool training, std::optional<std::uint64_t> seed) {
  if (graph::any_symbolic(x))
    return graph::record_op("dropout", {x},
                            [=](const std::vector<Tensor>& v) { return dropout(v[0], rate, training, seed); });
  check_floating(x, "dropout");
  check(rate >= 0.0 && rate < 1.0, "dropout: rate must be in [0, 1), got {}", rate);
  if (!training || rate == 0.0) return x;
  // The mask holds 0 or 1/(1-rate); x * mask through ops::mul gives the backward g * mask for free.
  Tensor mask = Tensor::zeros(x.shape(), x.dtype());
  random::Generator seeded(seed.value_or(0));
  random::Generator& generator = seed ? seeded : random::thread_generator();
  visit_floating(x.dtype(), "dropout", [&]<class T>() {
    const T scale = T(1.0 / (1.0 - rate));
    T* m = mask.data<T>();
    for (std::int64_t i = 0; i < mask.numel(); ++i) m[i] = generator.uniform() >= rate ? scale : T(0);
  });
  return mul(x, mask);
}

}  // namespace loom::ops
