#pragma once
// What the convolution layers share (Keras's BaseConv, BaseDepthwiseConv and BaseConvTranspose): the
// options, their checks, the kernel and bias, the input checks, the output shape and the call
// activation(conv(x, kernel) + bias). Conv1D, Conv2D, DepthwiseConv2D and Conv2DTranspose are thin classes
// over it that keep their Keras options.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "layers/activations/activation_functions.hpp"
#include "layers/layer.hpp"

namespace loom::layers {

/// Which product the layer computes.
enum class ConvKind {
  conv,       // ops::conv: kernel [k..., in / groups, filters]
  depthwise,  // ops::depthwise_conv: kernel [k..., in, depth_multiplier]
  transpose,  // ops::conv_transpose: kernel [k..., filters, in]
};

/// The options of every convolution layer, as the thin classes pass them on.
struct ConvSpec {
  ConvKind kind = ConvKind::conv;
  std::size_t rank = 2;  // spatial dimensions
  std::int64_t filters = 0;  // depthwise: the depth multiplier
  std::vector<std::int64_t> kernel_size, strides, dilation_rate;
  std::string padding, data_format;
  std::int64_t groups = 1;
  std::optional<std::vector<std::int64_t>> output_padding;  // transpose only
  activations::Activation activation;
  bool use_bias = true;
  Initializer kernel_initializer, bias_initializer;
  Regularizer kernel_regularizer, bias_regularizer, activity_regularizer;  // depthwise: the depthwise_ ones
  Constraint kernel_constraint, bias_constraint;
};

class BaseConv : public Layer {
 public:
  Shape compute_output_shape(const Shape& input_shape) const override;
  /// The exact output shape on symbolic inputs (a stand-in size cannot show a free size through the
  /// strides); none for an input of another dtype than the weights, whose stand-in run then reports it.
  std::optional<graph::OutputSpec> compute_output_spec(const Tensor& x) const override;

  /// Options as Keras stores them: one value per spatial dimension, padding and data_format in lower case.
  const std::vector<std::int64_t>& kernel_size() const { return spec_.kernel_size; }
  const std::vector<std::int64_t>& strides() const { return spec_.strides; }
  const std::vector<std::int64_t>& dilation_rate() const { return spec_.dilation_rate; }
  const std::string& padding() const { return spec_.padding; }
  const std::string& data_format() const { return spec_.data_format; }
  /// Conv2DTranspose's output_padding, one value per spatial dimension (none: Keras's None).
  const std::optional<std::vector<std::int64_t>>& output_padding() const { return spec_.output_padding; }
  /// The weights; undefined until the layer is built (bias also without use_bias).
  const Variable& kernel() const { return kernel_; }
  const Variable& bias() const { return bias_; }

 protected:
  /// Checks every option as Keras does (sizes positive and one per dimension, or one for all; padding "valid"
  /// or "same", and "causal" for one dimension of conv; strides > 1 not with dilation > 1; filters divisible
  /// by groups), naming the layer.
  BaseConv(const std::string& default_name, const std::optional<std::string>& name, ConvSpec spec);

  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& x, bool training) override;

 private:
  std::int64_t channel_axis(std::size_t ndim) const;
  Shape kernel_shape(std::int64_t in_channels) const;
  /// Rank, channels (against groups, and against the kernel once built) and spatial sizes against the
  /// window; every failure names the layer, the input's shape and the layout expected.
  void check_input(const Shape& input_shape) const;
  std::string layout() const;

  ConvSpec spec_;
  activations::ActivationFn activation_;
  Variable kernel_;
  Variable bias_;
};

}  // namespace loom::layers
