#pragma once
// Loss functions with Keras's semantics (keras.losses.*): per-sample values, reduced over the last axis;
// the batch mean is taken by the caller (or by a loss object in training). Probabilities are clipped to
// [1e-7, 1 - 1e-7] as Keras does; the from_logits forms are computed stably from the logits.
#include <cstdint>

#include "framework/tensor.hpp"

namespace loom::losses {

Tensor mean_squared_error(const Tensor& y_true, const Tensor& y_pred);
Tensor mean_absolute_error(const Tensor& y_true, const Tensor& y_pred);
Tensor binary_crossentropy(const Tensor& y_true, const Tensor& y_pred, bool from_logits = false,
                           double label_smoothing = 0.0, std::int64_t axis = -1);
Tensor categorical_crossentropy(const Tensor& y_true, const Tensor& y_pred, bool from_logits = false,
                                double label_smoothing = 0.0, std::int64_t axis = -1);
/// y_true holds integer class ids (i64) with y_pred's shape minus the class axis.
Tensor sparse_categorical_crossentropy(const Tensor& y_true, const Tensor& y_pred, bool from_logits = false,
                                       std::int64_t axis = -1);

}  // namespace loom::losses
