#pragma once
// Dense (keras.layers.Dense): y = activation(x @ kernel + bias) on the last axis of an input of any rank >= 2.
//
//   L::Dense hidden(64, {.activation = "relu"});
//   Tensor y = hidden(x);   // x [batch, ..., in] -> y [batch, ..., 64]; kernel [in, 64], bias [64]
//
// Unlike PyTorch's Linear (weight [out, in]), the kernel is [in, units], as in Keras.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "layers/activations/activation_functions.hpp"
#include "layers/layer.hpp"

namespace loom::layers {

struct DenseOptions {
  activations::Activation activation = "";  // a Keras activation name ("" = none) or a callable
  bool use_bias = true;
  Initializer kernel_initializer = "glorot_uniform";
  Initializer bias_initializer = "zeros";
  Regularizer kernel_regularizer = {};    // none by default; a Keras name ("l2"), an object or a callable
  Regularizer bias_regularizer = {};
  Regularizer activity_regularizer = {};  // of the output, divided by the batch size
  Constraint kernel_constraint = {};      // applied by the optimizer after each update
  Constraint bias_constraint = {};
  std::optional<std::string> name = std::nullopt;
  std::optional<std::string> dtype = std::nullopt;  // a dtype policy's name (layers/dtype_policy.hpp); none: global
};

class Dense : public Layer {
 public:
  explicit Dense(std::int64_t units, DenseOptions options = {});
  /// Passes the input's Keras mask on, as Keras.
  bool supports_masking() const override { return true; }

  Shape compute_output_shape(const Shape& input_shape) const override;

  std::int64_t units() const { return units_; }
  /// The options it was made with (saving a model writes them as Keras's config).
  const DenseOptions& options() const { return options_; }
  /// The weights; undefined until the layer is built (bias also without use_bias).
  const Variable& kernel() const { return kernel_; }
  const Variable& bias() const { return bias_; }

 protected:
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& x, bool training) override;

 private:
  void check_input(const Shape& input_shape) const;

  std::int64_t units_;
  DenseOptions options_;
  activations::ActivationFn activation_;
  Variable kernel_;
  Variable bias_;

 protected:
  std::shared_ptr<Layer> move_into_shared() && override { return std::make_shared<Dense>(std::move(*this)); }
};

}  // namespace loom::layers
