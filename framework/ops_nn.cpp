#include "framework/ops_nn.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "framework/dispatch.hpp"
#include "framework/ops_elementwise.hpp"
#include "framework/ops_reduction.hpp"
#include "framework/random.hpp"
#include "framework/strided.hpp"
#include "framework/tape.hpp"

namespace loom::ops {

namespace {

/// Calls lane(in, in_stride, out, out_stride, n) for every lane of x along `axis` (x may have any strides);
/// `out` points at the same lane of the fresh contiguous result, which is returned.
template <class T, class Lane>
Tensor map_lanes(const Tensor& x, std::int64_t axis, Lane&& lane) {
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  const auto a = std::size_t(axis);
  const std::int64_t n = x.shape()[a];
  std::int64_t inner = 1;  // the output's stride along the axis
  for (std::size_t d = a + 1; d < x.shape().size(); ++d) inner *= x.shape()[d];
  Shape lanes = x.shape();
  lanes[a] = 1;
  const T* in = x.data<T>();
  T* out = y.data<T>();
  if (n > 0)
    for_each_strided(lanes, x.strides(), 0, [&](std::int64_t i, std::int64_t at) {
      lane(in + at, x.strides()[a], out + (i / inner) * n * inner + i % inner, inner, n);
    });
  return y;
}

/// The lane's max, NaN if it holds one (so NaN propagates instead of being skipped).
template <class T>
T lane_max(const T* in, std::int64_t stride, std::int64_t n) {
  T m = -std::numeric_limits<T>::infinity();
  for (std::int64_t k = 0; k < n; ++k) {
    const T v = in[k * stride];
    if (v > m || std::isnan(v)) m = std::isnan(m) ? m : v;
  }
  return m;
}

std::int64_t softmax_axis(const Tensor& x, std::int64_t axis, std::string_view op) {
  check(x.defined(), "{}: the input tensor is undefined", op);
  return normalize_axis(axis, x.ndim(), op);
}

}  // namespace

Tensor softmax(const Tensor& x, std::int64_t axis) {
  const std::int64_t a = softmax_axis(x, axis, "softmax");
  Tensor y = visit_floating(x.dtype(), "softmax", [&]<class T>() {
    return map_lanes<T>(x, a, [](const T* in, std::int64_t si, T* out, std::int64_t so, std::int64_t n) {
      const T m = lane_max(in, si, n);
      if (m == -std::numeric_limits<T>::infinity()) return;  // all -inf: zeros (the output starts zeroed)
      double total = 0.0;  // float32 sums in double
      for (std::int64_t k = 0; k < n; ++k) {
        const T e = std::exp(in[k * si] - m);
        out[k * so] = e;
        total += double(e);
      }
      const T inv = T(1.0 / total);
      for (std::int64_t k = 0; k < n; ++k) out[k * so] *= inv;
    });
  });
  if (autograd::needs_recording({&x}))
    autograd::record("softmax", {x}, {y}, [y, a](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{mul(y, sub(g[0], sum(mul(g[0], y), {a}, /*keepdims=*/true)))};
    });
  return y;
}

Tensor log_softmax(const Tensor& x, std::int64_t axis) {
  const std::int64_t a = softmax_axis(x, axis, "log_softmax");
  Tensor y = visit_floating(x.dtype(), "log_softmax", [&]<class T>() {
    return map_lanes<T>(x, a, [](const T* in, std::int64_t si, T* out, std::int64_t so, std::int64_t n) {
      const T m = lane_max(in, si, n);
      if (m == -std::numeric_limits<T>::infinity()) {  // all -inf: log(0) = -inf everywhere
        for (std::int64_t k = 0; k < n; ++k) out[k * so] = m;
        return;
      }
      double total = 0.0;
      for (std::int64_t k = 0; k < n; ++k) total += std::exp(double(in[k * si] - m));
      const T log_total = T(std::log(total));
      for (std::int64_t k = 0; k < n; ++k) out[k * so] = (in[k * si] - m) - log_total;
    });
  });
  if (autograd::needs_recording({&x}))
    autograd::record("log_softmax", {x}, {y}, [y, a](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{sub(g[0], mul(exp(y), sum(g[0], {a}, /*keepdims=*/true)))};
    });
  return y;
}

Tensor log_sigmoid(const Tensor& x) {
  check(x.defined(), "log_sigmoid: the input tensor is undefined");
  Tensor y = visit_floating(x.dtype(), "log_sigmoid", [&]<class T>() {
    Tensor out = Tensor::empty(x.shape(), x.dtype());
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
  check(depth > 0, "one_hot: depth must be positive, got {}", depth);
  check(is_floating(dtype), "one_hot: the result dtype must be float32 or float64, got {}", dtype);
  check_class_labels(labels, depth, "one_hot");
  Shape shape = labels.shape();
  shape.push_back(depth);
  Tensor y = Tensor::empty(shape, dtype);
  visit_floating(dtype, "one_hot", [&]<class T>() {
    const std::int64_t* in = labels.data<std::int64_t>();
    T* out = y.data<T>();
    for_each_strided(labels.shape(), labels.strides(), 0,
                     [&](std::int64_t i, std::int64_t at) { out[i * depth + in[at]] = T(1); });
  });
  return y;
}

Tensor dropout(const Tensor& x, double rate, bool training, std::optional<std::uint64_t> seed) {
  check(x.defined(), "dropout: the input tensor is undefined");
  check(is_floating(x.dtype()), "dropout: expected a float32 or float64 tensor, got {} of shape {}", x.dtype(),
        x.shape());
  check(rate >= 0.0 && rate < 1.0, "dropout: rate must be in [0, 1), got {}", rate);
  if (!training || rate == 0.0) return x;
  // The mask holds 0 or 1/(1-rate); x * mask through ops::mul gives the backward g * mask for free.
  Tensor mask = Tensor::empty(x.shape(), x.dtype());
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
