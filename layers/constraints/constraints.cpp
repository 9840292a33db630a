#include "layers/constraints/constraints.hpp"

#include <cmath>
#include <map>
#include <set>
#include <vector>

#include <fmt/ranges.h>

#include "framework/ops/ops.hpp"

namespace loom::layers {

namespace {

// Keras's backend.epsilon(), added to the norms before dividing by them.
constexpr double kEpsilon = 1e-7;

/// sqrt(sum(w^2, axis, keepdims)), the norms the norm constraints rescale.
Tensor norms(const Tensor& w, const Axes& axis) { return ops::sqrt(ops::sum(ops::square(w), axis, /*keepdims=*/true)); }

std::string axis_text(const Axes& axis) {
  if (axis.empty()) return "None";
  if (axis.size() == 1) return fmt::format("{}", axis[0]);
  return fmt::format("[{}]", fmt::join(axis, ", "));
}

void check_finite(const char* constraint, const char* argument, double value) {
  check(std::isfinite(value), "{}: {} must be finite, got {}", constraint, argument, value);
}

using Factory = Constraint (*)();
const std::map<std::string, Factory, std::less<>>& known_constraints() {
  // keras.constraints.get's names: the classes and their snake_case names.
  static const std::map<std::string, Factory, std::less<>> table = {
      {"max_norm", [] { return constraints::max_norm(); }},
      {"MaxNorm", [] { return constraints::max_norm(); }},
      {"min_max_norm", [] { return constraints::min_max_norm(); }},
      {"MinMaxNorm", [] { return constraints::min_max_norm(); }},
      {"non_neg", [] { return constraints::non_neg(); }},
      {"NonNeg", [] { return constraints::non_neg(); }},
      {"unit_norm", [] { return constraints::unit_norm(); }},
      {"UnitNorm", [] { return constraints::unit_norm(); }},
  };
  return table;
}

Constraint by_name(const std::string& name) {
  const auto& table = known_constraints();
  const auto it = table.find(name);
  if (it == table.end()) {
    std::vector<std::string> names;
    for (const auto& [known, factory] : table) names.push_back(known);
    throw Error(fmt::format("Constraint: unknown constraint '{}'; known names: {}", name, fmt::join(names, ", ")));
  }
  return it->second();
}

}  // namespace

Constraint::Constraint(const char* name) : Constraint(std::string(name != nullptr ? name : "")) {}

Constraint::Constraint(const std::string& name) : Constraint(by_name(name)) {}

Constraint::Constraint(std::string class_name, Fn fn, ConstraintArguments arguments)
    : class_name_(std::move(class_name)), fn_(std::move(fn)), arguments_(std::move(arguments)) {
  check(fn_ != nullptr, "Constraint '{}': no function given", class_name_);
}

std::string Constraint::describe() const {
  if (!arguments_) return class_name_.empty() ? "no constraint" : class_name_;
  std::vector<std::string> parts;
  for (const auto& [key, value] : arguments_->numbers) parts.push_back(fmt::format("{}={}", key, value));
  if (arguments_->axis) parts.push_back("axis=" + axis_text(*arguments_->axis));
  return fmt::format("{}({})", class_name_, fmt::join(parts, ", "));
}

Tensor Constraint::operator()(const Tensor& w, std::string_view weight) const {
  check(static_cast<bool>(fn_), "Constraint: no constraint to apply (an empty Constraint is Keras's None)");
  check(w.defined(), "{}: the weight to constrain is undefined", describe());
  check_applicable(w.shape(), "Constraint");
  const Tensor projected = fn_(w);
  check(projected.defined() && projected.shape() == w.shape() && projected.dtype() == w.dtype(),
        "{}{}: a constraint must return a tensor of its input's shape and dtype ({} of shape {}), got {}", describe(),
        weight.empty() ? std::string() : fmt::format(" (the constraint of weight '{}')", weight), w.dtype(), w.shape(),
        projected.defined() ? fmt::format("{} of shape {}", projected.dtype(), projected.shape())
                            : "an undefined tensor");
  return projected;
}

void Constraint::check_applicable(const Shape& shape, std::string_view caller) const {
  if (!arguments_ || !arguments_->axis) return;
  const auto rank = std::int64_t(shape.size());
  std::set<std::int64_t> seen;
  for (const std::int64_t axis : *arguments_->axis) {
    check(axis >= -rank && axis < rank, "{}: {}: axis {} is out of range for a weight of shape {} (rank {}; expected "
          "an axis in [{}, {}))", caller, describe(), axis, shape, rank, -rank, rank);
    check(seen.insert(axis < 0 ? axis + rank : axis).second, "{}: {}: axis {} is given twice (weight of shape {})",
          caller, describe(), axis, shape);
  }
}

namespace constraints {

Constraint max_norm(double max_value, Axes axis) {
  check_finite("MaxNorm", "max_value", max_value);
  check(max_value >= 0.0, "MaxNorm: max_value must be >= 0, got {}", max_value);
  return {"MaxNorm",
          [max_value, axis](const Tensor& w) {
            const Tensor n = norms(w, axis);
            const Tensor desired = ops::clip(n, 0.0, max_value);
            return w * (desired / (n + kEpsilon));
          },
          {{{"max_value", max_value}}, axis}};
}

Constraint min_max_norm(double min_value, double max_value, double rate, Axes axis) {
  check_finite("MinMaxNorm", "min_value", min_value);
  check_finite("MinMaxNorm", "max_value", max_value);
  check_finite("MinMaxNorm", "rate", rate);
  check(min_value >= 0.0 && min_value <= max_value,
        "MinMaxNorm: expected 0 <= min_value <= max_value, got min_value={}, max_value={}", min_value, max_value);
  check(rate >= 0.0 && rate <= 1.0, "MinMaxNorm: rate must be in [0, 1], got {}", rate);
  return {"MinMaxNorm",
          [min_value, max_value, rate, axis](const Tensor& w) {
            const Tensor n = norms(w, axis);
            const Tensor desired = ops::clip(n, min_value, max_value) * rate + n * (1.0 - rate);
            return w * (desired / (n + kEpsilon));
          },
          {{{"min_value", min_value}, {"max_value", max_value}, {"rate", rate}}, axis}};
}

Constraint non_neg() {
  return {"NonNeg", [](const Tensor& w) { return ops::maximum(w, Tensor::scalar(0.0, w.dtype())); },
          {{}, std::nullopt}};
}

Constraint unit_norm(Axes axis) {
  return {"UnitNorm", [axis](const Tensor& w) { return w / (norms(w, axis) + kEpsilon); }, {{}, axis}};
}

}  // namespace constraints
}  // namespace loom::layers
