#include "optim/optimizer.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "framework/tensor/error.hpp"
#include "optim/adadelta.hpp"
#include "optim/adafactor.hpp"
#include "optim/adagrad.hpp"
#include "optim/adam.hpp"
#include "optim/adamax.hpp"
#include "optim/adamw.hpp"
#include "optim/lion.hpp"
#include "optim/nadam.hpp"
#include "optim/rmsprop.hpp"
#include "optim/sgd.hpp"

namespace loom::optim {

namespace {

constexpr const char* kIterationKey = "iteration";
constexpr const char* kAverageSlot = "average";                 // Keras's _model_variables_moving_average
constexpr const char* kAccumulatorSlot = "gradient_accumulator";  // Keras's _accumulated_gradients

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
  // As Keras, the moving-average options are checked only when use_ema is on.
  if (options_.use_ema) {
    check(options_.ema_momentum >= 0.0 && options_.ema_momentum <= 1.0,
          "{}: ema_momentum must be in [0, 1] (use_ema is on), got {}", name_, options_.ema_momentum);
    check(!options_.ema_overwrite_frequency || *options_.ema_overwrite_frequency >= 1,
          "{}: ema_overwrite_frequency must be >= 1 or none (std::nullopt), got {}", name_,
          options_.ema_overwrite_frequency.value_or(0));
  }
  check_positive_option(name_, "loss_scale_factor", options_.loss_scale_factor);
  check(!options_.gradient_accumulation_steps || *options_.gradient_accumulation_steps >= 2,
        "{}: gradient_accumulation_steps must be >= 2 or none (std::nullopt), got {}", name_,
        options_.gradient_accumulation_steps.value_or(0));
}

std::int64_t Optimizer::iterations() const {
  const auto& steps = options_.gradient_accumulation_steps;
  return steps ? apply_count_ / *steps : apply_count_;
}

Tensor Optimizer::scale_loss(const Tensor& loss) const {
  return options_.loss_scale_factor ? loss * *options_.loss_scale_factor : loss;
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
  if (built_ids_.empty()) return;
  for (const Variable& var : vars) {
    if (!var.defined() || built_ids_.count(var.id()) != 0) continue;
    throw Error(fmt::format(
        "{}.{}: variable '{}' is not one of the {} variables this optimizer was built with on its first step; an "
        "optimizer's iteration count and slots belong to one model: give each model its own optimizer (Keras "
        "refuses this too)",
        name_, caller, var.name(), built_ids_.size()));
  }
}

Tensor Optimizer::initial_slot(std::size_t slot, const Variable& var) const {
  return Tensor::full(var.shape(), slot_initial_value(slot), var.dtype());
}

void Optimizer::build(const std::vector<Variable>& vars) {
  for (const Variable& var : vars) {
    if (!built_ids_.insert(var.id()).second) continue;
    built_with_.push_back(var);
    if (options_.use_ema) averages_.emplace(var.id(), Tensor::zeros(var.shape(), var.dtype()));
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

  if (built_with_.empty()) build(vars);
  NoGradGuard no_grad;  // an update is state, not part of any computation to differentiate
  if (options_.loss_scale_factor)
    for (Tensor& g : gradients) g = g / *options_.loss_scale_factor;
  if (const auto& steps = options_.gradient_accumulation_steps) {
    // Keras's JAX optimizer: the N-th call applies the mean of the N gradients; the others only add theirs.
    const bool update = (apply_count_ + 1) % *steps == 0;
    for (std::size_t i = 0; i < variables.size(); ++i) {
      auto [it, created] = accumulators_.try_emplace(variables[i].id());
      if (created) it->second = Tensor::zeros(variables[i].shape(), variables[i].dtype());
      if (update) {
        gradients[i] = (gradients[i] + it->second) / double(*steps);
        it->second = Tensor::zeros(variables[i].shape(), variables[i].dtype());
      } else {
        it->second = it->second + gradients[i];
      }
    }
    if (update) update_variables(std::move(gradients), variables);
  } else {
    update_variables(std::move(gradients), variables);
  }
  if (options_.use_ema) update_moving_averages();
  // As Keras: after the update (and the moving averages), each variable's constraint projects it.
  for (Variable& var : variables) var.apply_constraint();
  ++apply_count_;
}

void Optimizer::update_variables(std::vector<Tensor> gradients, std::vector<Variable>& variables) {
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
  before_update_steps();
  const std::vector<std::string> names = slot_names();
  for (std::size_t i = 0; i < variables.size(); ++i) {
    auto [it, created] = slots_.try_emplace(variables[i].id());
    if (created)
      for (std::size_t s = 0; s < names.size(); ++s) it->second.push_back(initial_slot(s, variables[i]));
    update_step(gradients[i], variables[i], it->second, lr);
  }
}

// Keras's _update_model_variables_moving_average and, every ema_overwrite_frequency-th iteration,
// _overwrite_model_variables_with_average_value, over all the variables the optimizer was built with.
void Optimizer::update_moving_averages() {
  const double momentum = iterations() != 0 ? options_.ema_momentum : 0.0;
  for (const Variable& var : built_with_) {
    Tensor& average = averages_.at(var.id());
    average = average * momentum + var.value() * (1.0 - momentum);
  }
  const auto& frequency = options_.ema_overwrite_frequency;
  if (frequency && (iterations() + 1) % *frequency == 0) {
    for (Variable var : built_with_) var.assign(averages_.at(var.id()));
  }
}

void Optimizer::finalize_variable_values(const std::vector<Variable>& vars) {
  if (!options_.use_ema || built_with_.empty()) return;
  for (const Variable& var : vars) {
    check(var.defined(), "{}.finalize_variable_values: a variable is undefined", name_);
    check(averages_.count(var.id()) != 0,
          "{}.finalize_variable_values: variable '{}' is not one of the {} variables this optimizer keeps moving "
          "averages of (those of its first step)",
          name_, var.name(), averages_.size());
  }
  NoGradGuard no_grad;
  for (Variable var : vars) var.assign(averages_.at(var.id()));
}

std::vector<std::pair<std::string, Tensor>> Optimizer::state(const std::vector<Variable>& vars) const {
  std::vector<std::pair<std::string, Tensor>> entries;
  entries.emplace_back(kIterationKey, Tensor::from_vector(std::vector<std::int64_t>{apply_count_}, Shape{}));
  const std::vector<std::string> names = slot_names();
  std::set<std::string> seen;
  for (const Variable& var : vars) {
    check(var.defined(), "{}.state: a variable is undefined", name_);
    check(seen.insert(var.name()).second, "{}.state: two variables are named '{}'; slot names would collide", name_,
          var.name());
    // A variable not updated yet has the values its averages, accumulators and slots would start from.
    const auto zeros_unless = [&](const std::map<std::uint64_t, Tensor>& made) {
      const auto it = made.find(var.id());
      return it != made.end() ? it->second : Tensor::zeros(var.shape(), var.dtype());
    };
    if (options_.use_ema) entries.emplace_back(slot_key(var, kAverageSlot), zeros_unless(averages_));
    if (options_.gradient_accumulation_steps)
      entries.emplace_back(slot_key(var, kAccumulatorSlot), zeros_unless(accumulators_));
    const auto it = slots_.find(var.id());
    for (std::size_t s = 0; s < names.size(); ++s)
      entries.emplace_back(slot_key(var, names[s]), it != slots_.end() ? it->second[s] : initial_slot(s, var));
  }
  for (auto& entry : global_state(vars)) entries.push_back(std::move(entry));
  return entries;
}

void Optimizer::load_state(const std::map<std::string, Tensor>& state, const std::vector<Variable>& vars) {
  // Validate everything first, so that a bad checkpoint changes nothing and every problem is reported at once.
  std::vector<std::string> problems;
  std::set<std::string> seen;
  for (const Variable& var : vars) {
    check(var.defined(), "{}.load_state: a variable is undefined", name_);
    if (!seen.insert(var.name()).second) problems.push_back(fmt::format("two variables are named '{}'", var.name()));
  }
  check(problems.empty(), "{}.load_state: the state does not match the {} variables: {}", name_, vars.size(),
        fmt::join(problems, "; "));
  // What state() writes for these variables is the template: every entry with its shape and dtype.
  for (const auto& [key, expected] : this->state(vars)) {
    const auto it = state.find(key);
    if (it == state.end() || !it->second.defined()) {
      problems.push_back(fmt::format("'{}' is missing", key));
    } else if (it->second.shape() != expected.shape() || it->second.dtype() != expected.dtype()) {
      problems.push_back(fmt::format("'{}' is {} of shape {}, expected {} of shape {}", key, it->second.dtype(),
                                     it->second.shape(), expected.dtype(), expected.shape()));
    } else if (key == kIterationKey && it->second.item<std::int64_t>() < 0) {
      problems.push_back(fmt::format("'{}' is {}, expected >= 0", key, it->second.item<std::int64_t>()));
    }
  }
  check(problems.empty(), "{}.load_state: the state does not match the {} variables: {}", name_, vars.size(),
        fmt::join(problems, "; "));
  check_variables_are_known(vars, "load_state");
  if (built_with_.empty()) build(vars);

  apply_count_ = state.at(kIterationKey).item<std::int64_t>();
  const std::vector<std::string> names = slot_names();
  for (const Variable& var : vars) {
    if (options_.use_ema) averages_[var.id()] = state.at(slot_key(var, kAverageSlot)).clone();
    if (options_.gradient_accumulation_steps)
      accumulators_[var.id()] = state.at(slot_key(var, kAccumulatorSlot)).clone();
    if (names.empty()) continue;
    std::vector<Tensor>& slots = slots_[var.id()];
    slots.clear();
    for (const std::string& slot : names) slots.push_back(state.at(slot_key(var, slot)).clone());
  }
  std::map<std::string, Tensor> global;
  for (const auto& [key, value] : global_state(vars)) global.emplace(key, state.at(key).clone());
  load_global_state(global);
}

std::vector<std::string> Optimizer::keras_variable_order(const std::vector<Variable>& vars) const {
  std::vector<std::string> keys;
  if (options_.use_ema)
    for (const Variable& var : vars) keys.push_back(slot_key(var, kAverageSlot));
  if (options_.gradient_accumulation_steps)
    for (const Variable& var : vars) keys.push_back(slot_key(var, kAccumulatorSlot));
  for (const auto& call : keras_slot_order())
    for (const Variable& var : vars)
      for (const std::string& slot : call) keys.push_back(slot_key(var, slot));
  for (const auto& [key, value] : global_state(vars)) keys.push_back(key);
  return keys;
}

std::int64_t Optimizer::count_params() const {
  if (built_with_.empty()) return 0;
  std::int64_t total = learning_rate_.is_schedule() ? 1 : 2;  // iterations, learning_rate
  for (const auto& [id, slots] : slots_)
    for (const Tensor& slot : slots) total += slot.numel();
  for (const auto& [id, average] : averages_) total += average.numel();
  for (const auto& [id, accumulator] : accumulators_) total += accumulator.numel();
  for (const auto& [key, value] : global_state(built_with_)) total += value.numel();
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
  if (lower == "nadam") return std::make_shared<Nadam>();
  if (lower == "adafactor") return std::make_shared<Adafactor>();
  throw Error(fmt::format("optim::get: unknown optimizer '{}'; known: adadelta, adafactor, adagrad, adam, adamax, "
                          "adamw, lion, nadam, rmsprop, sgd", name));
}

}  // namespace loom::optim
