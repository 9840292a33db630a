#pragma once
// The options of Conv1D and Conv2D (keras.layers.Conv1D / Conv2D's arguments after filters and
// kernel_size, in Keras's order). Sizes are brace lists with one value per spatial dimension or one for all.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "layers/activations/activation_functions.hpp"
#include "layers/constraints/constraints.hpp"
#include "layers/initializers/initializers.hpp"
#include "layers/regularizers/regularizers.hpp"

namespace loom::layers {

struct ConvolutionOptions {
  std::vector<std::int64_t> strides = {1};
  std::string padding = "valid";  // "valid", "same", or "causal" (Conv1D)
  std::string data_format = "channels_last";
  std::vector<std::int64_t> dilation_rate = {1};
  std::int64_t groups = 1;        // input channels and filters are split into this many independent groups
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

using Conv1DOptions = ConvolutionOptions;
using Conv2DOptions = ConvolutionOptions;

}  // namespace loom::layers
