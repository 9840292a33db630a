#pragma once
// AveragePooling1D (keras.layers.AveragePooling1D): the mean of each pool_size window, moved by strides.
//
//   L::AveragePooling1D pool;
//   Tensor y = pool(x);   // x [batch, steps, features] -> [batch, steps / 2, features]
//   L::AveragePooling1D({.pool_size = {3}, .strides = {{1}}, .padding = "same"});
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

using AveragePooling1DOptions = Pooling1DOptions;

class AveragePooling1D : public BasePooling {
 public:
  explicit AveragePooling1D(AveragePooling1DOptions options = {});

  std::string class_name() const override { return "AveragePooling1D"; }

 protected:
  std::shared_ptr<Layer> move_into_shared() && override { return std::make_shared<AveragePooling1D>(std::move(*this)); }
};

}  // namespace loom::layers
