#pragma once
// Activation functions by Keras name (keras.activations), for the `activation` option of Dense, EinsumDense
// and the Activation layer:
//
//   auto f = L::activations::get("gelu");   // x * Phi(x), exact erf as Keras's default (approximate=False)
//   Tensor y = f(x);
//
// Every function is built from differentiable loom ops, so it gradchecks and has second derivatives.
// Keras's defaults: softmax and log_softmax act on the last axis, leaky_relu's slope is 0.2, elu's alpha 1.
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "framework/tensor/tensor.hpp"

namespace loom::layers::activations {

using ActivationFn = std::function<Tensor(const Tensor&)>;

/// The function called `name`; "" and "linear" are the identity. Unknown names are a loom::Error listing the
/// known ones, whose message starts with `caller` (a layer passes its name).
ActivationFn get(const std::string& name, std::string_view caller = "activations");
/// The known names, sorted.
std::vector<std::string> names();

// The ones loom::ops lacks, composed from ops.
Tensor linear(const Tensor& x);
Tensor silu(const Tensor& x);                     // x * sigmoid(x); also called "swish"
Tensor elu(const Tensor& x, double alpha = 1.0);  // x > 0 ? x : alpha * (exp(x) - 1)
Tensor selu(const Tensor& x);                     // scale * elu(x, alpha), Klambauer et al.'s constants
Tensor softplus(const Tensor& x);                 // log(1 + exp(x)), stable for large |x|
Tensor softsign(const Tensor& x);                 // x / (1 + |x|)
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.2);
Tensor relu6(const Tensor& x);         // min(max(x, 0), 6)
Tensor hard_sigmoid(const Tensor& x);  // relu6(x + 3) / 6
Tensor hard_silu(const Tensor& x);     // x * hard_sigmoid(x); also "hard_swish"
Tensor mish(const Tensor& x);          // x * tanh(softplus(x))
Tensor exponential(const Tensor& x);   // exp(x)

}  // namespace loom::layers::activations
