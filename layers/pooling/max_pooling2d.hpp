#pragma once
// MaxPooling2D (keras.layers.MaxPooling2D): the maximum of each pool_size window, moved by strides.
//
//   L::MaxPooling2D pool({.pool_size = {2, 2}});
//   Tensor y = pool(x);   // x [batch, H, W, C] -> [batch, H / 2, W / 2, C]
//   L::MaxPooling2D({.pool_size = {3, 3}, .strides = {{1, 1}}, .padding = "same"});
//
// Options in Keras's order (layers/pooling/pooling_options.hpp): pool_size (one value per spatial dimension or
// one for all), strides (default: pool_size), padding ("valid" drops the positions no whole window covers,
// "same" gives ceil(size / stride) positions with the extra padding after, as TensorFlow and JAX),
// data_format ("channels_last" default, "channels_first"), name.
// A "same" window that reaches beyond the input ignores the positions outside it; the gradient goes to the first
// maximum of each window (row-major).
#include <memory>
#include <utility>

#include "layers/pooling/base_pooling.hpp"
#include "layers/pooling/pooling_options.hpp"

namespace loom::layers {

using MaxPooling2DOptions = Pooling2DOptions;

class MaxPooling2D : public BasePooling {
 public:
  explicit MaxPooling2D(MaxPooling2DOptions options = {});

  std::string class_name() const override { return "MaxPooling2D"; }

 protected:
  std::shared_ptr<Layer> move_into_shared() && override { return std::make_shared<MaxPooling2D>(std::move(*this)); }
};

}  // namespace loom::layers
