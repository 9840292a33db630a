#include "framework/ops/shape.hpp"

#include <algorithm>
#include <array>
#include <numeric>
#include <optional>
#include <utility>

#include "framework/autograd/record.hpp"
#include "framework/autograd/tape.hpp"
#include "framework/graph/symbolic.hpp"
#include "framework/kernels/dispatch.hpp"
#include "framework/kernels/strided.hpp"
#include "framework/ops/detail/input_checks.hpp"
#include "framework/ops/ops.hpp"
#include "framework/tensor/detail/tensor_impl.hpp"

namespace loom::ops {

namespace {

void check_indices_tensor(const Tensor& indices, std::string_view op) {
  check(indices.defined(), "{}: the indices tensor is undefined", op);
  check(indices.dtype() == DType::i64, "{}: indices must be i64, got {} of shape {}", op, indices.dtype(),
        indices.shape());
}

// ---- strided copies ----
// Copies and gathers read and write through arbitrary strides (views, 0-stride broadcasts) with the walk of
// strided.hpp, in plain loops rather than xtensor: the walk merges what is contiguous for both operands, so a
// contiguous or row-contiguous copy becomes a few long rows that std::copy_n turns into memcpy.

/// dst[i] = src[i] for every index of `shape`; positions are relative to the two pointers.
template <class T>
void copy_strided(T* dst, const Strides& dst_strides, const T* src, const Strides& src_strides, const Shape& shape) {
  const detail::RunWalk<2> walk(shape, {&dst_strides, &src_strides});
  if (walk.empty()) return;
  const Shape& dims = walk.dims();
  const Strides& ds = walk.strides(0);
  const Strides& ss = walk.strides(1);
  const std::size_t last = dims.empty() ? 0 : dims.size() - 1;
  std::size_t j = 0;  // a source dimension of unit stride, if any, when the rows are not
  while (j < last && ss[j] != 1) ++j;
  if (j < last && ds[last] == 1 && ss[last] != 1) {
    // A transpose: copying row by row would read one element per cache line. Copy tiles of dimensions j and
    // last instead, so the lines of a tile's source stay in L1 while it is written; a second walk covers
    // every other dimension.
    constexpr std::int64_t kTile = 32;
    const std::int64_t rows = dims[j], n = dims[last], dr = ds[j], sc = ss[last];
    Shape outer;
    Strides outer_ds, outer_ss;
    for (std::size_t d = 0; d < last; ++d) {
      if (d == j) continue;
      outer.push_back(dims[d]);
      outer_ds.push_back(ds[d]);
      outer_ss.push_back(ss[d]);
    }
    const auto tiles = [&](const auto& pos, const auto& step, std::int64_t len) {
      for (std::int64_t l = 0; l < len; ++l) {
        T* to = dst + pos[0] + l * step[0];
        const T* from = src + pos[1] + l * step[1];
        for (std::int64_t r0 = 0; r0 < rows; r0 += kTile)
          for (std::int64_t c0 = 0; c0 < n; c0 += kTile)
            for (std::int64_t r = r0; r < std::min(r0 + kTile, rows); ++r)
              for (std::int64_t c = c0; c < std::min(c0 + kTile, n); ++c) to[r * dr + c] = from[r + c * sc];
      }
    };
    detail::for_each_run<2>(outer, {&outer_ds, &outer_ss}, tiles);
    return;
  }
  walk([&](const auto& pos, const auto& step, std::int64_t n) {
    T* d = dst + pos[0];
    const T* s = src + pos[1];
    if (step[0] == 1 && step[1] == 1) std::copy_n(s, n, d);
    else for (std::int64_t c = 0; c < n; ++c) d[c * step[0]] = s[c * step[1]];
  });
}

/// Copies src into dst: same shape and dtype, any strides (dst must not overlap itself).
void assign(const Tensor& dst, const Tensor& src) {
  visit_dtype(dst.dtype(), [&]<class T>() {
    copy_strided(dst.data<T>(), dst.strides(), static_cast<const T*>(src.data<T>()), src.strides(), dst.shape());
  });
}

/// A fresh contiguous copy, not recorded.
Tensor copy_of(const Tensor& x) {
  Tensor y = Tensor::empty(x.shape(), x.dtype());  // assign writes every element
  assign(y, x);
  return y;
}

Tensor recorded_copy(const Tensor& x, const char* op) {
  Tensor y = copy_of(x);
  if (autograd::needs_recording({&x}))
    autograd::record(op, {x}, {y}, [](const std::vector<Tensor>& g) { return std::vector<Tensor>{g[0]}; });
  return y;
}

// ---- slices ----

struct SliceRange {
  std::int64_t start, stop, length;  // start and stop clamped into [0, size]
};

/// Python slice semantics for a positive step: negative bounds count from the end, then both are clamped.
SliceRange slice_range(std::int64_t size, std::int64_t start, std::int64_t stop, std::int64_t step) {
  const auto clamp = [size](std::int64_t i) { return std::clamp<std::int64_t>(i < 0 ? i + size : i, 0, size); };
  start = clamp(start);
  stop = clamp(stop);
  return {start, stop, stop > start ? (stop - start - 1) / step + 1 : 0};  // no stop - start + step: it can wrap
}

/// The unrecorded view of `length` elements start, start+step, ... along axis a.
Tensor slice_view(const Tensor& x, std::int64_t a, std::int64_t start, std::int64_t length, std::int64_t step) {
  Shape shape = x.shape();
  Strides strides = x.strides();
  const auto d = std::size_t(a);
  const std::int64_t offset = x.offset() + start * strides[d];
  shape[d] = length;
  if (length > 1) strides[d] = checked_mul(strides[d], step, "slice: the stride along the sliced axis");
  return make_view(x, std::move(shape), std::move(strides), offset);
}

Shape drop_axis(const Shape& shape, std::int64_t a) {
  Shape out = shape;
  out.erase(out.begin() + a);
  return out;
}

// ---- indices ----

/// The indices' values, row-major, each checked to lie in [0, size).
std::vector<std::int64_t> checked_indices(const Tensor& indices, std::int64_t size, std::int64_t axis,
                                          const Shape& shape, std::string_view op) {
  std::vector<std::int64_t> values = indices.to_vector<std::int64_t>();
  for (std::int64_t i : values) {
    check(i >= 0, "{}: negative index {} for axis {} of size {} (shape {}); negative indices are not supported", op,
          i, axis, size, shape);
    check(i < size, "{}: index {} is out of range for axis {} of size {} (shape {})", op, i, axis, size, shape);
  }
  return values;
}

/// Walks every position p of `shape` outside axis a, calling visit(at) where at[k] is operand k's position of
/// p with p[a] = 0; the visitor loops along the axis itself. Operand k has strides[k] (0 where it broadcasts).
template <class Visit>
void walk_along_axis(const Shape& shape, std::int64_t a, const std::array<Strides, 3>& strides, Visit&& visit) {
  if (numel(shape) == 0) return;
  std::array<Strides, 3> outer;
  for (std::size_t k = 0; k < 3; ++k) outer[k] = drop_axis(strides[k], a);
  const auto run = [&](const auto& pos, const auto& step, std::int64_t n) {
    for (std::int64_t j = 0; j < n; ++j)
      visit(std::array<std::int64_t, 3>{pos[0] + j * step[0], pos[1] + j * step[1], pos[2] + j * step[2]});
  };
  detail::for_each_run<3>(drop_axis(shape, a), {&outer[0], &outer[1], &outer[2]}, run);
}

/// t's strides for walking `shape` along axis a: 0 on the dimensions where t broadcasts (size 1 against more).
Strides along_axis_strides(const Tensor& t, const Shape& shape, std::int64_t a) {
  Strides out = t.strides();
  for (std::size_t d = 0; d < shape.size(); ++d)
    if (std::int64_t(d) != a && t.shape()[d] != shape[d]) out[d] = 0;
  return out;
}

}  // namespace

// ---- views ----

Tensor reshape(const Tensor& x, const Shape& shape) {
  if (graph::any_symbolic(x))
    return graph::record_op("reshape", {x}, [=](const std::vector<Tensor>& v) { return reshape(v[0], shape); },
                            {{"newshape", std::vector<std::int64_t>(shape.begin(), shape.end())}});
  check_defined(x, "reshape");
  Shape target = shape;
  std::int64_t known = 1;
  std::optional<std::size_t> inferred;
  for (std::size_t d = 0; d < target.size(); ++d) {
    if (target[d] == -1) {
      check(!inferred, "reshape: only one dimension may be -1, got shape {}", shape);
      inferred = d;
    } else {
      check(target[d] >= 0, "reshape: invalid dimension {} in shape {}", target[d], shape);
      check(!__builtin_mul_overflow(known, target[d], &known),
            "reshape: shape {} has more elements than a 64-bit count holds", shape);
    }
  }
  if (inferred) {
    check(known != 0 && x.numel() % known == 0,
          "reshape: cannot reshape a tensor of shape {} ({} elements) into shape {}", x.shape(), x.numel(), shape);
    target[*inferred] = x.numel() / known;
  }
  check(fits_in_int64(target), "reshape: the strides of shape {} do not fit in a 64-bit size", shape);
  check(numel(target) == x.numel(),
        "reshape: cannot reshape a tensor of shape {} ({} elements) into shape {} ({} elements)", x.shape(),
        x.numel(), shape, numel(target));

  const Tensor base = x.is_contiguous() ? x : contiguous(x);
  Tensor y = make_view(base, target, contiguous_strides(target), base.offset());
  if (autograd::needs_recording({&base}))
    autograd::record("reshape", {base}, {y}, [in_shape = base.shape()](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{reshape(g[0], in_shape)};
    });
  return y;
}

Tensor permute(const Tensor& x, const std::vector<std::int64_t>& axes) {
  if (graph::any_symbolic(x))
    return graph::record_op("permute", {x}, [=](const std::vector<Tensor>& v) { return permute(v[0], axes); },
                            {{"axes", axes}});
  check_defined(x, "permute");
  const std::int64_t rank = x.ndim();
  check(std::int64_t(axes.size()) == rank, "permute: expected {} axes for a tensor of shape {}, got {}", rank,
        x.shape(), axes);
  std::vector<std::int64_t> inverse(axes.size(), -1);
  Shape shape(axes.size());
  Strides strides(axes.size());
  for (std::size_t i = 0; i < axes.size(); ++i) {
    const auto a = std::size_t(normalize_axis(axes[i], rank, "permute"));
    check(inverse[a] < 0, "permute: axes {} are not a permutation of the {} dimensions of shape {} (axis {} repeats)",
          axes, rank, x.shape(), a);
    inverse[a] = std::int64_t(i);
    shape[i] = x.shape()[a];
    strides[i] = x.strides()[a];
  }
  Tensor y = make_view(x, std::move(shape), std::move(strides), x.offset());
  if (autograd::needs_recording({&x}))
    autograd::record("permute", {x}, {y}, [inverse](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{permute(g[0], inverse)};
    });
  return y;
}

Tensor transpose(const Tensor& x, std::int64_t axis0, std::int64_t axis1) {
  if (graph::any_symbolic(x))
    return graph::record_op("transpose", {x},
                            [=](const std::vector<Tensor>& v) { return transpose(v[0], axis0, axis1); });
  check_defined(x, "transpose");
  const auto a = std::size_t(normalize_axis(axis0, x.ndim(), "transpose"));
  const auto b = std::size_t(normalize_axis(axis1, x.ndim(), "transpose"));
  std::vector<std::int64_t> axes(std::size_t(x.ndim()));
  std::iota(axes.begin(), axes.end(), std::int64_t{0});
  std::swap(axes[a], axes[b]);
  return permute(x, axes);
}

Tensor slice(const Tensor& x, std::int64_t axis, std::int64_t start, std::int64_t stop, std::int64_t step) {
  if (graph::any_symbolic(x))
    return graph::record_op("slice", {x},
                            [=](const std::vector<Tensor>& v) { return slice(v[0], axis, start, stop, step); });
  check_defined(x, "slice");
  const std::int64_t a = normalize_axis(axis, x.ndim(), "slice");
  check(step >= 1, "slice: step must be >= 1, got {} (axis {} of shape {})", step, axis, x.shape());
  const SliceRange r = slice_range(x.shape()[std::size_t(a)], start, stop, step);
  Tensor y = slice_view(x, a, r.start, r.length, step);
  if (autograd::needs_recording({&x}))
    autograd::record("slice", {x}, {y}, [shape = x.shape(), a, r, step](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{slice_backward(g[0], shape, a, r.start, r.stop, step)};
    });
  return y;
}

Tensor slice_backward(const Tensor& grad, const Shape& shape, std::int64_t axis, std::int64_t start,
                      std::int64_t stop, std::int64_t step) {
  check_defined(grad, "slice_backward");
  const std::int64_t a = normalize_axis(axis, std::int64_t(shape.size()), "slice_backward");
  check(step >= 1, "slice_backward: step must be >= 1, got {}", step);
  const SliceRange r = slice_range(shape[std::size_t(a)], start, stop, step);
  Shape expected = shape;
  expected[std::size_t(a)] = r.length;
  check(grad.shape() == expected,
        "slice_backward: grad has shape {}, expected {} (slice {}:{}:{} of axis {} of shape {})", grad.shape(),
        expected, start, stop, step, axis, shape);
  Tensor y = Tensor::zeros(shape, grad.dtype());
  assign(slice_view(y, a, r.start, r.length, step), grad);
  if (autograd::needs_recording({&grad}))
    autograd::record("slice_backward", {grad}, {y}, [a, r, step](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{slice(g[0], a, r.start, r.stop, step)};
    });
  return y;
}

Tensor broadcast_to(const Tensor& x, const Shape& shape) {
  if (graph::any_symbolic(x))
    return graph::record_op("broadcast_to", {x},
                            [=](const std::vector<Tensor>& v) { return broadcast_to(v[0], shape); });
  check_defined(x, "broadcast_to");
  const std::size_t rank = shape.size();
  const std::size_t in_rank = x.shape().size();
  check(rank >= in_rank, "broadcast_to: cannot broadcast shape {} to {} (fewer dimensions)", x.shape(), shape);
  const std::size_t lead = rank - in_rank;
  Strides strides(rank, 0);
  for (std::size_t d = 0; d < rank; ++d) {
    check(shape[d] >= 0, "broadcast_to: invalid target shape {}", shape);
    if (d < lead) continue;
    const std::int64_t size = x.shape()[d - lead];
    check(size == shape[d] || size == 1, "broadcast_to: cannot broadcast shape {} to {} (dimension {}: {} vs {})",
          x.shape(), shape, d, size, shape[d]);
    if (size == shape[d]) strides[d] = x.strides()[d - lead];
  }
  // A view allocates nothing, so no factory would notice a count that overflows.
  check(fits_in_int64(shape), "broadcast_to: target shape {} has more elements than a 64-bit count holds", shape);
  Tensor y = make_view(x, shape, std::move(strides), x.offset());
  if (autograd::needs_recording({&x}))
    autograd::record("broadcast_to", {x}, {y}, [in_shape = x.shape()](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{sum_to(g[0], in_shape)};
    });
  return y;
}

Tensor expand_dims(const Tensor& x, std::int64_t axis) {
  if (graph::any_symbolic(x))
    return graph::record_op("expand_dims", {x}, [=](const std::vector<Tensor>& v) { return expand_dims(v[0], axis); },
                            {{"axis", axis}});
  check_defined(x, "expand_dims");
  const std::int64_t a = normalize_axis(axis, x.ndim() + 1, "expand_dims");
  Shape shape = x.shape();
  Strides strides = x.strides();
  // any stride serves a dimension of size 1; this one keeps a contiguous tensor contiguous
  const std::int64_t stride = a < x.ndim() ? shape[std::size_t(a)] * strides[std::size_t(a)] : 1;
  shape.insert(shape.begin() + a, 1);
  strides.insert(strides.begin() + a, stride);
  Tensor y = make_view(x, std::move(shape), std::move(strides), x.offset());
  if (autograd::needs_recording({&x}))
    autograd::record("expand_dims", {x}, {y}, [a](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{squeeze(g[0], a)};
    });
  return y;
}

Tensor squeeze(const Tensor& x, std::int64_t axis) {
  if (graph::any_symbolic(x))
    return graph::record_op("squeeze", {x}, [=](const std::vector<Tensor>& v) { return squeeze(v[0], axis); },
                            {{"axis", axis}});
  check_defined(x, "squeeze");
  const std::int64_t a = normalize_axis(axis, x.ndim(), "squeeze");
  check(x.shape()[std::size_t(a)] == 1, "squeeze: axis {} of shape {} has size {}, expected 1", axis, x.shape(),
        x.shape()[std::size_t(a)]);
  Tensor y = make_view(x, drop_axis(x.shape(), a), drop_axis(x.strides(), a), x.offset());
  if (autograd::needs_recording({&x}))
    autograd::record("squeeze", {x}, {y}, [a](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{expand_dims(g[0], a)};
    });
  return y;
}

Tensor flatten(const Tensor& x, std::int64_t start_axis) {
  if (graph::any_symbolic(x))
    return graph::record_op("flatten", {x}, [=](const std::vector<Tensor>& v) { return flatten(v[0], start_axis); });
  check_defined(x, "flatten");
  if (x.ndim() == 0) {  // as torch.flatten: a scalar becomes [1]
    check(start_axis == 0 || start_axis == -1, "flatten: axis {} is out of range for a tensor of rank 0", start_axis);
    return reshape(x, {1});
  }
  const std::int64_t a = normalize_axis(start_axis, x.ndim(), "flatten");
  Shape shape(x.shape().begin(), x.shape().begin() + a);
  shape.push_back(numel(Shape(x.shape().begin() + a, x.shape().end())));  // not -1: zero elements would not infer
  return reshape(x, shape);
}

Tensor contiguous(const Tensor& x) {
  if (graph::any_symbolic(x))
    return graph::record_op("contiguous", {x}, [](const std::vector<Tensor>& v) { return contiguous(v[0]); });
  check_defined(x, "contiguous");
  if (x.is_contiguous()) return x;
  return recorded_copy(x, "contiguous");
}

Tensor clone(const Tensor& x) {
  if (graph::any_symbolic(x))
    return graph::record_op("clone", {x}, [](const std::vector<Tensor>& v) { return clone(v[0]); });
  check_defined(x, "clone");
  return recorded_copy(x, "clone");
}

// ---- joining and splitting ----

Tensor concat(const std::vector<Tensor>& xs, std::int64_t axis) {
  if (graph::any_symbolic(xs))
    return graph::record_op("concat", xs, [axis](const std::vector<Tensor>& v) { return concat(v, axis); },
                            {{"axis", axis}});
  check(!xs.empty(), "concat: expected at least one tensor, got an empty list");
  for (std::size_t i = 0; i < xs.size(); ++i) check(xs[i].defined(), "concat: tensor {} is undefined", i);
  const Tensor& first = xs[0];
  const std::int64_t a = normalize_axis(axis, first.ndim(), "concat");
  Shape shape = first.shape();
  shape[std::size_t(a)] = 0;
  std::vector<std::int64_t> sizes;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const Tensor& x = xs[i];
    check(x.dtype() == first.dtype(), "concat: tensor {} has dtype {} but tensor 0 has {} (shapes {} and {})", i,
          x.dtype(), first.dtype(), x.shape(), first.shape());
    check(x.ndim() == first.ndim(), "concat: tensor {} has shape {} but tensor 0 has shape {} (ranks differ)", i,
          x.shape(), first.shape());
    for (std::size_t d = 0; d < shape.size(); ++d)
      check(std::int64_t(d) == a || x.shape()[d] == first.shape()[d],
            "concat: tensor {} has shape {} but tensor 0 has shape {}; they may differ only on axis {}", i,
            x.shape(), first.shape(), a);
    sizes.push_back(x.shape()[std::size_t(a)]);
    shape[std::size_t(a)] = checked_add(shape[std::size_t(a)], sizes.back(), "concat: the size of the joined axis");
  }
  Tensor y = Tensor::empty(shape, first.dtype());  // the parts cover it
  std::int64_t at = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    assign(slice_view(y, a, at, sizes[i], 1), xs[i]);
    at += sizes[i];
  }
  if (autograd::needs_recording(xs))
    autograd::record("concat", xs, {y}, [sizes, a](const std::vector<Tensor>& g) { return split(g[0], sizes, a); });
  return y;
}

Tensor stack(const std::vector<Tensor>& xs, std::int64_t axis) {
  if (graph::any_symbolic(xs))
    return graph::record_op("stack", xs, [axis](const std::vector<Tensor>& v) { return stack(v, axis); },
                            {{"axis", axis}});
  check(!xs.empty(), "stack: expected at least one tensor, got an empty list");
  for (std::size_t i = 0; i < xs.size(); ++i) {
    check(xs[i].defined(), "stack: tensor {} is undefined", i);
    check(xs[i].shape() == xs[0].shape() && xs[i].dtype() == xs[0].dtype(),
          "stack: tensor {} is {} of shape {} but tensor 0 is {} of shape {}; all must match", i, xs[i].dtype(),
          xs[i].shape(), xs[0].dtype(), xs[0].shape());
  }
  const std::int64_t a = normalize_axis(axis, xs[0].ndim() + 1, "stack");
  // expand_dims views + one concat: the recorded pair gives the backward rule (slices, then squeeze)
  std::vector<Tensor> parts;
  parts.reserve(xs.size());
  for (const Tensor& x : xs) parts.push_back(expand_dims(x, a));
  return concat(parts, a);
}

Tensor pad(const Tensor& x, const std::vector<std::pair<std::int64_t, std::int64_t>>& widths, double value) {
  if (graph::any_symbolic(x))
    return graph::record_op("pad", {x}, [=](const std::vector<Tensor>& v) { return pad(v[0], widths, value); });
  check_defined(x, "pad");
  const std::size_t rank = x.shape().size();
  check(widths.size() == rank || widths.size() == 1,
        "pad: expected one (before, after) pair per axis of the input of shape {} ({}) or one for all, got {}",
        x.shape(), rank, widths);
  const auto per_axis = widths.size() == rank ? widths : std::vector(rank, widths[0]);
  Shape shape = x.shape();
  for (std::size_t d = 0; d < rank; ++d) {
    check(per_axis[d].first >= 0 && per_axis[d].second >= 0,
          "pad: widths must be non-negative, got {} for the input of shape {}", widths, x.shape());
    shape[d] = checked_add(checked_add(shape[d], per_axis[d].first, "pad: the padded size"), per_axis[d].second,
                           "pad: the padded size");
  }
  Tensor y = Tensor::full(shape, value, x.dtype());
  Tensor inside = y;
  for (std::size_t d = 0; d < rank; ++d)
    inside = slice_view(inside, std::int64_t(d), per_axis[d].first, x.shape()[d], 1);
  assign(inside, x);
  if (autograd::needs_recording({&x}))
    autograd::record("pad", {x}, {y}, [per_axis, in = x.shape()](const std::vector<Tensor>& g) {
      // slice is recorded too, so the gradient's own gradient (slice_backward: zero padding) comes for free
      Tensor inner = g[0];
      for (std::size_t d = 0; d < in.size(); ++d)
        inner = slice(inner, std::int64_t(d), per_axis[d].first, per_axis[d].first + in[d]);
      return std::vector<Tensor>{inner};
    });
  return y;
}

std::vector<Tensor> split(const Tensor& x, const std::vector<std::int64_t>& sizes, std::int64_t axis) {
  if (graph::is_symbolic(x))
    return graph::record(graph::unique_name("split"), "Split", {x},
                         [=](const std::vector<Tensor>& v, bool) { return split(v[0], sizes, axis); });
  check_defined(x, "split");
  const std::int64_t a = normalize_axis(axis, x.ndim(), "split");
  check(!sizes.empty(), "split: expected at least one part size for shape {}", x.shape());
  const std::int64_t size = x.shape()[std::size_t(a)];
  std::int64_t left = size;  // compared part by part: a running sum of the sizes could wrap
  for (std::int64_t s : sizes) check(s >= 0, "split: negative part size in {}", sizes);
  for (std::int64_t s : sizes) {
    check(s <= left, "split: part sizes {} add up to more than axis {} of shape {} holds (size {})", sizes, axis,
          x.shape(), size);
    left -= s;
  }
  check(left == 0, "split: part sizes {} add up to {}, but axis {} of shape {} has size {}", sizes, size - left,
        axis, x.shape(), size);
  std::vector<Tensor> parts;
  parts.reserve(sizes.size());
  std::int64_t at = 0;
  for (std::int64_t s : sizes) {
    parts.push_back(slice_view(x, a, at, s, 1));
    at += s;
  }
  // one node for all parts: the tape passes zeros for parts that got no gradient, and one concat rebuilds it
  if (autograd::needs_recording({&x}))
    autograd::record("split", {x}, parts, [a](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{concat(g, a)};
    });
  return parts;
}

std::vector<Tensor> split(const Tensor& x, std::int64_t sections, std::int64_t axis) {
  if (graph::is_symbolic(x))
    return graph::record(graph::unique_name("split"), "Split", {x},
                         [=](const std::vector<Tensor>& v, bool) { return split(v[0], sections, axis); });
  check_defined(x, "split");
  const std::int64_t a = normalize_axis(axis, x.ndim(), "split");
  const std::int64_t size = x.shape()[std::size_t(a)];
  check(sections >= 1 && size % sections == 0, "split: {} sections do not divide axis {} of shape {} (size {})",
        sections, axis, x.shape(), size);
  return split(x, std::vector<std::int64_t>(std::size_t(sections), size / sections), a);
}

// ---- indexing ----

Tensor take(const Tensor& x, const Tensor& indices, std::int64_t axis) {
  if (graph::any_symbolic(x, indices))
    return graph::record_op("take", {x, indices}, [=](const std::vector<Tensor>& v) { return take(v[0], v[1], axis); },
                            {{"axis", axis}});
  check_defined(x, "take");
  check_indices_tensor(indices, "take");
  const std::int64_t a = normalize_axis(axis, x.ndim(), "take");
  const Shape& xs = x.shape();
  const std::int64_t n = xs[std::size_t(a)];
  const std::vector<std::int64_t> idx = checked_indices(indices, n, a, xs, "take");

  Shape shape(xs.begin(), xs.begin() + a);
  shape.insert(shape.end(), indices.shape().begin(), indices.shape().end());
  shape.insert(shape.end(), xs.begin() + a + 1, xs.end());
  Tensor y = Tensor::zeros(shape, x.dtype());
  const Tensor src = x.is_contiguous() ? x : copy_of(x);
  const std::int64_t outer = numel(Shape(xs.begin(), xs.begin() + a));
  const std::int64_t inner = numel(Shape(xs.begin() + a + 1, xs.end()));
  const auto k_count = std::int64_t(idx.size());
  visit_dtype(x.dtype(), [&]<class T>() {
    const T* in = src.data<T>();
    T* out = y.data<T>();
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t k = 0; k < k_count; ++k)
        std::copy_n(in + (o * n + idx[std::size_t(k)]) * inner, inner, out + (o * k_count + k) * inner);
  });
  if (autograd::needs_recording({&x}))
    autograd::record("take", {x}, {y}, [indices, a, n](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{take_backward(g[0], indices, a, n)};
    });
  return y;
}

Tensor take_backward(const Tensor& grad, const Tensor& indices, std::int64_t axis, std::int64_t size) {
  check_defined(grad, "take_backward");
  check_indices_tensor(indices, "take_backward");
  const Shape& gs = grad.shape();
  const Shape& is = indices.shape();
  check(gs.size() >= is.size(), "take_backward: grad of shape {} has fewer dimensions than indices of shape {}", gs,
        is);
  const std::int64_t a = normalize_axis(axis, std::int64_t(gs.size() - is.size()) + 1, "take_backward");
  check(std::equal(is.begin(), is.end(), gs.begin() + a),
        "take_backward: grad of shape {} does not hold the indices' shape {} at axis {}", gs, is, axis);
  check(size >= 0, "take_backward: negative size {}", size);
  Shape shape(gs.begin(), gs.begin() + a);
  shape.push_back(size);
  shape.insert(shape.end(), gs.begin() + a + std::int64_t(is.size()), gs.end());
  const std::vector<std::int64_t> idx = checked_indices(indices, size, a, shape, "take_backward");

  Tensor y = Tensor::zeros(shape, grad.dtype());
  const Tensor src = grad.is_contiguous() ? grad : copy_of(grad);
  const std::int64_t outer = numel(Shape(gs.begin(), gs.begin() + a));
  const std::int64_t inner = numel(Shape(shape.begin() + a + 1, shape.end()));
  const auto k_count = std::int64_t(idx.size());
  visit_floating(grad.dtype(), "take_backward", [&]<class T>() {
    const T* in = src.data<T>();
    T* out = y.data<T>();
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t k = 0; k < k_count; ++k) {
        const T* from = in + (o * k_count + k) * inner;
        T* to = out + (o * size + idx[std::size_t(k)]) * inner;
        for (std::int64_t i = 0; i < inner; ++i) to[i] += from[i];
      }
  });
  if (autograd::needs_recording({&grad}))
    autograd::record("take_backward", {grad}, {y}, [indices, a](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{take(g[0], indices, a)};
    });
  return y;
}

Tensor take_along_axis(const Tensor& x, const Tensor& indices, std::int64_t axis) {
  if (graph::any_symbolic(x, indices))
    return graph::record_op("take_along_axis", {x, indices},
                            [=](const std::vector<Tensor>& v) { return take_along_axis(v[0], v[1], axis); });
  check_defined(x, "take_along_axis");
  check_indices_tensor(indices, "take_along_axis");
  check(indices.ndim() == x.ndim(), "take_along_axis: indices of shape {} must have the rank of x, shape {}",
        indices.shape(), x.shape());
  const std::int64_t a = normalize_axis(axis, x.ndim(), "take_along_axis");
  Shape shape = indices.shape();
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (std::int64_t(d) == a) continue;
    const std::int64_t xd = x.shape()[d];
    check(xd == shape[d] || xd == 1 || shape[d] == 1,
          "take_along_axis: indices of shape {} do not broadcast against x of shape {} (dimension {}: {} vs {})",
          indices.shape(), x.shape(), d, shape[d], xd);
    if (shape[d] == 1) shape[d] = xd;
  }
  const std::int64_t n = x.shape()[std::size_t(a)];
  checked_indices(indices, n, a, x.shape(), "take_along_axis");

  Tensor y = Tensor::zeros(shape, x.dtype());
  const std::array<Strides, 3> strides{along_axis_strides(indices, shape, a), y.strides(),
                                       along_axis_strides(x, shape, a)};
  const std::int64_t length = shape[std::size_t(a)];
  const std::int64_t si = strides[0][std::size_t(a)], sy = strides[1][std::size_t(a)], sx = strides[2][std::size_t(a)];
  visit_dtype(x.dtype(), [&]<class T>() {
    const std::int64_t* ip = indices.data<std::int64_t>();
    T* yp = y.data<T>();
    const T* xp = x.data<T>();
    walk_along_axis(shape, a, strides, [&](const std::array<std::int64_t, 3>& at) {
      for (std::int64_t k = 0; k < length; ++k) yp[at[1] + k * sy] = xp[at[2] + ip[at[0] + k * si] * sx];
    });
  });
  if (autograd::needs_recording({&x}))
    autograd::record("take_along_axis", {x}, {y},
                     [indices, a, n, in_shape = x.shape()](const std::vector<Tensor>& g) {
                       Tensor gx = take_along_axis_backward(g[0], indices, a, n);
                       // dimensions where x broadcast against the indices are summed back
                       return std::vector<Tensor>{gx.shape() == in_shape ? gx : sum_to(gx, in_shape)};
                     });
  return y;
}

Tensor take_along_axis_backward(const Tensor& grad, const Tensor& indices, std::int64_t axis, std::int64_t size) {
  check_defined(grad, "take_along_axis_backward");
  check_indices_tensor(indices, "take_along_axis_backward");
  check(indices.ndim() == grad.ndim(),
        "take_along_axis_backward: indices of shape {} must have the rank of grad, shape {}", indices.shape(),
        grad.shape());
  const std::int64_t a = normalize_axis(axis, grad.ndim(), "take_along_axis_backward");
  const Shape& gs = grad.shape();
  for (std::size_t d = 0; d < gs.size(); ++d)
    check(indices.shape()[d] == gs[d] || (std::int64_t(d) != a && indices.shape()[d] == 1),
          "take_along_axis_backward: indices of shape {} do not match grad of shape {} (dimension {})",
          indices.shape(), gs, d);
  check(size >= 0, "take_along_axis_backward: negative size {}", size);
  Shape shape = gs;
  shape[std::size_t(a)] = size;
  checked_indices(indices, size, a, shape, "take_along_axis_backward");

  Tensor y = Tensor::zeros(shape, grad.dtype());
  const std::array<Strides, 3> strides{along_axis_strides(indices, gs, a), grad.strides(), y.strides()};
  const std::int64_t length = gs[std::size_t(a)];
  const std::int64_t si = strides[0][std::size_t(a)], sg = strides[1][std::size_t(a)], sy = strides[2][std::size_t(a)];
  visit_floating(grad.dtype(), "take_along_axis_backward", [&]<class T>() {
    const std::int64_t* ip = indices.data<std::int64_t>();
    const T* gp = grad.data<T>();
    T* yp = y.data<T>();
    walk_along_axis(gs, a, strides, [&](const std::array<std::int64_t, 3>& at) {
      for (std::int64_t k = 0; k < length; ++k) yp[at[2] + ip[at[0] + k * si] * sy] += gp[at[1] + k * sg];
    });
  });
  if (autograd::needs_recording({&grad}))
    autograd::record("take_along_axis_backward", {grad}, {y}, [indices, a](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{take_along_axis(g[0], indices, a)};
    });
  return y;
}

}  // namespace loom::ops
