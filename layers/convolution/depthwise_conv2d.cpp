#include "layers/convolution/depthwise_conv2d.hpp"

namespace loom::layers {

DepthwiseConv2D::DepthwiseConv2D(std::vector<std::int64_t> kernel_size, DepthwiseConv2DOptions options)
    : BaseConv("depthwise_conv2d", options.name,
               {ConvKind::depthwise, 2, options.depth_multiplier, std::move(kernel_size), options.strides,
                options.dilation_rate, options.padding, options.data_format, 1, std::nullopt, options.activation,
                options.use_bias, options.depthwise_initializer, options.bias_initializer,
                options.depthwise_regularizer, options.bias_regularizer, options.activity_regularizer,
                options.depthwise_constraint, options.bias_constraint}),
      options_(std::move(options)) {}

}  // namespace loom::layers
