#include "framework/ops/convolution.hpp"

#include <algorithm>
#include <cctype>
#include <vector>

#include "framework/autograd/record.hpp"
#include "framework/autograd/tape.hpp"
#include "framework/graph/symbolic.hpp"
#include "framework/kernels/dispatch.hpp"
#include "framework/kernels/sliding_window.hpp"
#include "framework/ops/ops.hpp"
#include "framework/runtime/detail/gemm.hpp"
#include "framework/runtime/detail/parallel.hpp"
#include "framework/tensor/memory.hpp"

namespace loom::ops {

namespace {

/// Values of one block of the patch matrix: enough rows for one gemm to run near its peak while the block
/// stays in a core's L2 cache.
constexpr std::int64_t kBlockElements = std::int64_t(1) << 17;
/// At most this many values in the per-piece partial kernel gradients (pieces are summed in order after).
constexpr std::int64_t kPartialElements = std::int64_t(1) << 24;

/// A convolution in the kernels' 2-D terms.
struct ConvProblem {
  kernels::Window2D w;
  std::int64_t groups, filters;
  Shape output_shape;

  std::int64_t group_channels() const { return w.channels / groups; }
  std::int64_t group_filters() const { return filters / groups; }
  std::int64_t patch() const { return w.taps() * group_channels(); }
  std::int64_t rows_per_block() const {
    return std::clamp<std::int64_t>(kBlockElements / patch(), 8, 4096);
  }
  /// A 1x1 kernel at stride 1 without padding: the input itself is the patch matrix.
  bool pointwise() const {
    return w.taps() == 1 && w.stride_h == 1 && w.stride_w == 1 && w.pad_top == 0 && w.pad_left == 0 &&
           w.out_h == w.in_h && w.out_w == w.in_w;
  }
};

void check_operands(const Tensor& a, const Tensor& b, const char* a_name, const char* b_name, std::string_view op) {
  check(a.defined() && b.defined(), "{}: {} is undefined", op, a.defined() ? b_name : a_name);
  check(is_floating(a.dtype()) && a.dtype() == b.dtype(),
        "{}: expected float32 or float64 tensors of one dtype, got {} {} {} and {} {} {}", op, a_name, a.dtype(),
        a.shape(), b_name, b.dtype(), b.shape());
}

ConvProblem make_problem(const Shape& x, const Shape& kernel, const WindowGeometry& geometry, std::string_view op) {
  check(x.size() == 3 || x.size() == 4,
        "{}: expected an input of rank 3 ([batch, steps, channels]) or 4 ([batch, height, width, channels]), got "
        "shape {}",
        op, x);
  const std::size_t rank = x.size() - 2;
  check(kernel.size() == x.size(),
        "{}: expected a kernel of rank {} ([{}in_channels / groups, filters]) for an input of shape {}, got a "
        "kernel of shape {}",
        op, x.size(), rank == 1 ? "k, " : "kh, kw, ", x, kernel);
  const std::vector<std::int64_t> window(kernel.begin(), kernel.begin() + std::ptrdiff_t(rank));
  const Shape out = window_output_sizes(x, window, geometry, op);
  const std::int64_t channels = x.back(), group_channels = kernel[rank], filters = kernel[rank + 1];
  check(channels >= 1 && group_channels >= 1 && channels % group_channels == 0,
        "{}: the input's {} channels are not a multiple of the kernel's {} input channels (input {}, kernel {}): "
        "the kernel holds channels / groups input channels",
        op, channels, group_channels, x, kernel);
  const std::int64_t groups = channels / group_channels;
  check(filters >= 1 && filters % groups == 0,
        "{}: the kernel's {} filters cannot be split into {} groups (input {} with {} channels, kernel {})", op,
        filters, groups, x, channels, kernel);

  Shape output_shape{x[0]};
  output_shape.insert(output_shape.end(), out.begin(), out.end());
  output_shape.push_back(filters);
  check(fits_in_int64(output_shape), "{}: the output shape {} has more elements than a 64-bit count holds", op,
        output_shape);
  checked_mul(checked_mul(window[0], rank == 2 ? window[1] : 1, op), group_channels, op);
  const bool one_d = rank == 1;
  kernels::Window2D w{x[0],
                      one_d ? 1 : x[1],
                      x[rank],
                      channels,
                      one_d ? 1 : out[0],
                      out[rank - 1],
                      one_d ? 1 : window[0],
                      window[rank - 1],
                      one_d ? 1 : geometry.strides[0],
                      geometry.strides[rank - 1],
                      one_d ? 1 : geometry.dilation[0],
                      geometry.dilation[rank - 1],
                      one_d ? 0 : geometry.pad_before[0],
                      geometry.pad_before[rank - 1]};
  return {w, groups, filters, output_shape};
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return a / b + (a % b != 0); }

/// One worker's scratch: a block of the patch matrix and the pixel indices of one window.
template <class T>
struct Scratch {
  std::vector<T> cols;
  std::vector<std::int64_t> pixels;
};

/// task(scratch, item) for item in [0, items), on the pool when there are several, each worker with its own
/// scratch (`block_size` patch values, `taps` pixel indices). One item runs here, so its gemms use every
/// thread themselves.
template <class T, class Task>
void run_blocks(std::int64_t items, std::int64_t block_size, std::int64_t taps, std::string_view op, Task&& task) {
  if (items <= 0) return;
  const int threads = items == 1 ? 1 : parallel::thread_count();
  check_fits_in_memory(checked_mul(block_size, threads, op), sizeof(T), "{}: patch blocks", op);
  std::vector<Scratch<T>> scratch{std::size_t(threads)};
  auto run_item = [&](int worker, std::int64_t item) {
    auto& s = scratch[std::size_t(worker)];
    if (s.cols.empty()) {
      s.cols.resize(std::size_t(block_size));
      s.pixels.resize(std::size_t(taps));
    }
    task(s.cols.data(), s.pixels.data(), item);
  };
  if (items == 1) run_item(0, 0);
  else parallel::run(items, threads, run_item);
}

/// y [rows, F] = patches @ kernel [patch, F], per group.
template <class T>
void forward(const ConvProblem& p, const T* x, const T* kernel, T* y) {
  const auto& w = p.w;
  const std::int64_t groups = p.groups, cg = p.group_channels(), fg = p.group_filters(), f = p.filters;
  const std::int64_t patch = p.patch(), rows = w.rows();
  if (rows == 0) return;
  if (p.pointwise()) {
    for (std::int64_t g = 0; g < groups; ++g)
      blas::gemm<T>(false, false, rows, fg, cg, T(1), x + g * cg, w.channels, kernel + g * fg, f, T(0), y + g * fg,
                    f);
    return;
  }
  const std::int64_t per_block = p.rows_per_block();
  run_blocks<T>(ceil_div(rows, per_block) * groups, per_block * patch, w.taps(), "conv",
                [&](T* cols, std::int64_t* pixels, std::int64_t item) {
    const std::int64_t g = item % groups, first = item / groups * per_block;
    const std::int64_t last = std::min(rows, first + per_block);
    kernels::im2col(w, x, g * cg, cg, first, last, cols, pixels);
    blas::gemm<T>(false, false, last - first, fg, patch, T(1), cols, patch, kernel + g * fg, f, T(0),
                  y + first * f + g * fg, f);
  });
}

/// dx += col2im(grad [rows, F] @ kernel^T), per group; dx starts zeroed. Each item is one (image, group):
/// its blocks overlap only within the image and the group's channels.
template <class T>
void backward_input(const ConvProblem& p, const T* grad, const T* kernel, T* dx) {
  const auto& w = p.w;
  const std::int64_t groups = p.groups, cg = p.group_channels(), fg = p.group_filters(), f = p.filters;
  const std::int64_t patch = p.patch(), rows = w.rows();
  if (rows == 0) return;
  if (p.pointwise()) {
    for (std::int64_t g = 0; g < groups; ++g)
      blas::gemm<T>(false, true, rows, cg, fg, T(1), grad + g * fg, f, kernel + g * fg, f, T(0), dx + g * cg,
                    w.channels);
    return;
  }
  const std::int64_t per_block = p.rows_per_block(), per_image = w.rows_per_image();
  run_blocks<T>(w.batch * groups, per_block * patch, w.taps(), "conv_backward_input",
                [&](T* cols, std::int64_t* pixels, std::int64_t item) {
    const std::int64_t g = item % groups, image_end = (item / groups + 1) * per_image;
    for (std::int64_t first = item / groups * per_image; first < image_end; first += per_block) {
      const std::int64_t last = std::min(image_end, first + per_block);
      blas::gemm<T>(false, true, last - first, patch, fg, T(1), grad + first * f + g * fg, f, kernel + g * fg, f,
                    T(0), cols, patch);
      kernels::col2im(w, cols, g * cg, cg, first, last, dx, pixels);
    }
  });
}

/// dkernel [patch, F] = patches^T @ grad, per group; dkernel starts zeroed. Rows are cut into a number of
/// pieces that depends on the sizes alone, each summed into its own partial; the partials are added in order,
/// so the result has the same bits on any number of threads.
template <class T>
void backward_kernel(const ConvProblem& p, const T* x, const T* grad, T* dkernel) {
  const auto& w = p.w;
  const std::int64_t groups = p.groups, cg = p.group_channels(), fg = p.group_filters(), f = p.filters;
  const std::int64_t patch = p.patch(), rows = w.rows(), kernel_size = patch * f;
  if (rows == 0) return;
  if (p.pointwise()) {
    for (std::int64_t g = 0; g < groups; ++g)
      blas::gemm<T>(true, false, cg, fg, rows, T(1), x + g * cg, w.channels, grad + g * fg, f, T(0),
                    dkernel + g * fg, f);
    return;
  }
  const std::int64_t per_block = p.rows_per_block(), blocks = ceil_div(rows, per_block);
  const auto accumulate = [&](T* cols, std::int64_t* pixels, T* into, std::int64_t first_block, std::int64_t end_block) {
    for (std::int64_t b = first_block; b < end_block; ++b)
      for (std::int64_t g = 0; g < groups; ++g) {
        const std::int64_t first = b * per_block, last = std::min(rows, first + per_block);
        kernels::im2col(w, x, g * cg, cg, first, last, cols, pixels);
        blas::gemm<T>(true, false, patch, fg, last - first, T(1), cols, patch, grad + first * f + g * fg, f, T(1),
                      into + g * fg, f);
      }
  };
  const std::int64_t pieces =
      std::min(std::clamp<std::int64_t>(blocks / 4, 1, 16), std::max<std::int64_t>(1, kPartialElements / kernel_size));
  if (pieces == 1) {
    run_blocks<T>(1, per_block * patch, w.taps(), "conv_backward_kernel",
                  [&](T* cols, std::int64_t* pixels, std::int64_t) { accumulate(cols, pixels, dkernel, 0, blocks); });
    return;
  }
  check_fits_in_memory(checked_mul(pieces, kernel_size, "conv_backward_kernel"), sizeof(T),
                       "conv_backward_kernel: partial kernel gradients");
  std::vector<T> partials(std::size_t(pieces * kernel_size), T(0));
  run_blocks<T>(pieces, per_block * patch, w.taps(), "conv_backward_kernel",
                [&](T* cols, std::int64_t* pixels, std::int64_t piece) {
    accumulate(cols, pixels, partials.data() + piece * kernel_size, blocks * piece / pieces, blocks * (piece + 1) / pieces);
  });
  for (std::int64_t piece = 0; piece < pieces; ++piece) {
    const T* part = partials.data() + piece * kernel_size;
    for (std::int64_t i = 0; i < kernel_size; ++i) dkernel[i] += part[i];
  }
}

/// x's spatial sizes (channels_last) and the kernel's window sizes.
Shape spatial_of(const Shape& x) { return Shape(x.begin() + 1, x.end() - 1); }
std::vector<std::int64_t> window_of(const Shape& kernel) { return {kernel.begin(), kernel.end() - 2}; }

/// x in channels_last, a view: channels_first [N, C, spatial...] -> [N, spatial..., C].
Tensor to_channels_last(const Tensor& x) {
  std::vector<std::int64_t> axes{0};
  for (std::int64_t d = 2; d < x.ndim(); ++d) axes.push_back(d);
  axes.push_back(1);
  return ops::permute(x, axes);
}

Tensor to_channels_first(const Tensor& x) {
  std::vector<std::int64_t> axes{0, x.ndim() - 1};
  for (std::int64_t d = 1; d + 1 < x.ndim(); ++d) axes.push_back(d);
  return ops::permute(x, axes);
}


}  // namespace

Tensor conv_general(const Tensor& x, const Tensor& kernel, const WindowGeometry& geometry) {
  if (graph::any_symbolic(x, kernel))
    return graph::record_op("conv_general", {x, kernel},
                            [geometry](const std::vector<Tensor>& v) { return conv_general(v[0], v[1], geometry); });
  check_operands(x, kernel, "input", "kernel", "conv");
  const ConvProblem p = make_problem(x.shape(), kernel.shape(), geometry, "conv");
  Tensor y = Tensor::empty(p.output_shape, x.dtype());
  visit_floating(x.dtype(), "conv", [&]<class T>() {
    const NoGradGuard internal;
    const Tensor xc = ops::contiguous(x), kc = ops::contiguous(kernel);
    forward<T>(p, xc.data<T>(), kc.data<T>(), y.data<T>());
  });
  if (autograd::needs_recording({&x, &kernel})) {
    const bool x_tracked = autograd::tape_tracks({&x}), kernel_tracked = autograd::tape_tracks({&kernel});
    autograd::record("conv", {x, kernel}, {y}, [=](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{x_tracked ? conv_backward_input(g[0], kernel, x.shape(), geometry) : Tensor(),
                                 kernel_tracked ? conv_backward_kernel(x, g[0], kernel.shape(), geometry) : Tensor()};
    });
  }
  return y;
}

Tensor conv_backward_input(const Tensor& grad, const Tensor& kernel, const Shape& input_shape,
                           const WindowGeometry& geometry) {
  check_operands(grad, kernel, "grad", "kernel", "conv_backward_input");
  const ConvProblem p = make_problem(input_shape, kernel.shape(), geometry, "conv_backward_input");
  check(grad.shape() == p.output_shape,
        "conv_backward_input: grad has shape {}, expected {} (the output of a kernel {} over an input {})",
        grad.shape(), p.output_shape, kernel.shape(), input_shape);
  Tensor dx = Tensor::zeros(input_shape, grad.dtype());
  visit_floating(grad.dtype(), "conv_backward_input", [&]<class T>() {
    const NoGradGuard internal;
    const Tensor gc = ops::contiguous(grad), kc = ops::contiguous(kernel);
    backward_input<T>(p, gc.data<T>(), kc.data<T>(), dx.data<T>());
  });
  if (autograd::needs_recording({&grad, &kernel})) {
    const bool grad_tracked = autograd::tape_tracks({&grad}), kernel_tracked = autograd::tape_tracks({&kernel});
    autograd::record("conv_backward_input", {grad, kernel}, {dx}, [=](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{grad_tracked ? conv_general(g[0], kernel, geometry) : Tensor(),
                                 kernel_tracked ? conv_backward_kernel(g[0], grad, kernel.shape(), geometry) : Tensor()};
    });
  }
  return dx;
}

Tensor conv_backward_kernel(const Tensor& x, const Tensor& grad, const Shape& kernel_shape,
                            const WindowGeometry& geometry) {
  check_operands(x, grad, "input", "grad", "conv_backward_kernel");
  const ConvProblem p = make_problem(x.shape(), kernel_shape, geometry, "conv_backward_kernel");
  check(grad.shape() == p.output_shape,
        "conv_backward_kernel: grad has shape {}, expected {} (the output of a kernel {} over an input {})",
        grad.shape(), p.output_shape, kernel_shape, x.shape());
  Tensor dkernel = Tensor::zeros(kernel_shape, x.dtype());
  visit_floating(x.dtype(), "conv_backward_kernel", [&]<class T>() {
    const NoGradGuard internal;
    const Tensor xc = ops::contiguous(x), gc = ops::contiguous(grad);
    backward_kernel<T>(p, xc.data<T>(), gc.data<T>(), dkernel.data<T>());
  });
  if (autograd::needs_recording({&x, &grad})) {
    const bool x_tracked = autograd::tape_tracks({&x}), grad_tracked = autograd::tape_tracks({&grad});
    autograd::record("conv_backward_kernel", {x, grad}, {dkernel}, [=](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{x_tracked ? conv_backward_input(grad, g[0], x.shape(), geometry) : Tensor(),
                                 grad_tracked ? conv_general(x, g[0], geometry) : Tensor()};
    });
  }
  return dkernel;
}

namespace {

/// The shape as channels_last: channels_first [N, C, spatial...] -> [N, spatial..., C].
Shape channels_last_shape(const Shape& x, bool channels_first) {
  if (!channels_first) return x;
  Shape out{x[0]};
  out.insert(out.end(), x.begin() + 2, x.end());
  out.push_back(x[1]);
  return out;
}

Shape channels_first_shape(const Shape& x, bool channels_first) {
  if (!channels_first) return x;
  Shape out{x[0], x.back()};
  out.insert(out.end(), x.begin() + 1, x.end() - 1);
  return out;
}

void check_ranks(const Shape& x, const Shape& kernel, std::string_view op) {
  check(x.size() == 3 || x.size() == 4,
        "{}: expected an input of rank 3 (one spatial dimension) or 4 (two), got shape {}", op, x);
  check(kernel.size() == x.size(), "{}: expected a kernel of rank {} for an input of shape {}, got a kernel of shape {}",
        op, x.size(), x, kernel);
}

bool is_channels_first(const std::string& data_format, std::string_view op) {
  return standardize_data_format(data_format, op) == "channels_first";
}

/// A depthwise kernel [k..., C, M] as a grouped conv's [k..., 1, C * M]: C groups of one input channel,
/// output channel c * M + m.
Shape depthwise_as_grouped(const Shape& x, const Shape& kernel, const ConvOptions& options) {
  check_ranks(x, kernel, "depthwise_conv");
  const bool channels_first = is_channels_first(options.data_format, "depthwise_conv");
  const std::int64_t channels = x[channels_first ? 1 : x.size() - 1];
  check(kernel[kernel.size() - 2] == channels,
        "depthwise_conv: expected a kernel [{}channels = {}, multiplier] for an input {} ({}), got a kernel of "
        "shape {}",
        x.size() == 3 ? "k, " : "kh, kw, ", channels, x, channels_first ? "channels_first" : "channels_last", kernel);
  Shape grouped(kernel.begin(), kernel.end() - 2);
  grouped.push_back(1);
  grouped.push_back(checked_mul(kernel[kernel.size() - 2], kernel.back(), "depthwise_conv"));
  return grouped;
}

/// A transposed convolution as the input gradient of a conv: its geometry and the (channels_last) output.
struct TransposePlan {
  WindowGeometry geometry;
  Shape output_shape;
};

/// xl is the input as channels_last; x the input as given, for messages.
TransposePlan plan_transpose(const Shape& xl, const Shape& k, const ConvTransposeOptions& options, const Shape& x) {
  const Shape spatial = spatial_of(xl);
  const std::size_t rank = spatial.size();
  check(k.back() == xl.back(),
        "conv_transpose: expected a kernel [{}filters, in_channels = {}] for an input {}, got a kernel of shape {}",
        rank == 1 ? "k, " : "kh, kw, ", xl.back(), x, k);
  std::string padding = options.padding;
  std::transform(padding.begin(), padding.end(), padding.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  check(std::all_of(spatial.begin(), spatial.end(), [](std::int64_t s) { return s >= 1; }),
        "conv_transpose: expected an input with at least one position per spatial dimension, got {}", x);
  check(padding == "valid" || padding == "same", "conv_transpose: padding must be 'valid' or 'same', got '{}'",
        options.padding);
  const auto strides = per_dimension(options.strides, rank, "strides", "conv_transpose");
  const auto dilation = per_dimension(options.dilation_rate, rank, "dilation_rate", "conv_transpose");
  std::optional<std::vector<std::int64_t>> output_padding;
  if (options.output_padding)
    output_padding = per_dimension(*options.output_padding, rank, "output_padding", "conv_transpose");

  // Keras's sizes (its JAX backend's padding rule): the transposed input is dilated by the stride and padded
  // by (left, right); that is the gradient of a conv over the output with pad_before = window - 1 - left.
  TransposePlan plan{{strides, dilation, Shape(rank), Shape(rank)}, Shape{xl[0]}};
  for (std::size_t d = 0; d < rank; ++d) {
    check(strides[d] >= 1 && dilation[d] >= 1 && k[d] >= 1,
          "conv_transpose: kernel sizes, strides and dilation rates must be positive, got kernel {}, strides {}, "
          "dilation {}",
          k, Shape(strides), Shape(dilation));
    const std::int64_t window = checked_add(checked_mul(k[d] - 1, dilation[d], "conv_transpose"), 1, "conv_transpose");
    if (output_padding)
      check((*output_padding)[d] >= 0 && (*output_padding)[d] < strides[d],
            "conv_transpose: output_padding must be non-negative and smaller than the strides, got output_padding "
            "{} for strides {}",
            Shape(*output_padding), Shape(strides));
    std::int64_t left = 0, right = 0;
    if (padding == "valid") {
      const std::int64_t extra = output_padding ? (*output_padding)[d] : std::max(window, strides[d]) - window;
      left = window - 1;
      right = window - 1 + extra;
    } else {
      const std::int64_t total =
          output_padding ? window + window % 2 - 2 + (*output_padding)[d] : strides[d] + window - 2;
      left = std::min(total / 2 + total % 2, window - 1);
      right = total - left;
    }
    const std::int64_t length = checked_add(
        checked_mul(spatial[d] - 1, strides[d], "conv_transpose"), left + right - window + 2, "conv_transpose");
    check(length >= 1, "conv_transpose: the output would have {} positions along spatial dimension {} (input {}, kernel {})",
          length, d, x, k);
    plan.geometry.pad_before[d] = window - 1 - left;
    // pad_after makes the conv over `length` positions give back exactly the input's positions.
    plan.geometry.pad_after[d] = (spatial[d] - 1) * strides[d] + window - length - plan.geometry.pad_before[d];
    plan.output_shape.push_back(length);
  }
  plan.output_shape.push_back(k[rank]);
  return plan;
}

}  // namespace

Shape conv_output_shape(const Shape& x, const Shape& kernel, const ConvOptions& options) {
  check_ranks(x, kernel, "conv");
  const bool channels_first = is_channels_first(options.data_format, "conv");
  const Shape xl = channels_last_shape(x, channels_first);
  const WindowGeometry geometry =
      window_geometry(spatial_of(xl), window_of(kernel), options.strides, options.dilation_rate, options.padding, "conv");
  return channels_first_shape(make_problem(xl, kernel, geometry, "conv").output_shape, channels_first);
}

Shape depthwise_conv_output_shape(const Shape& x, const Shape& kernel, const ConvOptions& options) {
  return conv_output_shape(x, depthwise_as_grouped(x, kernel, options), options);
}

Shape conv_transpose_output_shape(const Shape& x, const Shape& kernel, const ConvTransposeOptions& options) {
  check_ranks(x, kernel, "conv_transpose");
  const bool channels_first = is_channels_first(options.data_format, "conv_transpose");
  const Shape xl = channels_last_shape(x, channels_first);
  TransposePlan plan = plan_transpose(xl, kernel, options, x);
  // the conv this is the adjoint of must itself be valid
  make_problem(plan.output_shape, kernel, plan.geometry, "conv_transpose");
  return channels_first_shape(plan.output_shape, channels_first);
}

Tensor conv(const Tensor& x, const Tensor& kernel, const ConvOptions& options) {
  if (graph::any_symbolic(x, kernel))
    return graph::record_op("conv", {x, kernel},
                            [options](const std::vector<Tensor>& v) { return conv(v[0], v[1], options); });
  check_operands(x, kernel, "input", "kernel", "conv");
  check_ranks(x.shape(), kernel.shape(), "conv");
  const bool channels_first = is_channels_first(options.data_format, "conv");
  const Tensor xl = channels_first ? to_channels_last(x) : x;
  const WindowGeometry geometry = window_geometry(spatial_of(xl.shape()), window_of(kernel.shape()), options.strides,
                                                  options.dilation_rate, options.padding, "conv");
  const Tensor y = conv_general(xl, kernel, geometry);
  return channels_first ? to_channels_first(y) : y;
}

Tensor depthwise_conv(const Tensor& x, const Tensor& kernel, const ConvOptions& options) {
  if (graph::any_symbolic(x, kernel))
    return graph::record_op("depthwise_conv", {x, kernel},
                            [options](const std::vector<Tensor>& v) { return depthwise_conv(v[0], v[1], options); });
  check_operands(x, kernel, "input", "kernel", "depthwise_conv");
  return conv(x, ops::reshape(kernel, depthwise_as_grouped(x.shape(), kernel.shape(), options)), options);
}

Tensor conv_transpose(const Tensor& x, const Tensor& kernel, const ConvTransposeOptions& options) {
  if (graph::any_symbolic(x, kernel))
    return graph::record_op("conv_transpose", {x, kernel},
                            [options](const std::vector<Tensor>& v) { return conv_transpose(v[0], v[1], options); });
  check_operands(x, kernel, "input", "kernel", "conv_transpose");
  check_ranks(x.shape(), kernel.shape(), "conv_transpose");
  const bool channels_first = is_channels_first(options.data_format, "conv_transpose");
  const Tensor xl = channels_first ? to_channels_last(x) : x;
  const TransposePlan plan = plan_transpose(xl.shape(), kernel.shape(), options, x.shape());
  const Tensor y = conv_backward_input(xl, kernel, plan.output_shape, plan.geometry);
  return channels_first ? to_channels_first(y) : y;
}

}  // namespace loom::ops
