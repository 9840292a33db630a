#include "layers/reshaping/zero_padding2d.hpp"

#include <algorithm>

#include "framework/ops/ops.hpp"
#include "layers/detail/spatial_layout.hpp"

namespace loom::layers {

namespace {

/// Keras's int, (sym_h, sym_w) or ((top, bottom), (left, right)) as {top, bottom, left, right}.
std::vector<std::int64_t> four_sides(const std::vector<std::int64_t>& padding, const std::string& layer) {
  check(padding.size() == 1 || padding.size() == 2 || padding.size() == 4,
        "{}: padding must have 1 value (every side), 2 (symmetric height, width) or 4 (top, bottom, left, right), "
        "got {}",
        layer, Shape(padding));
  check(std::all_of(padding.begin(), padding.end(), [](std::int64_t p) { return p >= 0; }),
        "{}: padding must be non-negative, got {}", layer, Shape(padding));
  if (padding.size() == 4) return padding;
  const std::int64_t h = padding[0], w = padding.back();
  return {h, h, w, w};
}

}  // namespace

ZeroPadding2D::ZeroPadding2D(ZeroPadding2DOptions options)
    : Layer("zero_padding2d", options.name),
      padding_(four_sides(options.padding, name())),
      data_format_(ops::standardize_data_format(options.data_format, name())) {}

Shape ZeroPadding2D::compute_output_shape(const Shape& input_shape) const {
  detail::check_spatial_rank(input_shape, 2, data_format_, name());
  const Axes axes = detail::spatial_axes(2, data_format_);
  Shape out = input_shape;
  for (std::size_t d = 0; d < 2; ++d) {
    std::int64_t& size = out[std::size_t(axes[d])];
    if (size != -1) size = checked_add(checked_add(size, padding_[2 * d], name()), padding_[2 * d + 1], name());
  }
  return out;
}

Tensor ZeroPadding2D::call(const Tensor& x, bool) {
  compute_output_shape(x.shape());
  std::vector<std::pair<std::int64_t, std::int64_t>> widths(4, {0, 0});
  const Axes axes = detail::spatial_axes(2, data_format_);
  for (std::size_t d = 0; d < 2; ++d) widths[std::size_t(axes[d])] = {padding_[2 * d], padding_[2 * d + 1]};
  return ops::pad(x, widths);
}

}  // namespace loom::layers
