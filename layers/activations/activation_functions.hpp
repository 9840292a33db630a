#pragma once
// Activation functions by Keras name (keras.activations), for the `activation` option of Dense, EinsumDense,
// the convolutions and the Activation layer (which also take a callable, see Activation below):
//
//   auto f = L::activations::get("gelu");   // x * Phi(x), exact erf as Keras's default (approximate=False)
//   Tensor y = f(x);
//
// Every function is built from differentiable loom ops, so it gradchecks and has second derivatives.
// Keras's defaults: softmax, log_softmax, glu and sparsemax act on the last axis, leaky_relu's slope is 0.2,
// elu's and celu's alpha 1, hard_shrink's and soft_shrink's threshold 0.5, squareplus's b 4. Keras's
// "threshold" needs two arguments besides x, so it is no name here: call threshold() directly.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "framework/tensor/tensor.hpp"

namespace loom::layers::activations {

using ActivationFn = std::function<Tensor(const Tensor&)>;

/// The `activation` option of a layer: a Keras name (`.activation = "relu"`; "" = none) or any callable
/// Tensor(const Tensor&), e.g. `.activation = [](const Tensor& x) { return ops::gelu(x, true); }`. Only a named
/// one can be saved in a Keras config.
class Activation {
 public:
  Activation() = default;
  Activation(const char* name) : name_(name) {}  // NOLINT: implicit, so `.activation = "relu"` reads as before
  Activation(std::string name) : name_(std::move(name)) {}  // NOLINT
  template <typename F>
    requires(std::is_invocable_r_v<Tensor, const F&, const Tensor&> && !std::is_convertible_v<F, std::string>)
  Activation(F fn) : fn_(std::move(fn)) {}  // NOLINT

  bool is_callable() const { return static_cast<bool>(fn_); }
  /// The Keras name; "" for none or for a callable.
  const std::string& name() const { return name_; }
  /// The function: get(name(), caller) for a name (an unknown one is an error starting with `caller`).
  ActivationFn function(std::string_view caller) const;
  /// Whether this is the named activation `name` (a callable equals no name).
  bool operator==(std::string_view name) const { return !is_callable() && name_ == name; }

 private:
  std::string name_;
  ActivationFn fn_;
};

/// The function called `name`; "" and "linear" are the identity. Unknown names are a loom::Error listing the
/// known ones, whose message starts with `caller` (a layer passes its name).
ActivationFn get(const std::string& name, std::string_view caller = "activations");
/// The known names, sorted.
std::vector<std::string> names();

// The ones loom::ops lacks, composed from ops.
Tensor linear(const Tensor& x);
Tensor silu(const Tensor& x);                     // x * sigmoid(x); also called "swish"
Tensor elu(const Tensor& x, double alpha = 1.0);  // x > 0 ? x : alpha * (exp(x) - 1)
Tensor selu(const Tensor& x);                     // scale * elu(x, alpha), Klambauer et al.'s constants
Tensor softplus(const Tensor& x);                 // log(1 + exp(x)), stable for large |x|
Tensor softsign(const Tensor& x);                 // x / (1 + |x|)
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.2);
Tensor relu6(const Tensor& x);         // min(max(x, 0), 6)
Tensor hard_sigmoid(const Tensor& x);  // relu6(x + 3) / 6
Tensor hard_silu(const Tensor& x);     // x * hard_sigmoid(x); also "hard_swish"
Tensor mish(const Tensor& x);          // x * tanh(softplus(x))
Tensor exponential(const Tensor& x);   // exp(x)
Tensor celu(const Tensor& x, double alpha = 1.0);  // x > 0 ? x : alpha * (exp(x / alpha) - 1)
Tensor squareplus(const Tensor& x, double b = 4.0);  // (x + sqrt(x^2 + b)) / 2
Tensor sparse_plus(const Tensor& x);     // 0 for x <= -1, x for x >= 1, (x + 1)^2 / 4 between
Tensor sparse_sigmoid(const Tensor& x);  // 0 for x <= -1, 1 for x >= 1, (x + 1) / 2 between
Tensor hard_tanh(const Tensor& x);       // clip(x, -1, 1)
Tensor tanh_shrink(const Tensor& x);     // x - tanh(x)
Tensor soft_shrink(const Tensor& x, double threshold = 0.5);  // x -+ threshold beyond +-threshold, else 0
Tensor hard_shrink(const Tensor& x, double threshold = 0.5);  // |x| > threshold ? x : 0
Tensor threshold(const Tensor& x, double threshold, double default_value);  // x > threshold ? x : default_value
/// a * sigmoid(b) for the halves a, b of x along `axis` (whose dimension must be even).
Tensor glu(const Tensor& x, std::int64_t axis = -1);
/// Sparsemax (Martins & Astudillo 2016) along `axis`: the Euclidean projection of x onto the probability
/// simplex, max(x - tau, 0) with tau chosen so that the entries add up to 1. O(n^2) in the axis' size.
Tensor sparsemax(const Tensor& x, std::int64_t axis = -1);

}  // namespace loom::layers::activations
