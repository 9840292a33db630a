#include "layers/reshaping/up_sampling2d.hpp"

#include <algorithm>
#include <cmath>

#include "framework/ops/ops.hpp"
#include "layers/detail/spatial_layout.hpp"

namespace loom::layers {

namespace {

/// Every entry of x along `axis` `factor` times in a row (Keras's ops.repeat): a broadcast along a new axis
/// after it, folded in.
Tensor repeat(const Tensor& x, std::int64_t axis, std::int64_t factor) {
  const Tensor expanded = ops::expand_dims(x, axis + 1);
  Shape wide = expanded.shape();
  wide[std::size_t(axis + 1)] = factor;
  Shape out = x.shape();
  out[std::size_t(axis)] *= factor;
  return ops::reshape(ops::broadcast_to(expanded, wide), out);
}

/// jax.image.resize's "bilinear" (triangle kernel, half-pixel centers) along `axis`, enlarged `factor`
/// times: output o samples f = (o + 0.5) / factor - 0.5 and weighs input i by max(0, 1 - |f - i|) over the
/// inputs that exist, normalized to sum 1 (so the border entry alone where f falls outside [0, n - 1]).
Tensor linear(const Tensor& x, std::int64_t axis, std::int64_t factor) {
  const std::int64_t n = x.shape()[std::size_t(axis)], outputs = n * factor;
  const auto count = static_cast<std::size_t>(outputs);
  std::vector<std::int64_t> low(count), high(count);
  std::vector<double> low_weight(count), high_weight(count);
  const double inverse = 1.0 / double(factor);
  for (std::int64_t o = 0; o < outputs; ++o) {
    const double f = (double(o) + 0.5) * inverse - 0.5;
    const auto i = std::int64_t(std::floor(f));
    const auto weight = [&](std::int64_t at) {
      return at >= 0 && at < n ? std::max(0.0, 1.0 - std::abs(f - double(at))) : 0.0;
    };
    const double w0 = weight(i), w1 = weight(i + 1), total = w0 + w1;
    const auto u = std::size_t(o);
    low[u] = std::clamp<std::int64_t>(i, 0, n - 1);
    high[u] = std::clamp<std::int64_t>(i + 1, 0, n - 1);
    low_weight[u] = w0 / total;
    high_weight[u] = w1 / total;
  }
  Shape weight_shape(std::size_t(x.ndim()), 1);
  weight_shape[std::size_t(axis)] = outputs;
  const auto take = [&](const std::vector<std::int64_t>& at) {
    return ops::take(x, Tensor::from_vector(at, Shape{outputs}), axis);
  };
  const auto weights = [&](const std::vector<double>& w) { return Tensor::from_vector(w, weight_shape).to(x.dtype()); };
  return take(low) * weights(low_weight) + take(high) * weights(high_weight);
}

}  // namespace

UpSampling2D::UpSampling2D(UpSampling2DOptions options)
    : Layer("up_sampling2d", options.name),
      size_(ops::per_dimension(options.size, 2, "size", name())),
      data_format_(ops::standardize_data_format(options.data_format, name())),
      interpolation_(detail::lower_case(options.interpolation)) {
  check(std::all_of(size_.begin(), size_.end(), [](std::int64_t s) { return s >= 1; }),
        "{}: size must be positive, got {}", name(), Shape(size_));
  check(interpolation_ == "nearest" || interpolation_ == "bilinear",
        "{}: interpolation must be 'nearest' or 'bilinear' (loom does not implement Keras's 'bicubic', 'lanczos3' "
        "and 'lanczos5'), got '{}'",
        name(), options.interpolation);
}

Shape UpSampling2D::compute_output_shape(const Shape& input_shape) const {
  detail::check_spatial_rank(input_shape, 2, data_format_, name());
  const Axes axes = detail::spatial_axes(2, data_format_);
  Shape out = input_shape;
  for (std::size_t d = 0; d < 2; ++d) {
    std::int64_t& size = out[std::size_t(axes[d])];
    if (size != -1) size = checked_mul(size, size_[d], name());
  }
  return out;
}

Tensor UpSampling2D::call(const Tensor& x, bool) {
  compute_output_shape(x.shape());
  if (interpolation_ == "bilinear") detail::check_floating_input(x, name());
  const Axes axes = detail::spatial_axes(2, data_format_);
  Tensor y = x;
  for (std::size_t d = 0; d < 2; ++d)
    if (size_[d] > 1) y = interpolation_ == "nearest" ? repeat(y, axes[d], size_[d]) : linear(y, axes[d], size_[d]);
  return y;
}

}  // namespace loom::layers
