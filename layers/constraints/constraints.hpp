#pragma once
// Weight constraints with Keras's names and formulas (keras.constraints): projections an optimizer applies to
// a weight after each update (Variable::constraint).
//
//   L::Dense(64, {.kernel_constraint = "max_norm"})                              // by name: MaxNorm(2, axis=0)
//   L::Conv2D(16, {3, 3}, {.kernel_constraint = constraints::max_norm(3.0, {0, 1, 2})})
//   L::Dense(64, {.bias_constraint = [](const Tensor& w) { return ops::clip(w, -1.0, 1.0); }})
//
// The norms are taken over `axis` (one axis or several; negative ones count from the end) and floored by
// Keras's epsilon 1e-7: w * desired / (1e-7 + norm).
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "framework/tensor/tensor.hpp"

namespace loom::layers {

/// What a built-in constraint was made with, by Keras's argument names: what saving writes as its config.
struct ConstraintArguments {
  std::vector<std::pair<std::string, double>> numbers;  // max_value, min_value, rate: in Keras's config order
  std::optional<Axes> axis;                             // none for NonNeg
};

class Constraint {
 public:
  using Fn = std::function<Tensor(const Tensor&)>;
  /// No constraint (Keras's None).
  Constraint() = default;
  /// One of Keras's names, with its default arguments: "max_norm" / "MaxNorm", "min_max_norm" / "MinMaxNorm",
  /// "non_neg" / "NonNeg", "unit_norm" / "UnitNorm". Unknown names are a loom::Error.
  Constraint(const char* name);         // NOLINT: a name converts, as in Keras
  Constraint(const std::string& name);  // NOLINT
  /// Any callable Tensor(const Tensor&) that returns a tensor of its input's shape and dtype.
  template <typename F>
    requires(std::is_invocable_r_v<Tensor, const F&, const Tensor&> && !std::is_convertible_v<F, std::string> &&
             !std::is_same_v<std::decay_t<F>, Constraint>)
  Constraint(F fn) : class_name_("callable"), fn_(std::move(fn)) {}  // NOLINT
  /// A built-in constraint: its Keras class name ("MaxNorm"), function and arguments.
  Constraint(std::string class_name, Fn fn, ConstraintArguments arguments);

  explicit operator bool() const { return static_cast<bool>(fn_); }
  /// The projection of `w`; a result of another shape or dtype is a loom::Error naming the constraint and,
  /// when given, the weight (a layer passes its weight's path).
  Tensor operator()(const Tensor& w, std::string_view weight = {}) const;
  /// Whether the constraint applies to a weight of this shape (every axis within its rank, none twice); a
  /// loom::Error whose message starts with `caller` when it does not.
  void check_applicable(const Shape& shape, std::string_view caller) const;

  /// Keras's class name ("MaxNorm", "MinMaxNorm", "NonNeg", "UnitNorm"); "callable" for a function, "" for none.
  const std::string& class_name() const { return class_name_; }
  /// The arguments of a built-in constraint; none for a callable.
  const std::optional<ConstraintArguments>& arguments() const { return arguments_; }
  /// "MaxNorm(max_value=2, axis=0)", for messages.
  std::string describe() const;

 private:
  std::string class_name_;
  Fn fn_;
  std::optional<ConstraintArguments> arguments_;
};

namespace constraints {
/// Keras's MaxNorm: w * clip(norm, 0, max_value) / (1e-7 + norm). max_value must be >= 0.
Constraint max_norm(double max_value = 2.0, Axes axis = 0);
/// Keras's MinMaxNorm: w * (rate * clip(norm, min_value, max_value) + (1 - rate) * norm) / (1e-7 + norm).
/// Needs 0 <= min_value <= max_value and rate in [0, 1].
Constraint min_max_norm(double min_value = 0.0, double max_value = 1.0, double rate = 1.0, Axes axis = 0);
/// Keras's NonNeg: max(w, 0).
Constraint non_neg();
/// Keras's UnitNorm: w / (1e-7 + norm).
Constraint unit_norm(Axes axis = 0);
}  // namespace constraints

}  // namespace loom::layers
