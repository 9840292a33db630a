#include "framework/ops/pooling.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "framework/autograd/record.hpp"
#include "framework/autograd/tape.hpp"
#include "framework/graph/symbolic.hpp"
#include "framework/kernels/dispatch.hpp"
#include "framework/kernels/sliding_window.hpp"
#include "framework/ops/detail/input_checks.hpp"
#include "framework/ops/ops.hpp"
#include "framework/ops/window.hpp"
#include "framework/runtime/detail/parallel.hpp"

namespace loom::ops {

namespace {

/// Work per piece of the pool kernels, in values read.
constexpr std::int64_t kValuesPerPiece = std::int64_t(1) << 15;

struct PoolProblem {
  kernels::Window2D w;
  Shape output_shape;
  /// Rows per piece of parallel work.
  std::int64_t grain() const { return std::max<std::int64_t>(1, kValuesPerPiece / std::max<std::int64_t>(1, w.channels * w.taps())); }
};

/// x is channels_last [N, spatial..., C] with one or two spatial dimensions.
PoolProblem make_problem(const Shape& x, const std::vector<std::int64_t>& window, const WindowGeometry& geometry,
                         std::string_view op) {
  const std::size_t rank = x.size() - 2;
  const Shape out = window_output_sizes(x, window, geometry, op);
  for (std::size_t d = 0; d < rank; ++d)
    check(geometry.pad_before[d] < window[d],
          "{}: padding before ({}) must be smaller than the pool size ({}) so that every window holds an input position",
          op, Shape(geometry.pad_before), Shape(window));
  Shape output_shape{x[0]};
  output_shape.insert(output_shape.end(), out.begin(), out.end());
  output_shape.push_back(x.back());
  const bool one_d = rank == 1;
  kernels::Window2D w{x[0],
                      one_d ? 1 : x[1],
                      x[rank],
                      x.back(),
                      one_d ? 1 : out[0],
                      out[rank - 1],
                      one_d ? 1 : window[0],
                      window[rank - 1],
                      one_d ? 1 : geometry.strides[0],
                      geometry.strides[rank - 1],
                      1,
                      1,
                      one_d ? 0 : geometry.pad_before[0],
                      geometry.pad_before[rank - 1]};
  return {w, output_shape};
}

/// y = the maximum of each window per channel; argmax (when given) the flat index into x of the first one.
template <class T>
void max_forward(const PoolProblem& p, const T* x, T* y, std::int64_t* argmax) {
  const auto& w = p.w;
  const std::int64_t c_count = w.channels;
  parallel::for_ranges(w.rows(), p.grain(), [&](std::int64_t first, std::int64_t last) {
    std::vector<std::int64_t> pixels(std::size_t(w.taps()));
    std::vector<std::int64_t> best(static_cast<std::size_t>(c_count));
    for (std::int64_t r = first; r < last; ++r) {
      kernels::window_pixels(w, r, pixels.data());
      T* out = y + r * c_count;
      std::fill(best.begin(), best.end(), std::int64_t(-1));
      for (std::int64_t t = 0; t < w.taps(); ++t) {
        if (pixels[std::size_t(t)] < 0) continue;
        const std::int64_t base = pixels[std::size_t(t)] * c_count;
        for (std::int64_t c = 0; c < c_count; ++c) {
          const T v = x[base + c];
          std::int64_t& b = best[std::size_t(c)];
          if (b < 0 || v > out[c] || (std::isnan(v) && !std::isnan(out[c]))) {
            out[c] = v;
            b = base + c;
          }
        }
      }
      if (argmax) std::copy(best.begin(), best.end(), argmax + r * c_count);
    }
  });
}

/// y = the mean of each window's input positions per channel.
template <class T>
void average_forward(const PoolProblem& p, const T* x, T* y) {
  const auto& w = p.w;
  const std::int64_t c_count = w.channels;
  parallel::for_ranges(w.rows(), p.grain(), [&](std::int64_t first, std::int64_t last) {
    std::vector<std::int64_t> pixels(std::size_t(w.taps()));
    for (std::int64_t r = first; r < last; ++r) {
      const std::int64_t inside = kernels::window_pixels(w, r, pixels.data());
      T* out = y + r * c_count;
      std::fill(out, out + c_count, T(0));
      for (std::int64_t t = 0; t < w.taps(); ++t) {
        if (pixels[std::size_t(t)] < 0) continue;
        const T* in = x + pixels[std::size_t(t)] * c_count;
        for (std::int64_t c = 0; c < c_count; ++c) out[c] += in[c];
      }
      const T scale = T(1) / T(inside);
      for (std::int64_t c = 0; c < c_count; ++c) out[c] *= scale;
    }
  });
}

/// The adjoint of average_forward: every window spreads grad / count over its input positions; dx starts
/// zeroed. Images run in parallel (windows of one image overlap only within it).
template <class T>
void average_adjoint(const PoolProblem& p, const T* grad, T* dx) {
  const auto& w = p.w;
  const std::int64_t c_count = w.channels, per_image = w.rows_per_image();
  const std::int64_t images_per_piece = std::max<std::int64_t>(1, p.grain() / std::max<std::int64_t>(1, per_image));
  parallel::for_ranges(w.batch, images_per_piece, [&](std::int64_t first_image, std::int64_t end_image) {
    std::vector<std::int64_t> pixels(std::size_t(w.taps()));
    for (std::int64_t r = first_image * per_image; r < end_image * per_image; ++r) {
      const std::int64_t inside = kernels::window_pixels(w, r, pixels.data());
      const T scale = T(1) / T(inside);
      const T* g = grad + r * c_count;
      for (std::int64_t t = 0; t < w.taps(); ++t) {
        if (pixels[std::size_t(t)] < 0) continue;
        T* out = dx + pixels[std::size_t(t)] * c_count;
        for (std::int64_t c = 0; c < c_count; ++c) out[c] += g[c] * scale;
      }
    }
  });
}

Tensor average_pool_backward(const Tensor& grad, const Shape& input_shape, const std::vector<std::int64_t>& window,
                             const WindowGeometry& geometry);

/// x channels_last.
Tensor average_pool_general(const Tensor& x, const std::vector<std::int64_t>& window, const WindowGeometry& geometry) {
  const PoolProblem p = make_problem(x.shape(), window, geometry, "average_pool");
  Tensor y = Tensor::empty(p.output_shape, x.dtype());
  visit_floating(x.dtype(), "average_pool", [&]<class T>() {
    const Tensor xc = x.is_contiguous() ? x : (NoGradGuard(), ops::contiguous(x));
    average_forward<T>(p, xc.data<T>(), y.data<T>());
  });
  if (autograd::needs_recording({&x}))
    autograd::record("average_pool", {x}, {y}, [window, geometry, shape = x.shape()](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{average_pool_backward(g[0], shape, window, geometry)};
    });
  return y;
}

Tensor average_pool_backward(const Tensor& grad, const Shape& input_shape, const std::vector<std::int64_t>& window,
                             const WindowGeometry& geometry) {
  const PoolProblem p = make_problem(input_shape, window, geometry, "average_pool_backward");
  check(grad.shape() == p.output_shape, "average_pool_backward: grad has shape {}, expected {}", grad.shape(),
        p.output_shape);
  Tensor dx = Tensor::zeros(input_shape, grad.dtype());
  visit_floating(grad.dtype(), "average_pool_backward", [&]<class T>() {
    const Tensor gc = grad.is_contiguous() ? grad : (NoGradGuard(), ops::contiguous(grad));
    average_adjoint<T>(p, gc.data<T>(), dx.data<T>());
  });
  if (autograd::needs_recording({&grad}))
    autograd::record("average_pool_backward", {grad}, {dx}, [window, geometry](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{average_pool_general(g[0], window, geometry)};
    });
  return dx;
}

/// x channels_last. The gradient scatters into the first maximum of each window (take_backward, whose own
/// gradient is take: second order for free).
Tensor max_pool_general(const Tensor& x, const std::vector<std::int64_t>& window, const WindowGeometry& geometry) {
  const PoolProblem p = make_problem(x.shape(), window, geometry, "max_pool");
  Tensor y = Tensor::empty(p.output_shape, x.dtype());
  const bool recording = autograd::needs_recording({&x});
  Tensor argmax = recording ? Tensor::empty(p.output_shape, DType::i64) : Tensor();
  visit_floating(x.dtype(), "max_pool", [&]<class T>() {
    const Tensor xc = x.is_contiguous() ? x : (NoGradGuard(), ops::contiguous(x));
    max_forward<T>(p, xc.data<T>(), y.data<T>(), recording ? argmax.data<std::int64_t>() : nullptr);
  });
  if (recording)
    autograd::record("max_pool", {x}, {y}, [argmax, shape = x.shape()](const std::vector<Tensor>& g) {
      const Tensor flat = ops::take_backward(ops::reshape(g[0], {-1}), ops::reshape(argmax, {-1}), 0, numel(shape));
      return std::vector<Tensor>{ops::reshape(flat, shape)};
    });
  return y;
}

using PoolFn = Tensor (*)(const Tensor&, const std::vector<std::int64_t>&, const WindowGeometry&);

Tensor pool(const Tensor& x, const std::vector<std::int64_t>& pool_size, const PoolOptions& options, const char* op,
            PoolFn general) {
  check_floating(x, op);
  check(x.ndim() == 3 || x.ndim() == 4,
        "{}: expected an input of rank 3 ([batch, steps, channels]) or 4 ([batch, height, width, channels]), got "
        "shape {}",
        op, x.shape());
  std::string padding = options.padding;
  std::transform(padding.begin(), padding.end(), padding.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  check(padding == "valid" || padding == "same", "{}: padding must be 'valid' or 'same', got '{}'", op,
        options.padding);
  const bool channels_first = standardize_data_format(options.data_format, op) == "channels_first";
  const std::size_t rank = std::size_t(x.ndim() - 2);
  const auto window = per_dimension(pool_size, rank, "pool_size", op);
  const auto strides = per_dimension(options.strides.value_or(window), rank, "strides", op);
  std::vector<std::int64_t> axes{0};
  for (std::int64_t d = channels_first ? 2 : 1; d < x.ndim() - (channels_first ? 0 : 1); ++d) axes.push_back(d);
  axes.push_back(channels_first ? 1 : x.ndim() - 1);
  const Tensor xl = channels_first ? ops::permute(x, axes) : x;
  const Shape spatial(xl.shape().begin() + 1, xl.shape().end() - 1);
  const Tensor y = general(xl, window, window_geometry(spatial, window, strides, {1}, padding, op));
  if (!channels_first) return y;
  std::vector<std::int64_t> back{0, y.ndim() - 1};
  for (std::int64_t d = 1; d + 1 < y.ndim(); ++d) back.push_back(d);
  return ops::permute(y, back);
}

}  // namespace

Tensor max_pool(const Tensor& x, const std::vector<std::int64_t>& pool_size, const PoolOptions& options) {
  if (graph::any_symbolic(x))
    return graph::record_op("max_pool", {x},
                            [=](const std::vector<Tensor>& v) { return max_pool(v[0], pool_size, options); });
  return pool(x, pool_size, options, "max_pool", max_pool_general);
}

Tensor average_pool(const Tensor& x, const std::vector<std::int64_t>& pool_size, const PoolOptions& options) {
  if (graph::any_symbolic(x))
    return graph::record_op("average_pool", {x},
                            [=](const std::vector<Tensor>& v) { return average_pool(v[0], pool_size, options); });
  return pool(x, pool_size, options, "average_pool", average_pool_general);
}

}  // namespace loom::ops
