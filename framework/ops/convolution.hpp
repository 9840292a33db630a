#pragma once
// Convolutions over one or two spatial dimensions, as keras.ops.conv, depthwise_conv and conv_transpose, on
// the BLAS: each block of output positions gathers its input patches into a matrix (im2col) that one gemm
// multiplies with the kernel; blocks run on loom's worker pool, so the patch matrix never exists whole.
//
//   Tensor y = ops::conv(x, kernel, {.strides = {2, 2}, .padding = "same"});   // x [N, H, W, C]
//
// Layouts are Keras's: inputs [batch, spatial..., channels] (channels_last, the default) or [batch, channels,
// spatial...]; kernels [k..., in_channels / groups, filters] (conv), [k..., channels, multiplier]
// (depthwise_conv), [k..., filters, in_channels] (conv_transpose). groups is what Keras infers: the input's
// channels over the kernel's in_channels. float32 and float64; gradients of any order (conv_general and its
// two adjoints below are each differentiable in terms of the others).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "framework/ops/window.hpp"
#include "framework/tensor/tensor.hpp"

namespace loom::ops {

/// keras.ops.conv's arguments; strides and dilation_rate hold one value per spatial dimension or one for all.
struct ConvOptions {
  std::vector<std::int64_t> strides = {1};
  std::string padding = "valid";  // "valid", "same", or "causal" (one spatial dimension)
  std::string data_format = "channels_last";
  std::vector<std::int64_t> dilation_rate = {1};
};

/// keras.ops.conv_transpose's arguments; output_padding (one per dimension or one for all, each < its stride)
/// adds positions after the output, which is otherwise (in - 1) * stride + max(window, stride) ("valid") or
/// in * stride ("same"), window being the dilated kernel size.
struct ConvTransposeOptions {
  std::vector<std::int64_t> strides = {1};
  std::string padding = "valid";
  std::optional<std::vector<std::int64_t>> output_padding = std::nullopt;
  std::string data_format = "channels_last";
  std::vector<std::int64_t> dilation_rate = {1};
};

/// keras.ops.conv: x [N, spatial..., C], kernel [k..., C / groups, F] -> [N, out..., F].
Tensor conv(const Tensor& x, const Tensor& kernel, const ConvOptions& options = {});
/// keras.ops.depthwise_conv: kernel [k..., C, M] -> C * M channels, channel c * M + m from input channel c.
Tensor depthwise_conv(const Tensor& x, const Tensor& kernel, const ConvOptions& options = {});
/// keras.ops.conv_transpose: the gradient of a conv with respect to its input, kernel [k..., F, C] for an
/// input of C channels -> [N, out..., F].
Tensor conv_transpose(const Tensor& x, const Tensor& kernel, const ConvTransposeOptions& options = {});

/// The shapes conv, depthwise_conv and conv_transpose give for inputs and kernels of these shapes, checked as
/// the ops check them, without data (the layers' compute_output_shape).
Shape conv_output_shape(const Shape& x, const Shape& kernel, const ConvOptions& options = {});
Shape depthwise_conv_output_shape(const Shape& x, const Shape& kernel, const ConvOptions& options = {});
Shape conv_transpose_output_shape(const Shape& x, const Shape& kernel, const ConvTransposeOptions& options = {});

// ---- explicit geometry, channels_last: the convolution and its two adjoints. For the trilinear form
// <grad, conv_general(x, kernel)>, conv_backward_input is its derivative in x and conv_backward_kernel its
// derivative in the kernel; each op's backward rule is made of the other two. ----

/// x [N, spatial..., C], kernel [k..., C / groups, F] -> [N, out..., F], out as window_output_sizes gives.
Tensor conv_general(const Tensor& x, const Tensor& kernel, const WindowGeometry& geometry);
/// d<grad, conv_general(x, kernel)>/dx for an x of `input_shape`: grad has conv_general's output shape.
Tensor conv_backward_input(const Tensor& grad, const Tensor& kernel, const Shape& input_shape,
                           const WindowGeometry& geometry);
/// d<grad, conv_general(x, kernel)>/dkernel for a kernel of `kernel_shape`.
Tensor conv_backward_kernel(const Tensor& x, const Tensor& grad, const Shape& kernel_shape,
                            const WindowGeometry& geometry);

}  // namespace loom::ops
