#pragma once
// Reshape (keras.layers.Reshape): reshapes every sample to `target_shape` (without the batch dimension);
// one entry may be -1, inferred from the others.
//
//   L::Reshape split_heads({-1, 8, 64});   // [batch, 16, 512] -> [batch, 16, 8, 64]
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "layers/layer.hpp"

namespace loom::layers {

struct ReshapeOptions {
  std::optional<std::string> name = std::nullopt;
};

class Reshape : public Layer {
 public:
  explicit Reshape(Shape target_shape, ReshapeOptions options = {});

  Shape compute_output_shape(const Shape& input_shape) const override;

  const Shape& target_shape() const { return target_shape_; }

 protected:
  Tensor call(const Tensor& x, bool training) override;

 private:
  Shape target_shape_;

 protected:
  std::shared_ptr<Layer> move_into_shared() && override { return std::make_shared<Reshape>(std::move(*this)); }
};

}  // namespace loom::layers
