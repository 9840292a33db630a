#pragma once
// Conv2DTranspose (keras.layers.Conv2DTranspose): the transposed convolution (the gradient of a Conv2D with
// respect to its input), y = activation(conv_transpose(x, kernel) + bias); it upsamples by the strides.
//
//   L::Conv2DTranspose up(32, {3, 3}, {.strides = {2, 2}, .padding = "same"});
//   Tensor y = up(x);   // x [batch, 8, 8, C] -> y [batch, 16, 16, 32]; kernel [3, 3, 32, C], bias [32]
//
// Output sizes as Keras: (in - 1) * stride + max(window, stride) for "valid", in * stride for "same";
// with output_padding p, (in - 1) * stride + window - 2 * (window / 2 for "same", else 0) + p, where window
// is the dilated kernel size.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "layers/convolution/base_conv.hpp"

namespace loom::layers {

/// keras.layers.Conv2DTranspose's arguments after filters and kernel_size, in its order.
struct Conv2DTransposeOptions {
  std::vector<std::int64_t> strides = {1};
  std::string padding = "valid";  // "valid" or "same"
  std::optional<std::vector<std::int64_t>> output_padding = std::nullopt;  // each < its stride
  std::string data_format = "channels_last";
  std::vector<std::int64_t> dilation_rate = {1};
  activations::Activation activation = "";  // a Keras activation name ("" = none) or a callable
  bool use_bias = true;
  Initializer kernel_initializer = "glorot_uniform";
  Initializer bias_initializer = "zeros";
  Regularizer kernel_regularizer = {};    // none by default; a Keras name ("l2"), an object or a callable
  Regularizer bias_regularizer = {};
  Regularizer activity_regularizer = {};  // of the output, divided by the batch size
  Constraint kernel_constraint = {};      // applied by the optimizer after each update
  Constraint bias_constraint = {};
  std::optional<std::string> name = std::nullopt;
};

class Conv2DTranspose : public BaseConv {
 public:
  Conv2DTranspose(std::int64_t filters, std::vector<std::int64_t> kernel_size, Conv2DTransposeOptions options = {});

  std::int64_t filters() const { return filters_; }
  /// The options it was made with (saving a model writes them as Keras's config).
  const Conv2DTransposeOptions& options() const { return options_; }

 private:
  std::int64_t filters_;
  Conv2DTransposeOptions options_;

 protected:
  std::shared_ptr<Layer> move_into_shared() && override {
    return std::make_shared<Conv2DTranspose>(std::move(*this));
  }
};

}  // namespace loom::layers
