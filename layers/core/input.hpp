#pragma once
// Input (Keras's keras.Input / InputLayer): declares the shape of a model's inputs, without the batch
// dimension, so that Sequential can build its layers before seeing data. Called on a tensor it checks the
// tensor and returns it unchanged.
//
//   auto model = L::Sequential({L::Input({16, 64}), L::Dense(10)});   // inputs [batch, 16, 64]
//
// Converted to a Tensor it is the Functional API's symbolic input (keras.Input), shape [batch, ...shape]:
//   Tensor tokens = L::Input({12}, {.dtype = DType::i64});
//   Model classifier(tokens, L::Dense(3)(...(tokens)));
//
// -1 in `shape` (Keras's None) accepts any size there; `dtype`, when given, is enforced.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "layers/layer.hpp"

namespace loom::layers {

struct InputOptions {
  std::optional<std::int64_t> batch_size = std::nullopt;
  std::optional<DType> dtype = std::nullopt;
  std::optional<std::string> name = std::nullopt;
};

class Input : public Layer {
 public:
  explicit Input(Shape shape, InputOptions options = {});

  /// A symbolic tensor of batch_shape() and the declared dtype (float32 by default), made by a copy of this
  /// Input that the graph keeps. Each conversion makes a new graph input.
  operator Tensor() const;  // NOLINT(google-explicit-constructor): as keras.Input returns a tensor

  /// Checks that an input of this shape fits and returns it.
  Shape compute_output_shape(const Shape& input_shape) const override;

  /// The declared shape, without the batch dimension.
  const Shape& shape() const { return shape_; }
  /// The declared shape with the batch dimension first (-1 when batch_size is not given).
  Shape batch_shape() const;
  std::optional<std::int64_t> batch_size() const { return batch_size_; }
  std::optional<DType> input_dtype() const { return input_dtype_; }

 protected:
  Tensor call(const Tensor& x, bool training) override;

 private:
  Shape shape_;
  std::optional<std::int64_t> batch_size_;
  std::optional<DType> input_dtype_;

 protected:
  std::shared_ptr<Layer> move_into_shared() && override { return std::make_shared<Input>(std::move(*this)); }
};

}  // namespace loom::layers

namespace loom {
using layers::Input;
}  // namespace loom
