#pragma once
// Loss functions with Keras's semantics (keras.losses.*): per-sample values, reduced over the last axis
// (or `axis`): mean for mse, mae and binary crossentropy, sum for the categorical ones; the batch mean is
// taken by the caller (or by a loss object in training). y_true is cast to y_pred's dtype, as Keras does.
// Every loss first applies Keras's squeeze_or_expand_to_same_rank (so [N] and [N, 1] pair up); then shapes
// must match, and a mismatch is an error naming both shapes rather than a silent broadcast.
// Probabilities are clipped to [1e-7, 1 - 1e-7] as Keras does, and categorical probabilities are first
// renormalized to sum to 1 along the class axis; the from_logits forms are computed stably from the logits
// (log_softmax, log_sigmoid), finite for logits of any size. label_smoothing (in [0, 1]) moves binary targets
// towards 0.5 and categorical ones towards 1 / num_classes. All are composed of differentiable ops.
#include <cstdint>

#include "framework/tensor/tensor.hpp"

namespace loom::losses {

Tensor mean_squared_error(const Tensor& y_true, const Tensor& y_pred);
Tensor mean_absolute_error(const Tensor& y_true, const Tensor& y_pred);
/// Options of binary_crossentropy and categorical_crossentropy, in Keras's order.
struct CrossentropyOptions {
  bool from_logits = false;
  double label_smoothing = 0.0;
  std::int64_t axis = -1;
};
/// Options of sparse_categorical_crossentropy, in Keras's order (Keras's ignore_class is not supported).
struct SparseCrossentropyOptions {
  bool from_logits = false;
  std::int64_t axis = -1;
};

Tensor binary_crossentropy(const Tensor& y_true, const Tensor& y_pred, const CrossentropyOptions& options = {});
Tensor categorical_crossentropy(const Tensor& y_true, const Tensor& y_pred, const CrossentropyOptions& options = {});
/// y_true holds class ids (int64, or whole numbers in float32/float64, which Keras casts) with y_pred's shape
/// minus the class axis (or with a class axis of size 1, squeezed as Keras does). Labels outside
/// [0, num_classes), and floats that are not whole numbers, are an error.
Tensor sparse_categorical_crossentropy(const Tensor& y_true, const Tensor& y_pred,
                                       const SparseCrossentropyOptions& options = {});

}  // namespace loom::losses
