#pragma once
// Conv2D (keras.layers.Conv2D): y = activation(conv(x, kernel) + bias) over two spatial dimensions.
//
//   L::Conv2D conv(16, {3, 3}, {.strides = {2, 2}, .padding = "same", .activation = "relu"});
//   Tensor y = conv(x);   // x [batch, 32, 32, channels] -> y [batch, 16, 16, 16]
//
// Kernel [kh, kw, in_channels / groups, filters] and bias [filters], as Keras, so Keras weights load as
// they are. "same" padding gives ceil(size / stride) positions, an odd total padding put after (as
// TensorFlow and JAX); channels_first inputs are [batch, channels, height, width].
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "layers/convolution/conv_options.hpp"
#include "layers/convolution/base_conv.hpp"

namespace loom::layers {

class Conv2D : public BaseConv {
 public:
  Conv2D(std::int64_t filters, std::vector<std::int64_t> kernel_size, Conv2DOptions options = {});

  std::int64_t filters() const { return filters_; }
  /// The options it was made with (saving a model writes them as Keras's config).
  const Conv2DOptions& options() const { return options_; }

 private:
  std::int64_t filters_;
  Conv2DOptions options_;

 protected:
  std::shared_ptr<Layer> move_into_shared() && override { return std::make_shared<Conv2D>(std::move(*this)); }
};

}  // namespace loom::layers
