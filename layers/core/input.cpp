#include "layers/core/input.hpp"

#include <memory>

#include "framework/graph/symbolic.hpp"

namespace loom::layers {

Input::Input(Shape shape, InputOptions options)
    : Layer("input_layer", options.name),
      shape_(std::move(shape)),
      batch_size_(options.batch_size),
      input_dtype_(options.dtype) {
  for (auto d : shape_) check(d >= 0 || d == -1, "{}: shape {} must hold sizes >= 0 or -1 (any size)", name(), shape_);
  check(!batch_size_ || *batch_size_ > 0, "{}: batch_size must be positive, got {}", name(), batch_size_.value_or(0));
  mark_built(DType::f32);  // no weights: built from the start, as Keras's InputLayer
}

Input::operator Tensor() const {
  auto layer = std::make_shared<Input>(shape_, InputOptions{batch_size_, input_dtype_, name()});
  auto handle = layer->handle();
  handle->owned = layer;
  return graph::input(batch_shape(), input_dtype_.value_or(DType::f32), name(), class_name(), handle);
}

Shape Input::batch_shape() const {
  Shape out{batch_size_.value_or(-1)};
  out.insert(out.end(), shape_.begin(), shape_.end());
  return out;
}

Shape Input::compute_output_shape(const Shape& input_shape) const {
  const Shape expected = batch_shape();
  bool fits = input_shape.size() == expected.size();
  for (std::size_t i = 0; fits && i < expected.size(); ++i) fits = expected[i] == -1 || expected[i] == input_shape[i];
  check(fits, "{}: expected inputs of shape {} (-1 = any size), got {}", name(), expected, input_shape);
  return input_shape;
}

Tensor Input::call(const Tensor& x, bool) {
  compute_output_shape(x.shape());
  check(!input_dtype_ || x.dtype() == *input_dtype_, "{}: expected a {} input, got {} of shape {}", name(),
        input_dtype_.value_or(x.dtype()), x.dtype(), x.shape());
  return x;
}

}  // namespace loom::layers
