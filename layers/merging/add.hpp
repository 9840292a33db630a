#pragma once
// Add (keras.layers.Add): the elementwise sum of a list of tensors, e.g. a residual connection.
//
//   L::Add residual;
//   Tensor y = residual({x, block(x)});
//
// As Keras's merge layers: every input has the same batch size; the other axes broadcast (right-aligned,
// size 1 against any size), and an input of lower rank gets size-1 axes inserted after its batch axis.
#include <optional>
#include <string>
#include <vector>

#include "layers/layer.hpp"

namespace loom::layers {

struct AddOptions {
  std::optional<std::string> name = std::nullopt;
};

class Add : public Layer {
 public:
  explicit Add(AddOptions options = {});

  Tensor operator()(const std::vector<Tensor>& inputs, bool training = false);
  using Layer::compute_output_shape;  // one input shape: the Layer's (identity)
  Shape compute_output_shape(const std::vector<Shape>& input_shapes) const;

 private:
  void check_inputs(const std::vector<Tensor>& inputs) const;
};

}  // namespace loom::layers
