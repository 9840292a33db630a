#include "models/sequential.hpp"

#include "framework/tensor/error.hpp"
#include "models/summary.hpp"

namespace loom::layers {

Sequential::Sequential(std::vector<LayerArg> layers, std::optional<std::string> name)
    : Model("sequential", std::move(name)) {
  for (auto& layer : layers) add(std::move(layer));
}

void Sequential::add(LayerArg arg) {
  const std::shared_ptr<Layer>& layer = arg.get();
  check(layer != nullptr, "{}.add: the layer is null", this->name());
  if (auto input = std::dynamic_pointer_cast<Input>(layer)) {
    check(input_ == nullptr && layers().empty(), "{}.add: an Input can only be the first layer (got '{}' after {} "
          "layer(s))", this->name(), input->name(), layers().size() + (input_ ? 1 : 0));
    input_ = input;
    DType dtype = input->input_dtype().value_or(DType::f32);
    if (!is_floating(dtype)) dtype = DType::f32;  // integer inputs (token ids) still get float weights
    maybe_build(input->batch_shape(), dtype);
    return;
  }
  add_layer(layer);
  if (input_shape_) {
    Shape shape = *input_shape_;
    const auto children = layers();
    for (std::size_t i = 0; i + 1 < children.size(); ++i) shape = children[i]->compute_output_shape(shape);
    layer->maybe_build(shape, dtype());
    // As Keras, a layer the model's input shape does not fit is an error when added, not at the first fit.
    layer->compute_output_shape(shape);
  }
}

void Sequential::pop() {
  const auto children = layers();
  check(!children.empty(), "{}.pop: the model has no layers to remove", name());
  remove_layer(*children.back());
}

void Sequential::build(const Shape& input_shape) {
  input_shape_ = input_shape;
  Shape shape = input_shape;
  for (const auto& layer : layers()) {
    layer->maybe_build(shape, dtype());
    shape = layer->compute_output_shape(shape);
  }
}

Shape Sequential::compute_output_shape(const Shape& input_shape) const {
  Shape shape = input_ ? input_->compute_output_shape(input_shape) : input_shape;
  for (const auto& layer : layers()) shape = layer->compute_output_shape(shape);
  return shape;
}

Tensor Sequential::call(const Tensor& x, bool training) {
  Tensor h = input_ ? (*input_)(x, training) : x;
  for (const auto& layer : layers()) h = (*layer)(h, training);
  return h;
}

std::vector<std::string> Sequential::child_output_shapes() const {
  std::vector<std::string> out;
  std::optional<Shape> shape = input_shape_;
  for (const auto& layer : layers()) {
    if (shape) shape = layer->compute_output_shape(*shape);
    out.push_back(shape ? format_output_shape(*shape) : std::string("?"));
  }
  return out;
}

}  // namespace loom::layers
