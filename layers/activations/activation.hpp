#pragma once
// Activation (keras.layers.Activation): applies an activation function chosen by its Keras name.
//
//   L::Activation act("gelu");   // see layers/activations/activation_functions.hpp for the names
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
  explicit Activation(std::string activation, ActivationOptions options = {});
  /// Passes the input's Keras mask on, as Keras.
  bool supports_masking() const override { return true; }

  const std::string& activation() const { return activation_name_; }

 protected:
  Tensor call(const Tensor& x, bool training) override;

 private:
  std::string activation_name_;
  activations::ActivationFn activation_;

 protected:
  std::shared_ptr<Layer> move_into_shared() && override { return std::make_shared<Activation>(std::move(*this)); }
};

}  // namespace loom::layers
