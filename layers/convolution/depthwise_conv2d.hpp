#pragma once
// DepthwiseConv2D (keras.layers.DepthwiseConv2D): each input channel convolved with its own
// depth_multiplier filters, y = activation(depthwise_conv(x, kernel) + bias).
//
//   L::DepthwiseConv2D dw({3, 3}, {.padding = "same", .depth_multiplier = 2});
//   Tensor y = dw(x);   // x [batch, h, w, C] -> y [batch, h, w, 2 * C]; kernel [3, 3, C, 2], bias [2 * C]
//
// Output channel c * depth_multiplier + m comes from input channel c through kernel[..., c, m], as Keras.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "layers/convolution/base_conv.hpp"

namespace loom::layers {

/// keras.layers.DepthwiseConv2D's arguments after kernel_size, in its order.
struct DepthwiseConv2DOptions {
  std::vector<std::int64_t> strides = {1};
  std::string padding = "valid";  // "valid" or "same"
  std::int64_t depth_multiplier = 1;
  std::string data_format = "channels_last";
  std::vector<std::int64_t> dilation_rate = {1};
  activations::Activation activation = "";  // a Keras activation name ("" = none) or a callable
  bool use_bias = true;
  Initializer depthwise_initializer = "glorot_uniform";
  Initializer bias_initializer = "zeros";
  Regularizer depthwise_regularizer = {}; // none by default; a Keras name ("l2"), an object or a callable
  Regularizer bias_regularizer = {};
  Regularizer activity_regularizer = {};  // of the output, divided by the batch size
  Constraint depthwise_constraint = {};   // applied by the optimizer after each update
  Constraint bias_constraint = {};
  std::optional<std::string> name = std::nullopt;
};

class DepthwiseConv2D : public BaseConv {
 public:
  explicit DepthwiseConv2D(std::vector<std::int64_t> kernel_size, DepthwiseConv2DOptions options = {});

  /// The options it was made with (saving a model writes them as Keras's config).
  const DepthwiseConv2DOptions& options() const { return options_; }

 private:
  DepthwiseConv2DOptions options_;

 protected:
  std::shared_ptr<Layer> move_into_shared() && override {
    return std::make_shared<DepthwiseConv2D>(std::move(*this));
  }
};

}  // namespace loom::layers
