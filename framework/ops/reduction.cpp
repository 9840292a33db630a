#include "framework/ops/reduction.hpp"

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
#include "framework/ops/shape.hpp"
#include "framework/runtime/detail/parallel.hpp"
#include "framework/tensor/memory.hpp"

// The kernels are plain loops over a strided walk (strided.hpp) rather than xtensor reducers: one walk
// serves sum, max, min, argmax and logsumexp over any strides (0-strided broadcasts included), float32 sums
// accumulate in double for precision, and the walk visits the input in memory order, which keeps
// reductions over leading axes (the tape's sum_to of a bias gradient) cache-friendly and vectorizable.

namespace loom::ops {

namespace {

/// Where a reduction writes: `kept` is the input shape with 1 on reduced axes (the keepdims shape), `out` the
/// result's shape; both are laid out the same. `to_out` maps each input axis into the output (0 if reduced).
struct Plan {
  std::vector<std::int64_t> axes;
  Shape kept, out;
  Strides to_out;
  std::int64_t count = 1;  // elements reduced into each output
};

Plan make_plan(const Shape& in, std::vector<std::int64_t> axes, bool keepdims) {
  Plan p;
  p.axes = std::move(axes);
  p.kept = in;
  for (auto axis : p.axes) {
    p.count *= in[std::size_t(axis)];
    p.kept[std::size_t(axis)] = 1;
  }
  p.to_out = contiguous_strides(p.kept);
  for (auto axis : p.axes) p.to_out[std::size_t(axis)] = 0;
  for (std::size_t d = 0; d < in.size(); ++d)
    if (keepdims || std::find(p.axes.begin(), p.axes.end(), std::int64_t(d)) == p.axes.end())
      p.out.push_back(p.kept[d]);
  return p;
}

Plan plan_for(const Tensor& x, const Axes& axes, bool keepdims, std::string_view op) {
  check_floating(x, op);
  Plan p = make_plan(x.shape(), normalize_axes(axes, x.ndim(), op), keepdims);
  check_fits_in_memory(numel(p.kept), sizeof(double), "{}: the accumulators of an output of shape {}", op, p.out);
  return p;
}

/// Input elements per piece of parallel work.
constexpr std::int64_t kReduceGrain = 32768;

/// One Acc per output element: combine(acc, value) over its reduced elements, merge(acc, acc) to join
/// partial results. The walk (in memory order) is cut along its outermost dimension into pieces that run in
/// parallel: pieces of a kept dimension fill disjoint outputs; pieces of a reduced one (a bias gradient's
/// batch) fill accumulators of their own, merged in piece order. Either way the result does not depend on
/// which thread ran which piece.
template <class T, class Acc, class Combine, class Merge>
std::vector<Acc> reduce(const Tensor& x, const Plan& p, Acc identity, Combine&& combine, Merge&& merge) {
  std::vector<Acc> acc(std::size_t(numel(p.kept)), identity);
  const detail::RunWalk<2> walk(x.shape(), {&x.strides(), &p.to_out}, /*memory_order=*/true);
  if (walk.empty() || walk.dims().empty() || x.numel() < 2 * kReduceGrain) {
    detail::reduce_into(acc, x.data<T>(), walk, identity, combine, merge);
    return acc;
  }
  const std::int64_t outer = walk.dims()[0], in_step = walk.strides(0)[0], out_step = walk.strides(1)[0];
  const std::int64_t grain = std::max<std::int64_t>(1, kReduceGrain / (x.numel() / outer));
  std::int64_t pieces = parallel::piece_count(outer, grain);
  if (out_step == 0)  // private accumulators: keep them a small fraction of the input
    pieces = std::clamp<std::int64_t>(x.numel() / (8 * std::int64_t(acc.size())), 1, pieces);
  std::vector<std::vector<Acc>> partial(out_step == 0 ? std::size_t(pieces) : 0, acc);
  parallel::for_pieces(outer, pieces, [&](std::int64_t piece, std::int64_t begin, std::int64_t end) {
    Shape dims = walk.dims();
    dims[0] = end - begin;
    const detail::RunWalk<2> part(dims, {&walk.strides(0), &walk.strides(1)});
    Acc* into = out_step == 0 ? partial[std::size_t(piece)].data() : acc.data() + begin * out_step;
    detail::reduce_into(into, x.data<T>() + begin * in_step, part, identity, combine, merge);
  });
  for (const auto& part : partial)
    for (std::size_t i = 0; i < acc.size(); ++i) acc[i] = merge(acc[i], part[i]);
  return acc;
}

const auto plus = [](double a, auto v) { return a + double(v); };

/// NaN-propagating max or min, as NumPy: once NaN, always NaN.
template <bool is_max>
const auto extreme = [](auto a, auto v) {
  if (std::isnan(a)) return a;
  return (is_max ? v > a : v < a) || std::isnan(v) ? v : a;
};

template <class T, class Acc>
Tensor to_tensor(const std::vector<Acc>& values, const Shape& shape) {
  Tensor y = Tensor::zeros(shape, dtype_of<T>());
  T* out = y.data<T>();
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = T(values[i]);
  return y;
}

/// The raw sum (double accumulation), not recorded.
Tensor sum_kernel(const Tensor& x, const Plan& p, std::string_view op, double scale = 1.0) {
  return visit_floating(x.dtype(), op, [&]<class T>() {
    auto acc = reduce<T>(x, p, 0.0, plus, plus);
    for (auto& a : acc) a *= scale;
    return to_tensor<T>(acc, p.out);
  });
}

template <bool is_max>
Tensor extremum_kernel(const Tensor& x, const Plan& p, std::string_view op) {
  return visit_floating(x.dtype(), op, [&]<class T>() {
    const T init = is_max ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
    auto acc = reduce<T>(x, p, init, extreme<is_max>, extreme<is_max>);
    return to_tensor<T>(acc, p.out);
  });
}

/// The gradient of a reduction back to the input: g (in the output shape) broadcast over the reduced axes.
Tensor expand_grad(const Tensor& g, const Shape& kept, const Shape& in) {
  return broadcast_to(g.shape() == kept ? g : reshape(g, kept), in);
}

template <bool is_max>
Tensor extremum(const Tensor& x, const Axes& axes, bool keepdims, const char* op) {
  const Plan p = plan_for(x, axes, keepdims, op);
  check(p.count > 0, "{}: cannot reduce over zero elements (shape {}, axes {})", op, x.shape(), p.axes);
  Tensor y = extremum_kernel<is_max>(x, p, op);
  if (autograd::needs_recording({&x}))
    autograd::record(op, {x}, {y}, [x, y, p](const std::vector<Tensor>& g) {
      // Ties share the gradient equally (TensorFlow's rule); the mask is a constant.
      const Tensor y_kept = y.shape() == p.kept ? y : reshape(y, p.kept);
      const Tensor mask = cast(equal(x, y_kept), x.dtype());
      const Tensor share = div(mask, sum(mask, p.axes, /*keepdims=*/true));
      return std::vector<Tensor>{mul(share, g[0].shape() == p.kept ? g[0] : reshape(g[0], p.kept))};
    });
  return y;
}

template <bool is_max>
Tensor arg_extremum(const Tensor& x, std::int64_t axis, bool keepdims, const char* op) {
  check_floating(x, op);
  const Plan p = make_plan(x.shape(), {normalize_axis(axis, x.ndim(), op)}, keepdims);
  check(p.count > 0, "{}: cannot reduce over zero elements (shape {}, axis {})", op, x.shape(), axis);
  return visit_floating(x.dtype(), op, [&]<class T>() {
    // The walk visits each output's reduced elements in increasing index, so a per-output counter is the
    // index along the axis, and a strict comparison keeps the first occurrence.
    const std::size_t n = std::size_t(numel(p.kept));
    std::vector<T> best(n, is_max ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity());
    std::vector<std::int64_t> seen(n, 0), where(n, 0);
    const T* in = x.data<T>();
    detail::for_each_run<2>(x.shape(), {&x.strides(), &p.to_out}, [&](const auto& pos, const auto& step,
                                                                       std::int64_t len) {
      for (std::int64_t j = 0; j < len; ++j) {
        const auto o = std::size_t(pos[1] + j * step[1]);
        const T v = in[pos[0] + j * step[0]];
        // NaN wins and sticks, as in NumPy.
        const bool better = !std::isnan(best[o]) && (std::isnan(v) || (is_max ? v > best[o] : v < best[o]));
        if (seen[o] == 0 || better) {
          best[o] = v;
          where[o] = seen[o];
        }
        ++seen[o];
      }
    });
    Tensor y = Tensor::zeros(p.out, DType::i64);
    std::copy(where.begin(), where.end(), y.data<std::int64_t>());
    return y;
  });
}

/// A reduction's arguments as keras.ops names them: every axis is axis=None.
graph::Attributes reduction_attributes(const Axes& axes, bool keepdims) {
  graph::Attribute axis;
  if (!axes.empty()) axis = std::vector<std::int64_t>(axes.begin(), axes.end());
  return {{"axis", axis}, {"keepdims", keepdims}};
}

}  // namespace

Tensor sum(const Tensor& x, const Axes& axes, bool keepdims) {
  if (graph::any_symbolic(x))
    return graph::record_op("sum", {x}, [=](const std::vector<Tensor>& v) { return sum(v[0], axes, keepdims); },
                            reduction_attributes(axes, keepdims));
  const Plan p = plan_for(x, axes, keepdims, "sum");
  Tensor y = sum_kernel(x, p, "sum");
  if (autograd::needs_recording({&x}))
    autograd::record("sum", {x}, {y}, [kept = p.kept, in = x.shape()](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{expand_grad(g[0], kept, in)};
    });
  return y;
}

Tensor mean(const Tensor& x, const Axes& axes, bool keepdims) {
  if (graph::any_symbolic(x))
    return graph::record_op("mean", {x}, [=](const std::vector<Tensor>& v) { return mean(v[0], axes, keepdims); },
                            reduction_attributes(axes, keepdims));
  const Plan p = plan_for(x, axes, keepdims, "mean");
  check(p.count > 0, "mean: cannot average over zero elements (shape {}, axes {})", x.shape(), p.axes);
  const double scale = 1.0 / double(p.count);
  Tensor y = sum_kernel(x, p, "mean", scale);
  if (autograd::needs_recording({&x}))
    autograd::record("mean", {x}, {y}, [kept = p.kept, in = x.shape(), scale](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{expand_grad(g[0] * scale, kept, in)};
    });
  return y;
}

Tensor var(const Tensor& x, const Axes& axes, bool keepdims) {
  if (graph::any_symbolic(x))
    return graph::record_op("var", {x}, [=](const std::vector<Tensor>& v) { return var(v[0], axes, keepdims); },
                            reduction_attributes(axes, keepdims));
  const Plan p = plan_for(x, axes, keepdims, "var");
  check(p.count > 0, "var: cannot take the variance of zero elements (shape {}, axes {})", x.shape(), p.axes);
  // Two passes (mean first) for accuracy; composed of recorded ops, so every order of gradient is exact.
  return mean(square(sub(x, mean(x, p.axes, /*keepdims=*/true))), p.axes, keepdims);
}

Tensor max(const Tensor& x, const Axes& axes, bool keepdims) {
  if (graph::any_symbolic(x))
    return graph::record_op("max", {x}, [=](const std::vector<Tensor>& v) { return max(v[0], axes, keepdims); },
                            reduction_attributes(axes, keepdims));
  return extremum<true>(x, axes, keepdims, "max");
}
Tensor min(const Tensor& x, const Axes& axes, bool keepdims) {
  if (graph::any_symbolic(x))
    return graph::record_op("min", {x}, [=](const std::vector<Tensor>& v) { return min(v[0], axes, keepdims); },
                            reduction_attributes(axes, keepdims));
  return extremum<false>(x, axes, keepdims, "min");
}

Tensor argmax(const Tensor& x, std::int64_t axis, bool keepdims) {
  if (graph::any_symbolic(x))
    return graph::record_op("argmax", {x}, [=](const std::vector<Tensor>& v) { return argmax(v[0], axis, keepdims); },
                            {{"axis", axis}, {"keepdims", keepdims}});
  return arg_extremum<true>(x, axis, keepdims, "argmax");
}
Tensor argmin(const Tensor& x, std::int64_t axis, bool keepdims) {
  if (graph::any_symbolic(x))
    return graph::record_op("argmin", {x}, [=](const std::vector<Tensor>& v) { return argmin(v[0], axis, keepdims); },
                            {{"axis", axis}, {"keepdims", keepdims}});
  return arg_extremum<false>(x, axis, keepdims, "argmin");
}

Tensor logsumexp(const Tensor& x, const Axes& axes, bool keepdims) {
  if (graph::any_symbolic(x))
    return graph::record_op("logsumexp", {x},
                            [=](const std::vector<Tensor>& v) { return logsumexp(v[0], axes, keepdims); },
                            reduction_attributes(axes, keepdims));
  const Plan p = plan_for(x, axes, keepdims, "logsumexp");
  bool any_dead = false;  // an output whose inputs are all -inf (or that reduces nothing): log(0) = -inf
  Tensor shift_kept;      // the max per output, 0 where it is -inf: the backward's constant shift
  Tensor y = visit_floating(x.dtype(), "logsumexp", [&]<class T>() {
    auto shift = reduce<T>(x, p, -std::numeric_limits<T>::infinity(), extreme<true>, extreme<true>);
    // Shifting by the max keeps exp() in range; an infinite max is the answer itself (and avoids inf - inf).
    std::vector<double> total(shift.size(), 0.0);
    const T* in = x.data<T>();
    detail::for_each_run<2>(x.shape(), {&x.strides(), &p.to_out}, [&](const auto& pos, const auto& step,
                                                                       std::int64_t len) {
      for (std::int64_t j = 0; j < len; ++j) {
        const auto o = std::size_t(pos[1] + j * step[1]);
        if (std::isfinite(shift[o])) total[o] += double(std::exp(in[pos[0] + j * step[0]] - shift[o]));
      }
    }, /*memory_order=*/true);
    for (std::size_t i = 0; i < shift.size(); ++i) {
      any_dead = any_dead || shift[i] == -std::numeric_limits<T>::infinity();
      if (std::isfinite(shift[i])) total[i] = double(shift[i]) + std::log(total[i]);
      else total[i] = double(shift[i]);
      if (shift[i] == -std::numeric_limits<T>::infinity()) shift[i] = T(0);
    }
    shift_kept = to_tensor<T>(shift, p.kept);
    return to_tensor<T>(total, p.out);
  });
  if (autograd::needs_recording({&x}))
    autograd::record("logsumexp", {x}, {y}, [x, shift_kept, p, any_dead](const std::vector<Tensor>& g) {
      // d/dx = softmax(x) = exp(x - max) / sum(exp(x - max)). Not exp(x - y): that carries y's rounding
      // (1e-3 relative at logits of 1e4 in float32). Softmax ignores the shift, so the max is a constant
      // and this differentiates again.
      const Tensor e = exp(sub(x, shift_kept));
      Tensor total = sum(e, p.axes, /*keepdims=*/true);
      // All -inf rows: every e is 0; divide by 1 instead of 0 so their gradient is 0, not NaN.
      if (any_dead) total = where(equal(total, Tensor::scalar(0.0, total.dtype())), Tensor::scalar(1.0, total.dtype()), total);
      const Tensor g_kept = g[0].shape() == p.kept ? g[0] : reshape(g[0], p.kept);
      return std::vector<Tensor>{mul(g_kept, div(e, total))};
    });
  return y;
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (graph::any_symbolic(x))
    return graph::record_op("sum_to", {x}, [=](const std::vector<Tensor>& v) { return sum_to(v[0], shape); });
  check_defined(x, "sum_to");
  const Shape& in = x.shape();
  bool compatible = shape.size() <= in.size();
  for (std::size_t j = 0; compatible && j < shape.size(); ++j) {
    const std::int64_t d = in[in.size() - shape.size() + j];
    compatible = shape[j] == d || shape[j] == 1;
  }
  check(compatible, "sum_to: cannot sum shape {} down to shape {}: the target must broadcast to the input", in,
        shape);
  if (in == shape) return x;
  // Reduced axes: the leading extra ones, and those where the target has 1.
  Axes axes;
  const std::size_t lead = in.size() - shape.size();
  for (std::size_t d = 0; d < in.size(); ++d)
    if (d < lead || (shape[d - lead] == 1 && in[d] != 1)) axes.push_back(std::int64_t(d));
  Plan p = make_plan(in, axes, /*keepdims=*/true);
  p.out = shape;
  Tensor y = sum_kernel(x, p, "sum_to");
  if (autograd::needs_recording({&x}))
    autograd::record("sum_to", {x}, {y}, [in](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{broadcast_to(g[0], in)};
    });
  return y;
}

}  // namespace loom::ops
