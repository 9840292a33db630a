#pragma once
// Sequential: a Model that runs its layers one after the other (keras.Sequential). Starting with an Input
// builds every layer at once, so summary() and save_weights work before any data; otherwise the layers are
// built by the first call. The Input is not one of layers(), as in Keras.
//
//   auto model = L::Sequential({L::Input({16}), L::Dense(64, {.activation = "relu"}), L::Dense(10)});
//   model.add(L::Dropout(0.1));   model.pop();
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "layers/core/input.hpp"
#include "models/model.hpp"
#include "models/shared_arg.hpp"

namespace loom::layers {

/// A layer given to Sequential: a layer object (moved in) or a shared_ptr the caller keeps.
using LayerArg = SharedArg<Layer>;

class Sequential : public Model {
 public:
  explicit Sequential(std::vector<LayerArg> layers = {}, std::optional<std::string> name = std::nullopt);

  /// Appends a layer (an Input only as the first); builds it at once when the model's input shape is known.
  void add(LayerArg layer);
  /// Removes the last layer.
  void pop();

  /// The Input the model starts with (null when none was given), and the input shape it is built for (batch
  /// dimension first, -1 where free; none before it is built).
  const std::shared_ptr<Input>& input_layer() const { return input_; }
  const std::optional<Shape>& build_input_shape() const { return input_shape_; }

  /// The shapes flow through each layer's compute_output_shape.
  Shape compute_output_shape(const Shape& input_shape) const override;

 protected:
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& x, bool training) override;
  std::vector<std::string> child_output_shapes() const override;

 private:
  std::shared_ptr<Input> input_;
  std::optional<Shape> input_shape_;  // with the batch dimension (-1 when free), once known

 protected:
  std::shared_ptr<Layer> move_into_shared() && override { return std::make_shared<Sequential>(std::move(*this)); }
};

}  // namespace loom::layers

namespace loom {
using layers::Sequential;
}  // namespace loom
