#include "layers/convolution/conv2d.hpp"

namespace loom::layers {

Conv2D::Conv2D(std::int64_t filters, std::vector<std::int64_t> kernel_size, Conv2DOptions options)
    : BaseConv("conv2d", options.name,
               {ConvKind::conv, 2, filters, std::move(kernel_size), options.strides, options.dilation_rate,
                options.padding, options.data_format, options.groups, std::nullopt, options.activation,
                options.use_bias, options.kernel_initializer, options.bias_initializer,
                options.kernel_regularizer, options.bias_regularizer, options.activity_regularizer,
                options.kernel_constraint, options.bias_constraint}),
      filters_(filters),
      options_(std::move(options)) {}

}  // namespace loom::layers
