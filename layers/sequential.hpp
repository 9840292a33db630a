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

#include "layers/input.hpp"
#include "layers/model.hpp"

namespace loom::layers {

/// A layer given to Sequential: a layer object (moved in) or a shared_ptr the caller keeps.
class LayerArg {
 public:
  template <class L>
    requires std::is_base_of_v<Layer, std::decay_t<L>> && (!std::is_lvalue_reference_v<L>)
  LayerArg(L&& layer)  // NOLINT: implicit, so that `Sequential({L::Dense(8), L::Dense(1)})` works
      : layer_(std::make_shared<std::decay_t<L>>(std::move(layer))) {}
  template <class L>
    requires std::is_base_of_v<Layer, L>
  LayerArg(std::shared_ptr<L> layer) : layer_(std::move(layer)) {}  // NOLINT

  const std::shared_ptr<Layer>& get() const { return layer_; }

 private:
  std::shared_ptr<Layer> layer_;
};

class Sequential : public Model {
 public:
  explicit Sequential(std::vector<LayerArg> layers = {}, std::optional<std::string> name = std::nullopt);

  /// Appends a layer (an Input only as the first); builds it at once when the model's input shape is known.
  void add(LayerArg layer);
  /// Removes the last layer.
  void pop();

  /// The shapes flow through each layer's compute_output_shape.
  Shape compute_output_shape(const Shape& input_shape) const override;

 protected:
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& x, bool training) override;
  std::vector<std::string> child_output_shapes() const override;

 private:
  std::shared_ptr<Input> input_;
  std::optional<Shape> input_shape_;  // with the batch dimension (-1 when free), once known
};

}  // namespace loom::layers
