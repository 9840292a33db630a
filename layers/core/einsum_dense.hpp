#pragma once
// EinsumDense: a dense layer whose product is an einsum equation (keras.layers.EinsumDense). The projections
// of MultiHeadAttention are EinsumDense layers:
//
//   L::EinsumDense query("abc,cde->abde", {-1, 8, 64}, {.bias_axes = "de"});   // [B, T, D] -> [B, T, 8, 64]
//
// `output_shape` is the output's shape without the batch dimension; -1 (Keras's None) marks a dimension taken
// from the input. The kernel's shape follows from the equation: a kernel letter takes its size from the
// output if it appears there, else from the input. The bias spans the output from the first letter of
// `bias_axes` to the end, with size 1 at the letters not in bias_axes (so it broadcasts). The kernel
// initializer receives Keras 3.15's fans: fan_in = product of the kernel dimensions contracted with the
// input, fan_out = product of those that appear in the output.
// Equations have the form "<input>,<kernel>-><output>" in letters; ellipses are not supported.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "layers/activations/activation_functions.hpp"
#include "layers/layer.hpp"

namespace loom::layers {

struct EinsumDenseOptions {
  activations::Activation activation = "";              // a Keras activation name ("" = none) or a callable
  std::optional<std::string> bias_axes = std::nullopt;  // output letters that get a bias; none = no bias
  Initializer kernel_initializer = "glorot_uniform";
  Initializer bias_initializer = "zeros";
  Regularizer kernel_regularizer = {};    // none by default; a Keras name ("l2"), an object or a callable
  Regularizer bias_regularizer = {};
  Constraint kernel_constraint = {};      // applied by the optimizer after each update
  Constraint bias_constraint = {};
  Regularizer activity_regularizer = {};  // Keras's keyword argument of every layer: of the output / batch size
  std::optional<std::string> name = std::nullopt;
  std::optional<std::string> dtype = std::nullopt;  // a dtype policy's name (layers/dtype_policy.hpp); none: global
};

class EinsumDense : public Layer {
 public:
  EinsumDense(std::string equation, Shape output_shape, EinsumDenseOptions options = {});

  Shape compute_output_shape(const Shape& input_shape) const override;

  const std::string& equation() const { return equation_; }
  /// The output_shape it was made with (without the batch dimension, -1 where taken from the input).
  const Shape& output_shape() const { return partial_output_shape_; }
  /// The options it was made with (saving a model writes them as Keras's config).
  const EinsumDenseOptions& options() const { return options_; }
  /// The weights; undefined until the layer is built.
  const Variable& kernel() const { return kernel_; }
  const Variable& bias() const { return bias_; }

 protected:
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& x, bool training) override;

 private:
  struct Analysis {
    Shape kernel_shape;
    std::optional<Shape> bias_shape;
    Shape output_shape;  // full, batch dimension included
    Fans fans;
  };
  /// Keras's _analyze_einsum_string for inputs of this shape; throws naming the layer when they do not fit.
  Analysis analyze(const Shape& input_shape) const;
  /// x @ kernel + bias as one ops::dense when the equation has that form; nullopt when it has not.
  std::optional<Tensor> call_as_dense(const Tensor& x, const Shape& output_shape) const;

  std::string equation_;
  std::string input_spec_, kernel_spec_, output_spec_;
  // How many leading kernel letters the input's trailing letters contract with when the equation is
  // "<P><C>,<C><Q>-><P><Q>" (MultiHeadAttention's projections: a dense layer over reshaped axes); 0 otherwise.
  std::size_t dense_contraction_ = 0;
  Shape partial_output_shape_;
  EinsumDenseOptions options_;
  activations::ActivationFn activation_;
  Variable kernel_;
  Variable bias_;

 protected:
  std::shared_ptr<Layer> move_into_shared() && override { return std::make_shared<EinsumDense>(std::move(*this)); }
};

}  // namespace loom::layers
