#include "layers/convolution/conv2d_transpose.hpp"

namespace loom::layers {

Conv2DTranspose::Conv2DTranspose(std::int64_t filters, std::vector<std::int64_t> kernel_size,
                                 Conv2DTransposeOptions options)
    : BaseConv("conv2d_transpose", options.name,
               {ConvKind::transpose, 2, filters, std::move(kernel_size), options.strides,
                options.dilation_rate, options.padding, options.data_format, 1, options.output_padding,
                options.activation, options.use_bias, options.kernel_initializer, options.bias_initializer,
                options.kernel_regularizer, options.bias_regularizer, options.activity_regularizer,
                options.kernel_constraint, options.bias_constraint}),
      filters_(filters),
      options_(std::move(options)) {}

}  // namespace loom::layers
