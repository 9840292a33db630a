#include "layers/activations/activation.hpp"

namespace loom::layers {

Activation::Activation(activations::Activation activation, ActivationOptions options)
    : Layer("activation", options.name),
      activation_spec_(std::move(activation)),
      activation_(activation_spec_.function(name())) {}

Tensor Activation::call(const Tensor& x, bool) {
  check(is_floating(x.dtype()), "{}: expected a float32 or float64 input, got {} of shape {}", name(), x.dtype(),
        x.shape());
  return apply_activation(activation_, x);
}

}  // namespace loom::layers
