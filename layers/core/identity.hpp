#pragma once
// Identity (keras.layers.Identity): returns its input unchanged, mask included; a placeholder layer.
//
//   Tensor y = L::Identity()(x);                           // y is x (same tensor, same Keras mask)
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "layers/layer.hpp"

namespace loom::layers {

struct IdentityOptions {
  std::optional<std::string> name = std::nullopt;
};

class Identity : public Layer {
 public:
  explicit Identity(IdentityOptions options = {});

  bool supports_masking() const override { return true; }
  std::string class_name() const override { return "Identity"; }

 protected:
  Tensor call(const Tensor& x, bool training) override;
  std::shared_ptr<Layer> move_into_shared() && override { return std::make_shared<Identity>(std::move(*this)); }
};

}  // namespace loom::layers
