#pragma once
// Fused normalization ops: layer, RMS, group and batch normalization. Each computes its statistics in one
// pass and has a hand-written backward kernel, so a normalization costs a few passes over the data instead
// of the ten or so that the same formula composed of mean, var, rsqrt, mul and add takes.
//
//   Tensor y = ops::layer_norm(x, gamma, beta, {-1}, 1e-3);          // gamma/beta shaped like x's last axis
//   auto [out, mean, var] = ops::batch_norm(x, gamma, beta, -1, 1e-3);   // training: the batch's statistics
//
// Statistics: biased variance (divides by the count, as Keras), accumulated in double for float32 too, around
// a shift taken from the data (the first element of each group), so inputs with a large mean (1e6) and a
// small spread keep their precision; constant inputs give a variance of exactly 0 (output = beta).
// gamma / beta (scale for RMS) may be undefined tensors: no scaling / no offset (Keras center/scale false).
// epsilon must be positive.
//
// The backward rules are kernels too, recorded as ops of their own ("layer_norm_backward", ...): gradients
// of first order work under any tape; differentiating them again (nested tapes) throws loom::Error, because
// the fused kernels are first-order only. Compose the formula from plain ops where second order is needed.
#include <cstdint>
#include <vector>

#include "framework/tensor/tensor.hpp"

namespace loom::ops {

/// (x - mean) / sqrt(var + epsilon) * gamma + beta, statistics over `axes` (any set of axes; negative ones
/// count from the end) for each index of the other axes. gamma and beta have the shape of the normalized
/// dimensions in increasing axis order (Keras: x of [5, 20, 30, 40] and axes {1, 2, 3} -> [20, 30, 40]).
/// rms_scaling (Keras's layer_normalization(..., rms_scaling=True)): x / sqrt(var + epsilon) * gamma, the
/// variance still around the mean but x not centered, and no beta (a defined beta is then an error, where
/// Keras ignores it).
Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Axes& axes,
                  double epsilon, bool rms_scaling = false);

/// x / sqrt(mean(x^2) + epsilon) * scale over `axes`; scale shaped like layer_norm's gamma (Keras
/// rms_normalization).
Tensor rms_norm(const Tensor& x, const Tensor& scale, const Axes& axes, double epsilon);

/// Group normalization of x [batch, ..., channels at `axis`, ...]: the channels split into `groups` contiguous
/// blocks (channel c in group c / (channels / groups), as Keras and PyTorch); statistics per sample and group
/// over every other non-batch axis and the group's channels. gamma and beta are [channels]. `axis` must not
/// be the batch axis 0; channels % groups must be 0.
Tensor group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, std::int64_t groups, std::int64_t axis,
                  double epsilon);

/// Training-mode batch normalization: statistics per channel (the dimension at `axis`) over every other axis.
/// `mean` and `variance` (biased) are the batch statistics, [channels], for the moving-average update; they
/// are differentiable outputs like `output`.
struct BatchNormResult {
  Tensor output, mean, variance;
};
BatchNormResult batch_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, std::int64_t axis,
                           double epsilon);

/// Inference-mode batch normalization with given statistics (Keras ops.batch_normalization): with
/// inv = rsqrt(variance + epsilon) * gamma, y = x * inv + (beta - mean * inv). mean, variance, gamma and beta
/// are [channels] (gamma/beta may be undefined). Composed of plain ops, so every order of gradient works.
Tensor batch_norm_inference(const Tensor& x, const Tensor& mean, const Tensor& variance, const Tensor& gamma,
                            const Tensor& beta, std::int64_t axis, double epsilon);

}  // namespace loom::ops
