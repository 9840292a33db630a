#include "layers/convolution/base_conv.hpp"

#include <algorithm>
#include <utility>

#include "framework/ops/ops.hpp"
#include "layers/detail/spatial_layout.hpp"

namespace loom::layers {

namespace {

/// The window's extent along each dimension: (k - 1) * dilation + 1.
std::vector<std::int64_t> spans(const ConvSpec& s) {
  std::vector<std::int64_t> out;
  for (std::size_t d = 0; d < s.rank; ++d)
    out.push_back(checked_add(checked_mul(s.kernel_size[d] - 1, s.dilation_rate[d], "conv"), 1, "conv"));
  return out;
}

}  // namespace

BaseConv::BaseConv(const std::string& default_name, const std::optional<std::string>& name, ConvSpec spec)
    : Layer(default_name, name), spec_(std::move(spec)), activation_(spec_.activation.function(this->name())) {
  set_activity_regularizer(spec_.activity_regularizer);
  auto& s = spec_;
  const std::string& layer = this->name();
  s.kernel_size = ops::per_dimension(s.kernel_size, s.rank, "kernel_size", layer);
  s.strides = ops::per_dimension(s.strides, s.rank, "strides", layer);
  s.dilation_rate = ops::per_dimension(s.dilation_rate, s.rank, "dilation_rate", layer);
  if (s.output_padding) s.output_padding = ops::per_dimension(*s.output_padding, s.rank, "output_padding", layer);
  s.data_format = ops::standardize_data_format(s.data_format, layer);
  s.padding = detail::lower_case(s.padding);
  const bool causal_allowed = s.kind == ConvKind::conv && s.rank == 1;
  check(s.padding == "valid" || s.padding == "same" || (causal_allowed && s.padding == "causal"),
        "{}: padding must be 'valid' or 'same'{}, got '{}'", layer, causal_allowed ? " or 'causal'" : "",
        spec_.padding);
  const auto positive = [](const std::vector<std::int64_t>& v) {
    return std::all_of(v.begin(), v.end(), [](std::int64_t x) { return x >= 1; });
  };
  check(s.filters >= 1, "{}: {} must be positive, got {}", layer,
        s.kind == ConvKind::depthwise ? "depth_multiplier" : "filters", s.filters);
  check(positive(s.kernel_size), "{}: kernel_size must be positive, got {}", layer, Shape(s.kernel_size));
  check(positive(s.strides), "{}: strides must be positive, got {}", layer, Shape(s.strides));
  check(positive(s.dilation_rate), "{}: dilation_rate must be positive, got {}", layer, Shape(s.dilation_rate));
  const auto above_one = [](const std::vector<std::int64_t>& v) {
    return std::any_of(v.begin(), v.end(), [](std::int64_t x) { return x > 1; });
  };
  check(!(above_one(s.strides) && above_one(s.dilation_rate)),
        "{}: strides > 1 is not supported with dilation_rate > 1 (as Keras), got strides {} and dilation_rate {}",
        layer, Shape(s.strides), Shape(s.dilation_rate));
  check(s.groups >= 1, "{}: groups must be positive, got {}", layer, s.groups);
  check(s.filters % s.groups == 0, "{}: filters ({}) must be divisible by groups ({})", layer, s.filters, s.groups);
  if (s.output_padding)
    for (std::size_t d = 0; d < s.rank; ++d)
      check((*s.output_padding)[d] >= 0 && (*s.output_padding)[d] < s.strides[d],
            "{}: output_padding must be non-negative and smaller than strides, got output_padding {} and strides {}",
            layer, Shape(*s.output_padding), Shape(s.strides));
}

std::int64_t BaseConv::channel_axis(std::size_t ndim) const {
  return spec_.data_format == "channels_last" ? std::int64_t(ndim) - 1 : 1;
}

std::string BaseConv::layout() const { return detail::spatial_layout(spec_.rank, spec_.data_format); }

Shape BaseConv::kernel_shape(std::int64_t in_channels) const {
  Shape shape(spec_.kernel_size.begin(), spec_.kernel_size.end());
  switch (spec_.kind) {
    case ConvKind::conv:
      shape.push_back(in_channels / spec_.groups);
      shape.push_back(spec_.filters);
      break;
    case ConvKind::depthwise:
      shape.push_back(in_channels);
      shape.push_back(spec_.filters);
      break;
    case ConvKind::transpose:
      shape.push_back(spec_.filters);
      shape.push_back(in_channels);
      break;
  }
  return shape;
}

void BaseConv::check_input(const Shape& input_shape) const {
  const std::string& layer = name();
  check(input_shape.size() == spec_.rank + 2, "{}: expected a rank-{} input {}, got shape {}", layer,
        spec_.rank + 2, layout(), input_shape);
  const std::size_t axis = std::size_t(channel_axis(input_shape.size()));
  const std::int64_t channels = input_shape[axis];
  check(channels >= 1, "{}: expected at least one channel on axis {} (layout {}), got an input of shape {}", layer, axis,
        layout(), input_shape);
  check(channels % spec_.groups == 0,
        "{}: the input's {} channels (axis {}, layout {}) are not divisible by groups = {}; input shape {}", layer, channels,
        axis, layout(), spec_.groups, input_shape);
  if (kernel_.defined()) {
    const Shape want = kernel_shape(channels);
    if (want != kernel_.shape()) {
      const std::size_t other = spec_.data_format == "channels_last" ? 1 : input_shape.size() - 1;
      const Shape& k = kernel_.shape();
      const std::int64_t built_for = spec_.kind == ConvKind::transpose ? k.back()
                                     : spec_.kind == ConvKind::conv    ? k[k.size() - 2] * spec_.groups
                                                                       : k[k.size() - 2];
      check(false, "{}: expected {} channels on axis {} (layout {}; the kernel is {}), got an input of shape {}{}", layer,
            built_for, axis, layout(), k, input_shape,
            input_shape[other] == built_for ? fmt::format("; its axis {} has {}: is its data_format the other one?",
                                                          other, built_for)
                                            : "");
    }
  }
  const std::size_t first = spec_.data_format == "channels_last" ? 1 : 2;
  const auto span = spans(spec_);
  for (std::size_t d = 0; d < spec_.rank; ++d) {
    const std::int64_t size = input_shape[first + d];
    if (size == -1) continue;  // unknown until called on data
    check(size >= 1, "{}: expected at least one position along every spatial axis (layout {}), got an input of shape {}",
          layer, layout(), input_shape);
    check(spec_.kind == ConvKind::transpose || spec_.padding != "valid" || size >= span[d],
          "{}: the kernel {} (dilation_rate {}: it spans {}) is larger than the input along spatial axis {} ({} "
          "positions; input shape {}, layout {}, padding 'valid')",
          layer, Shape(spec_.kernel_size), Shape(spec_.dilation_rate), Shape(span), first + d, size, input_shape,
          layout());
  }
}

Shape BaseConv::compute_output_shape(const Shape& input_shape) const {
  check_input(input_shape);
  // Unknown sizes (-1: the batch, or a length known only at the call) stay unknown; the rest is what the op
  // computes.
  Shape known = input_shape;
  known[0] = 1;
  const std::size_t first = spec_.data_format == "channels_last" ? 1 : 2;
  const auto span = spans(spec_);
  for (std::size_t d = 0; d < spec_.rank; ++d)
    if (known[first + d] == -1) known[first + d] = span[d];
  const Shape kernel = kernel_shape(input_shape[std::size_t(channel_axis(input_shape.size()))]);
  Shape out;
  if (spec_.kind == ConvKind::transpose) {
    out = ops::conv_transpose_output_shape(known, kernel,
                                           {.strides = spec_.strides,
                                            .padding = spec_.padding,
                                            .output_padding = spec_.output_padding,
                                            .data_format = spec_.data_format,
                                            .dilation_rate = spec_.dilation_rate});
  } else {
    const ops::ConvOptions options{.strides = spec_.strides,
                                   .padding = spec_.padding,
                                   .data_format = spec_.data_format,
                                   .dilation_rate = spec_.dilation_rate};
    out = spec_.kind == ConvKind::conv ? ops::conv_output_shape(known, kernel, options)
                                       : ops::depthwise_conv_output_shape(known, kernel, options);
  }
  out[0] = input_shape[0];
  for (std::size_t d = 0; d < spec_.rank; ++d)
    if (input_shape[first + d] == -1) out[first + d] = -1;
  return out;
}

std::optional<graph::OutputSpec> BaseConv::compute_output_spec(const Tensor& x) const {
  if (x.dtype() != dtype()) return std::nullopt;
  return graph::OutputSpec{compute_output_shape(x.shape()), x.dtype()};
}

void BaseConv::build(const Shape& input_shape) {
  compute_output_shape(input_shape);
  const std::int64_t channels = input_shape[std::size_t(channel_axis(input_shape.size()))];
  kernel_ = add_weight("kernel", kernel_shape(channels), spec_.kernel_initializer, true, std::nullopt,
                       spec_.kernel_regularizer, spec_.kernel_constraint);
  if (spec_.use_bias) {
    const std::int64_t outputs = spec_.kind == ConvKind::depthwise ? channels * spec_.filters : spec_.filters;
    bias_ = add_weight("bias", {outputs}, spec_.bias_initializer, true, std::nullopt, spec_.bias_regularizer,
                       spec_.bias_constraint);
  }
}

Tensor BaseConv::call(const Tensor& x, bool) {
  check_input(x.shape());
  check(x.dtype() == dtype(), "{}: expected a {} input (the dtype of its weights), got {} of shape {}", name(), dtype(),
        x.dtype(), x.shape());
  Tensor y;
  switch (spec_.kind) {
    case ConvKind::conv:
      y = ops::conv(x, kernel_, {.strides = spec_.strides,
                                 .padding = spec_.padding,
                                 .data_format = spec_.data_format,
                                 .dilation_rate = spec_.dilation_rate});
      break;
    case ConvKind::depthwise:
      y = ops::depthwise_conv(x, kernel_, {.strides = spec_.strides,
                                           .padding = spec_.padding,
                                           .data_format = spec_.data_format,
                                           .dilation_rate = spec_.dilation_rate});
      break;
    case ConvKind::transpose:
      y = ops::conv_transpose(x, kernel_, {.strides = spec_.strides,
                                           .padding = spec_.padding,
                                           .output_padding = spec_.output_padding,
                                           .data_format = spec_.data_format,
                                           .dilation_rate = spec_.dilation_rate});
      break;
  }
  if (bias_.defined()) {
    // [F] on the channels axis: trailing for channels_last, [F, 1...] for channels_first.
    Shape bias_shape{bias_.shape()[0]};
    if (spec_.data_format == "channels_first") bias_shape.resize(spec_.rank + 1, 1);
    y = y + ops::reshape(bias_.value(), bias_shape);
  }
  return apply_activation(activation_, y);
}

}  // namespace loom::layers
