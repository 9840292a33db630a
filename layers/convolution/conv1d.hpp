#pragma once
// Conv1D (keras.layers.Conv1D): y = activation(conv(x, kernel) + bias) over one spatial dimension.
//
//   L::Conv1D conv(8, {3}, {.padding = "causal", .dilation_rate = {2}});
//   Tensor y = conv(x);   // x [batch, steps, channels] -> y [batch, steps, 8]; kernel [3, channels, 8]
//
// "causal" padding puts (kernel_size - 1) * dilation_rate zeros before the sequence, so step t sees steps
// <= t only (WaveNet). Kernel [kernel_size, in_channels / groups, filters] and bias [filters], as Keras.
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "layers/convolution/conv_options.hpp"
#include "layers/convolution/base_conv.hpp"

namespace loom::layers {

class Conv1D : public BaseConv {
 public:
  Conv1D(std::int64_t filters, std::vector<std::int64_t> kernel_size, Conv1DOptions options = {});

  std::int64_t filters() const { return filters_; }
  /// The options it was made with (saving a model writes them as Keras's config).
  const Conv1DOptions& options() const { return options_; }

 private:
  std::int64_t filters_;
  Conv1DOptions options_;

 protected:
  std::shared_ptr<Layer> move_into_shared() && override { return std::make_shared<Conv1D>(std::move(*this)); }
};

}  // namespace loom::layers
