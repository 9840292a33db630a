#include "optim/optimizer.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "framework/tensor/error.hpp"
#include "optim/adadelta.hpp"
#include "optim/adagrad.hpp"
#include "optim/adam.hpp"
#include "optim/adamax.hpp"
#include "optim/adamw.hpp"
#include "optim/lion.hpp"
#include "optim/rmsprop.hpp"
#include "optim/sgd.hpp"

namespace loom::optim {

namespace {

constexpr const char* kIterationKey = "iteration";

std::string slot_key(const Variable& var, const std::string& slot) { return var.name() + "/" + slot; }

void check_positive_option(std::string_view optimizer, const char* option, const std::optional<double>& value) {
  check(!value || (std::isfinite(*value) && *value > 0.0), "{}: {} must be a finite number > 0, got {}", optimizer,
        option, value.value_or(0.0));
}

/// Keras's _clip_by_norm: g * c / max(||g||, c), so a tensor whose norm is within c is unchanged.
Tensor clip_by_norm(const Tensor& gradient, double clipnorm) {
  const double norm = std::sqrt(ops::sum(ops::square(gradient)).item<double>());
  return (gradient * clipnorm) / std::max(norm, clipnorm);
}

/// Keras's clip_by_global_norm: one factor for all tensors; a non-finite global norm makes every gradient NaN.
void clip_by_global_norm(std::vector<Tensor>& gradients, double clipnorm) {
  double squared = 0.0;
  for (const Tensor& g : gradients) squared += ops::sum(ops::square(g)).item<double>();
  const double norm = std::sqrt(squared);
  const double scale = clipnorm * std::min(1.0 / norm, 1.0 / clipnorm) + (norm - norm);
  for (Tensor& g : gradients) g = g * scale;
}

}  // namespace

LearningRate::LearningRate(double value) : value_(value) {
  check(std::isfinite(value) && value >= 0.0, "LearningRate: a constant learning rate must be finite and >= 0, got {}",
        value);
}

double LearningRate::at(std::int64_t step) const { return schedule_ ? schedule_(step) : value_; }

Optimizer::Optimizer(std::string_view default_name, LearningRate learning_rate, BaseOptions options)
    : name_(options.name.value_or(std::string(default_name))),
      learning_rate_(std::move(learning_rate)),
      options_(std::move(options)) {
  const int clip_options = int(options_.clipnorm.has_value()) + int(options_.clipvalue.has_value()) +
                           int(options_.global_clipnorm.has_value());
  check(clip_options <= 1,
        "{}: only one of clipnorm, clipvalue and global_clipnorm can be set, got clipnorm={}, clipvalue={}, "
        "global_clipnorm={}",
        name_, options_.clipnorm ? fmt::format("{}", *options_.clipnorm) : "none",
        options_.clipvalue ? fmt::format("{}", *options_.clipvalue) : "none",
        options_.global_clipnorm ? fmt::format("{}", *options_.global_clipnorm) : "none");
  check_positive_option(name_, "clipnorm", options_.clipnorm);
  check_positive_option(name_, "clipvalue", options_.clipvalue);
  check_positive_option(name_, "global_clipnorm", options_.global_clipnorm);
  check(!options_.weight_decay || (std::isfinite(*options_.weight_decay) && *options_.weight_decay >= 0.0),
        "{}: weight_decay must be a finite number >= 0, got {}", name_, options_.weight_decay.value_or(0.0));
}

void Optimizer::apply_gradients(const std::vector<Tensor>& grads, const std::vector<Variable>& vars) {
  apply_aggregated_gradients(aggregate_gradients(grads, vars), vars);
}

std::vector<Tensor> Optimizer::aggregate_gradients(const std::vector<Tensor>& grads,
                                                   const std::vector<Variable>& vars) {
  check(grads.size() == vars.size(), "{}.apply_gradients: got {} gradients for {} variables", name_, grads.size(),
        vars.size());
  return aggregator_ ? aggregator_->aggregate(grads, vars) : grads;
}

void Optimizer::check_variables_are_known(const std::vector<Variable>& vars, std::string_view caller) const {
  if (built_with_.empty()) return;
  for (const Variable& var : vars) {
    if (!var.defined() || built_with_.count(var.id()) != 0) continue;
    throw Error(fmt::format(
        "{}.{}: variable '{}' is not one of the {} variables this optimizer was built with on its first step; an "
        "optimizer's iteration count and slots belong to one model: give each model its own optimizer (Keras "
        "refuses this too)",
        name_, caller, var.name(), built_with_.size()));
  }
}

void Optimizer::apply_aggregated_gradients(const std::vector<Tensor>& grads, const std::vector<Variable>& vars) {
  check(grads.size() == vars.size(), "{}.apply_gradients: got {} gradients for {} variables", name_, grads.size(),
        vars.size());
  check_variables_are_known(vars, "apply_gradients");
  // Keras drops the variables without a gradient; the step goes on for the others.
  std::vector<Tensor> gradients;
  std::vector<Variable> variables;
  for (std::size_t i = 0; i < vars.size(); ++i) {
    const Variable& var = vars[i];
    check(var.defined(), "{}.apply_gradients: variable {} is undefined", name_, i);
    if (!grads[i].defined()) continue;
    check(var.dtype() == DType::f32 || var.dtype() == DType::f64,
          "{}.apply_gradients: variable '{}' has dtype {}; only f32 and f64 variables can be trained", name_,
          var.name(), var.dtype());
    check(grads[i].shape() == var.shape(),
          "{}.apply_gradients: the gradient of variable '{}' has shape {}, expected the variable's shape {}", name_,
          var.name(), grads[i].shape(), var.shape());
    check(grads[i].dtype() == var.dtype(),
          "{}.apply_gradients: the gradient of variable '{}' has dtype {}, expected the variable's dtype {}", name_,
          var.name(), grads[i].dtype(), var.dtype());
    gradients.push_back(grads[i]);
    variables.push_back(var);
  }
  if (gradients.empty()) {
    std::vector<std::string> names;
    for (const Variable& var : vars) names.push_back(var.name());
    throw Error(fmt::format("{}.apply_gradients: no gradient provided for any of the {} variables: {}", name_,
                            vars.size(), names));
  }

  if (built_with_.empty())
    for (const Variable& var : vars) built_with_.insert(var.id());
  NoGradGuard no_grad;  // an update is state, not part of any computation to differentiate
  if (options_.clipnorm) {
    for (Tensor& g : gradients) g = clip_by_norm(g, *options_.clipnorm);
  } else if (options_.global_clipnorm) {
    clip_by_global_norm(gradients, *options_.global_clipnorm);
  } else if (options_.clipvalue) {
    for (Tensor& g : gradients) g = ops::clip(g, -*options_.clipvalue, *options_.clipvalue);
  }

  const double lr = learning_rate();
  if (options_.weight_decay) {
    const double wd = *options_.weight_decay;
    for (Variable& var : variables) var.assign(var.value() - (var.value() * wd) * lr);
  }
  for (std::size_t i = 0; i < variables.size(); ++i) {
    auto [it, created] = slots_.try_emplace(variables[i].id());
    if (created) {
      for (std::size_t s = 0; s < slot_names().size(); ++s)
        it->second.push_back(Tensor::full(variables[i].shape(), slot_initial_value(s), variables[i].dtype()));
    }
    update_step(gradients[i], variables[i], it->second, lr);
  }
  ++iterations_;
}

std::vector<std::pair<std::string, Tensor>> Optimizer::state(const std::vector<Variable>& vars) const {
  std::vector<std::pair<std::string, Tensor>> entries;
  entries.emplace_back(kIterationKey, Tensor::from_vector(std::vector<std::int64_t>{iterations_}, Shape{}));
  const std::vector<std::string> names = slot_names();
  std::set<std::string> seen;
  for (const Variable& var : vars) {
    check(var.defined(), "{}.state: a variable is undefined", name_);
    check(seen.insert(var.name()).second, "{}.state: two variables are named '{}'; slot names would collide", name_,
          var.name());
    // A variable not updated yet has the values its slots would start from.
    const auto it = slots_.find(var.id());
    for (std::size_t s = 0; s < names.size(); ++s) {
      entries.emplace_back(slot_key(var, names[s]), it != slots_.end()
                                                        ? it->second[s]
                                                        : Tensor::full(var.shape(), slot_initial_value(s), var.dtype()));
    }
  }
  return entries;
}

void Optimizer::load_state(const std::map<std::string, Tensor>& state, const std::vector<Variable>& vars) {
  // Validate everything first, so that a bad checkpoint changes nothing and every problem is reported at once.
  std::vector<std::string> problems;
  const auto expect = [&](const std::string& key, const Shape& shape, DType dtype) {
    const auto it = state.find(key);
    if (it == state.end() || !it->second.defined()) {
      problems.push_back(fmt::format("'{}' is missing", key));
    } else if (it->second.shape() != shape || it->second.dtype() != dtype) {
      problems.push_back(fmt::format("'{}' is {} of shape {}, expected {} of shape {}", key, it->second.dtype(),
                                     it->second.shape(), dtype, shape));
    }
  };
  expect(kIterationKey, Shape{}, DType::i64);
  if (problems.empty() && state.at(kIterationKey).item<std::int64_t>() < 0)
    problems.push_back(fmt::format("'{}' is {}, expected >= 0", kIterationKey,
                                   state.at(kIterationKey).item<std::int64_t>()));
  const std::vector<std::string> names = slot_names();
  std::set<std::string> seen;
  for (const Variable& var : vars) {
    check(var.defined(), "{}.load_state: a variable is undefined", name_);
    if (!seen.insert(var.name()).second) problems.push_back(fmt::format("two variables are named '{}'", var.name()));
    for (const std::string& slot : names) expect(slot_key(var, slot), var.shape(), var.dtype());
  }
  check(problems.empty(), "{}.load_state: the state does not match the {} variables: {}", name_, vars.size(),
        fmt::join(problems, "; "));
  check_variables_are_known(vars, "load_state");
  if (built_with_.empty())
    for (const Variable& var : vars) built_with_.insert(var.id());

  iterations_ = state.at(kIterationKey).item<std::int64_t>();
  for (const Variable& var : vars) {
    if (names.empty()) continue;
    std::vector<Tensor>& slots = slots_[var.id()];
    slots.clear();
    for (const std::string& slot : names) slots.push_back(state.at(slot_key(var, slot)).clone());
  }
}

std::int64_t Optimizer::count_params() const {
  if (built_with_.empty()) return 0;
  std::int64_t total = learning_rate_.is_schedule() ? 1 : 2;  // iterations, learning_rate
  for (const auto& [id, slots] : slots_)
    for (const Tensor& slot : slots) total += slot.numel();
  return total;
}

std::shared_ptr<Optimizer> get(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "adam") return std::make_shared<Adam>();
  if (lower == "sgd") return std::make_shared<SGD>();
  if (lower == "adamw") return std::make_shared<AdamW>();
  if (lower == "rmsprop") return std::make_shared<RMSprop>();
  if (lower == "adagrad") return std::make_shared<Adagrad>();
  if (lower == "adamax") return std::make_shared<Adamax>();
  if (lower == "adadelta") return std::make_shared<Adadelta>();
  if (lower == "lion") return std::make_shared<Lion>();
  throw Error(fmt::format("optim::get: unknown optimizer '{}'; known: adadelta, adagrad, adam, adamax, adamw, lion, "
                          "rmsprop, sgd", name));
}

}  // namespace loom::optim
