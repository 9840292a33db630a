#pragma once
// Fused optimizer updates: one pass over a variable's elements instead of a tensor for every term of the
// formula. Not recorded on any tape (optimizers run outside them).
#include "framework/tensor/tensor.hpp"

namespace loom::ops {

/// The results of one Adam step: the variable's new value and the new moments (v_hat undefined without
/// AMSGrad). New tensors; the inputs are unchanged.
struct AdamUpdate {
  Tensor variable, m, v, v_hat;
};

/// Keras's Adam step for one variable, element by element in its dtype:
///   m' = m + (g - m) * (1 - beta_1),  v' = v + (g^2 - v) * (1 - beta_2),  v_hat' = max(v_hat, v') (AMSGrad),
///   w' = w - (m' * alpha) / (sqrt(v_hat' or v') + epsilon)
/// with alpha the bias-corrected learning rate, each scalar rounded to the dtype once: the same values as those
/// ops composed one by one. w, g, m, v (and v_hat when defined) share one shape and one float dtype.
AdamUpdate adam_update(const Tensor& w, const Tensor& g, const Tensor& m, const Tensor& v, const Tensor& v_hat,
                       double alpha, double beta_1, double beta_2, double epsilon);

}  // namespace loom::ops
