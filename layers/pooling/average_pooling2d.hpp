#pragma once
// AveragePooling2D (keras.layers.AveragePooling2D): the mean of each pool_size window, moved by strides.
//
//   L::AveragePooling2D pool({.pool_size = {2, 2}});
//   Tensor y = pool(x);   // x [batch, H, W, C] -> [batch, H / 2, W / 2, C]
//   L::AveragePooling2D({.pool_size = {3, 3}, .strides = {{1, 1}}, .padding = "same"});
//
// Options in Keras's order (layers/pooling/pooling_options.hpp): pool_size (one value per spatial dimension or
// one for all), strides (default: pool_size), padding ("valid" drops the positions no whole window covers,
// "same" gives ceil(size / stride) positions with the extra padding after, as TensorFlow and JAX),
// data_format ("channels_last" default, "channels_first"), name.
// A "same" window that reaches beyond the input averages over its positions inside the input only, as Keras.
#include <memory>
#include <utility>

#include "layers/pooling/base_pooling.hpp"
#include "layers/pooling/pooling_options.hpp"

namespace loom::layers {

using AveragePooling2DOptions = Pooling2DOptions;

class AveragePooling2D : public BasePooling {
 public:
  explicit AveragePooling2D(AveragePooling2DOptions options = {});

  std::string class_name() const override { return "AveragePooling2D"; }

 protected:
  std::shared_ptr<Layer> move_into_shared() && override { return std::make_shared<AveragePooling2D>(std::move(*this)); }
};

}  // namespace loom::layers
