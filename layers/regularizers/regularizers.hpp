#pragma once
// Weight and activity regularizers with Keras's names and formulas (keras.regularizers).
//
//   L::Dense(64, {.kernel_regularizer = "l2"})                                   // by name: L2(0.01)
//   L::Dense(64, {.kernel_regularizer = regularizers::l1_l2(1e-4, 1e-3)})        // as object
//   L::Dense(64, {.activity_regularizer = [](const Tensor& y) { return ops::sum(ops::abs(y)) * 1e-3; }})
//
// A regularizer maps a tensor to a penalty (a scalar for the built-in ones). A layer's losses() hold the
// penalties of its trainable weights, computed when asked, and the activity penalties of its latest call
// (the penalty of the output divided by the batch size); a model's training and evaluation loss add them.
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "framework/tensor/tensor.hpp"

namespace loom::layers {

/// What a built-in regularizer was made with, by Keras's argument names: what saving writes as its config.
struct RegularizerArguments {
  std::vector<std::pair<std::string, double>> numbers;  // l1, l2, factor: in Keras's config order
  std::string mode;                                     // OrthogonalRegularizer's; "" for the others
};

class Regularizer {
 public:
  using Fn = std::function<Tensor(const Tensor&)>;
  /// No regularizer (Keras's None).
  Regularizer() = default;
  /// One of Keras's names, with its default arguments: "l1" / "L1" (0.01), "l2" / "L2" (0.01), "l1l2" / "L1L2"
  /// (Keras's get: l1 = l2 = 0), "l1_l2" (the values Keras documents for it: l1 = l2 = 0.01),
  /// "orthogonal_regularizer" / "OrthogonalRegularizer" (0.01, rows). Unknown names are a loom::Error.
  Regularizer(const char* name);         // NOLINT: a name converts, as in Keras
  Regularizer(const std::string& name);  // NOLINT
  /// Any callable Tensor(const Tensor&) returning a floating penalty (summed into the loss).
  template <typename F>
    requires(std::is_invocable_r_v<Tensor, const F&, const Tensor&> && !std::is_convertible_v<F, std::string> &&
             !std::is_same_v<std::decay_t<F>, Regularizer>)
  Regularizer(F fn) : class_name_("callable"), fn_(std::move(fn)) {}  // NOLINT
  /// A built-in regularizer: its Keras class name ("L2"), function and arguments.
  Regularizer(std::string class_name, Fn fn, RegularizerArguments arguments);

  explicit operator bool() const { return static_cast<bool>(fn_); }
  /// The penalty of `x`: a loom::Error naming the regularizer (and, when given, the weight: a layer passes its
  /// weight's path) when it is undefined or not floating.
  Tensor operator()(const Tensor& x, std::string_view weight = {}) const;
  /// Whether the regularizer applies to a weight of this shape (OrthogonalRegularizer: rank 2 with at least
  /// two rows or columns); a loom::Error whose message starts with `caller` when it does not.
  void check_applicable(const Shape& shape, std::string_view caller) const;

  /// Keras's class name ("L1", "L2", "L1L2", "OrthogonalRegularizer"); "callable" for a function, "" for none.
  const std::string& class_name() const { return class_name_; }
  /// The arguments of a built-in regularizer; none for a callable.
  const std::optional<RegularizerArguments>& arguments() const { return arguments_; }
  /// "L2(l2=0.01)", for messages.
  std::string describe() const;

 private:
  std::string class_name_;
  Fn fn_;
  std::optional<RegularizerArguments> arguments_;
};

namespace regularizers {
/// Keras's L1: l1 * sum(|x|). The factor must be finite and >= 0 (as every factor here).
Regularizer l1(double l1_factor = 0.01);
/// Keras's L2: l2 * sum(x^2).
Regularizer l2(double l2_factor = 0.01);
/// Keras's L1L2: l1 * sum(|x|) + l2 * sum(x^2), each term only when its factor is nonzero.
Regularizer l1_l2(double l1_factor = 0.0, double l2_factor = 0.0);
/// Keras's OrthogonalRegularizer for rank-2 tensors: factor * 0.5 * sum(|P - diag(P)|) / (n (n - 1) / 2), P the
/// Gram matrix of the L2-normalized rows (mode "rows", n rows) or columns (mode "columns", n columns).
Regularizer orthogonal_regularizer(double factor = 0.01, const std::string& mode = "rows");
}  // namespace regularizers

}  // namespace loom::layers
