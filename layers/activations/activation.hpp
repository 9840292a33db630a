#pragma once
// Activation (keras.layers.Activation): applies an activation function chosen by its Keras name, or a callable.
//
//   L::Activation act("gelu");   // see layers/activations/activation_functions.hpp for the names
//   L::Activation tanh_gelu([](const Tensor& x) { return ops::gelu(x, /*approximate=*/true); });
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "layers/activations/activation_functions.hpp"
#include "layers/layer.hpp"

namespace loom::layers {

struct ActivationOptions {
  std::optional<std::string> name = std::nullopt;
};

class Activation : public Layer {
 public:
  explicit Activation(activations::Activation activation, ActivationOptions options = {});
  /// Passes the input's Keras mask on, as Keras.
  bool supports_masking() const override { return true; }

  const activations::Activation& activation() const { return activation_spec_; }

 protected:
  Tensor call(const Tensor& x, bool training) override;

 private:
  activations::Activation activation_spec_;
  activations::ActivationFn activation_;

 protected:
  std::shared_ptr<Layer> move_into_shared() && override { return std::make_shared<Activation>(std::move(*this)); }
};

}  // namespace loom::layers
