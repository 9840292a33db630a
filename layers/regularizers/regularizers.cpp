#include "layers/regularizers/regularizers.hpp"

#include <cmath>
#include <map>
#include <vector>

#include <fmt/ranges.h>

#include "framework/ops/ops.hpp"

namespace loom::layers {

namespace {

// Keras's backend.epsilon(), the floor of the norms in keras.ops.normalize.
constexpr double kEpsilon = 1e-7;

/// Keras's validate_float_arg: a finite number >= 0.
double checked_factor(const char* regularizer, const char* argument, double value) {
  check(std::isfinite(value) && value >= 0.0, "{}: {} must be a finite number >= 0, got {}", regularizer, argument,
        value);
  return value;
}

/// |x| as x * (x >= 0 ? 1 : -1), the sign held constant: the value of ops::abs, with the derivative Keras's
/// JAX backend gives ops.absolute, 1 at 0 (ops::abs's is 0 there). A weight that a NonNeg constraint put at
/// exactly 0 then steps as in Keras.
Tensor keras_abs(const Tensor& x) {
  const Tensor zero = Tensor::scalar(0.0, x.dtype());
  const Tensor sign =
      ops::where(ops::greater_equal(x, zero), Tensor::scalar(1.0, x.dtype()), Tensor::scalar(-1.0, x.dtype()));
  return x * sign;
}

/// keras.ops.normalize(x, axis, order=2): x * min(rsqrt(sum(x^2, axis)), 1 / epsilon).
Tensor l2_normalize(const Tensor& x, std::int64_t axis) {
  const Tensor inverse_norm = ops::rsqrt(ops::sum(ops::square(x), {axis}, /*keepdims=*/true));
  return x * ops::minimum(inverse_norm, Tensor::scalar(1.0 / kEpsilon, x.dtype()));
}

/// 1 - eye(n) in `dtype`: the mask that drops a Gram matrix's diagonal.
Tensor off_diagonal(std::int64_t n, DType dtype) {
  std::vector<double> mask(std::size_t(n * n), 1.0);
  for (std::int64_t i = 0; i < n; ++i) mask[std::size_t(i * n + i)] = 0.0;
  return Tensor::from_vector(mask, Shape{n, n}).to(dtype);
}

using Factory = Regularizer (*)();
const std::map<std::string, Factory, std::less<>>& known_regularizers() {
  // keras.regularizers.get's names (the classes and their snake_case names), and "l1_l2", the name Keras's
  // documentation gives L1L2 with l1 = l2 = 0.01.
  static const std::map<std::string, Factory, std::less<>> table = {
      {"l1", [] { return regularizers::l1(); }},
      {"L1", [] { return regularizers::l1(); }},
      {"l2", [] { return regularizers::l2(); }},
      {"L2", [] { return regularizers::l2(); }},
      {"l1l2", [] { return regularizers::l1_l2(); }},
      {"L1L2", [] { return regularizers::l1_l2(); }},
      {"l1_l2", [] { return regularizers::l1_l2(0.01, 0.01); }},
      {"orthogonal_regularizer", [] { return regularizers::orthogonal_regularizer(); }},
      {"OrthogonalRegularizer", [] { return regularizers::orthogonal_regularizer(); }},
  };
  return table;
}

Regularizer by_name(const std::string& name) {
  const auto& table = known_regularizers();
  const auto it = table.find(name);
  if (it == table.end()) {
    std::vector<std::string> names;
    for (const auto& [known, factory] : table) names.push_back(known);
    throw Error(fmt::format("Regularizer: unknown regularizer '{}'; known names: {}", name, fmt::join(names, ", ")));
  }
  return it->second();
}

}  // namespace

Regularizer::Regularizer(const char* name) : Regularizer(std::string(name != nullptr ? name : "")) {}

Regularizer::Regularizer(const std::string& name) : Regularizer(by_name(name)) {}

Regularizer::Regularizer(std::string class_name, Fn fn, RegularizerArguments arguments)
    : class_name_(std::move(class_name)), fn_(std::move(fn)), arguments_(std::move(arguments)) {
  check(fn_ != nullptr, "Regularizer '{}': no function given", class_name_);
}

std::string Regularizer::describe() const {
  if (!arguments_) return class_name_.empty() ? "no regularizer" : class_name_;
  std::vector<std::string> parts;
  for (const auto& [key, value] : arguments_->numbers) parts.push_back(fmt::format("{}={}", key, value));
  if (!arguments_->mode.empty()) parts.push_back(fmt::format("mode='{}'", arguments_->mode));
  return fmt::format("{}({})", class_name_, fmt::join(parts, ", "));
}

Tensor Regularizer::operator()(const Tensor& x, std::string_view weight) const {
  check(static_cast<bool>(fn_), "Regularizer: no regularizer to apply (an empty Regularizer is Keras's None)");
  check(x.defined(), "{}: the tensor to regularize is undefined", describe());
  check_applicable(x.shape(), "Regularizer");
  const Tensor penalty = fn_(x);
  check(penalty.defined() && is_floating(penalty.dtype()),
        "{}{}: a regularizer must return a floating tensor (the penalty), got {} for an input of shape {}", describe(),
        weight.empty() ? std::string() : fmt::format(" (the regularizer of weight '{}')", weight),
        penalty.defined() ? fmt::format("{} of shape {}", penalty.dtype(), penalty.shape()) : "an undefined tensor",
        x.shape());
  return penalty;
}

void Regularizer::check_applicable(const Shape& shape, std::string_view caller) const {
  if (class_name_ != "OrthogonalRegularizer" || !arguments_) return;
  check(shape.size() == 2, "{}: {} applies to rank-2 tensors only (as Keras), got shape {}", caller, describe(),
        shape);
  const bool rows = arguments_->mode == "rows";
  const std::int64_t n = rows ? shape[0] : shape[1];
  check(n >= 2 || n == -1, "{}: {} needs at least 2 {} to compare (its mean over pairs of a single one is 0 / 0), "
        "got shape {}", caller, describe(), rows ? "rows" : "columns", shape);
}

namespace regularizers {

Regularizer l1(double l1_factor) {
  const double l1 = checked_factor("L1", "l1", l1_factor);
  return {"L1", [l1](const Tensor& x) { return ops::sum(keras_abs(x)) * l1; }, {{{"l1", l1}}, ""}};
}

Regularizer l2(double l2_factor) {
  const double l2 = checked_factor("L2", "l2", l2_factor);
  return {"L2", [l2](const Tensor& x) { return ops::sum(ops::square(x)) * l2; }, {{{"l2", l2}}, ""}};
}

Regularizer l1_l2(double l1_factor, double l2_factor) {
  const double l1 = checked_factor("L1L2", "l1", l1_factor), l2 = checked_factor("L1L2", "l2", l2_factor);
  return {"L1L2",
          [l1, l2](const Tensor& x) {
            Tensor penalty = Tensor::scalar(0.0, x.dtype());
            if (l1 != 0.0) penalty = penalty + ops::sum(keras_abs(x)) * l1;
            if (l2 != 0.0) penalty = penalty + ops::sum(ops::square(x)) * l2;
            return penalty;
          },
          {{{"l1", l1}, {"l2", l2}}, ""}};
}

Regularizer orthogonal_regularizer(double factor, const std::string& mode) {
  checked_factor("OrthogonalRegularizer", "factor", factor);
  check(mode == "rows" || mode == "columns", "OrthogonalRegularizer: mode must be 'rows' or 'columns', got '{}'",
        mode);
  const bool rows = mode == "rows";
  const std::string description = fmt::format("OrthogonalRegularizer(factor={}, mode='{}')", factor, mode);
  return {"OrthogonalRegularizer",
          [factor, rows, description](const Tensor& x) {
            check(x.ndim() == 2, "{}: inputs must have rank 2 (as Keras), got shape {}", description, x.shape());
            const Tensor unit = l2_normalize(x, rows ? 1 : 0);
            const Tensor product =
                rows ? ops::matmul(unit, ops::transpose(unit)) : ops::matmul(ops::transpose(unit), unit);
            const std::int64_t size = rows ? x.shape()[0] : x.shape()[1];
            const double pairs = double(size) * (double(size) - 1.0) / 2.0;
            const Tensor off_diagonal_products = product * off_diagonal(size, x.dtype());
            return ops::sum(keras_abs(off_diagonal_products)) * (factor * 0.5) / pairs;
          },
          {{{"factor", factor}}, mode}};
}

}  // namespace regularizers
}  // namespace loom::layers
