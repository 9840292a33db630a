#pragma once
// MaxPooling1D (keras.layers.MaxPooling1D): the maximum of each pool_size window, moved by strides.
//
//   L::MaxPooling1D pool;
//   Tensor y = pool(x);   // x [batch, steps, features] -> [batch, steps / 2, features]
//   L::MaxPooling1D({.pool_size = {3}, .strides = {{1}}, .padding = "same"});
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

using MaxPooling1DOptions = Pooling1DOptions;

class MaxPooling1D : public BasePooling {
 public:
  explicit MaxPooling1D(MaxPooling1DOptions options = {});

  std::string class_name() const override { return "MaxPooling1D"; }

 protected:
  std::shared_ptr<Layer> move_into_shared() && override { return std::make_shared<MaxPooling1D>(std::move(*this)); }
};

}  // namespace loom::layers
