#pragma once
// Optimizer: the base of every optimizer, with Keras 3's semantics (keras.optimizers.Optimizer and its JAX
// backend). One apply_gradients() call, in Keras's order:
//   1. the gradients are divided by loss_scale_factor when it is set (scale_loss multiplied the loss by it);
//   2. with gradient_accumulation_steps = N, a call whose count (Keras's `_iterations`) + 1 is not a multiple of
//      N only adds the gradients to the accumulators; the N-th applies their mean and clears them;
//   3. a step that changes the variables clips the gradients (clipnorm, clipvalue or global_clipnorm, at most
//      one), applies decoupled weight decay `w -= w * weight_decay * lr` when set, then the optimizer's own
//      update_step() per variable;
//   4. with use_ema, every variable the optimizer was built with moves its average
//      `a = m * a + (1 - m) * w` (m = 0 while iterations() is 0, ema_momentum after), and every
//      ema_overwrite_frequency-th iteration the variables take their averages;
//   5. each variable with a gradient that has a constraint (Variable::constraint) is projected by it;
//   6. the call count goes up by one.
// The learning rate (and a schedule) sees the call count; iterations() and the update formulas see Keras's
// `iterations`, the call count divided by N (rounded down).
//
// Slots (Adam's m and v, SGD's momentum) are created lazily on a variable's first update and keyed by the
// variable's id, which stays the same across Variable::assign. The update runs without recording on any tape.
//
//   optim::Adam opt({.learning_rate = 1e-3});
//   opt.apply_gradients(tape.gradient(loss, model.trainable_weights()), model.trainable_weights());
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "framework/tensor/tensor.hpp"
#include "framework/tensor/variable.hpp"

namespace loom::optim {

/// A constant learning rate or a schedule: any callable double(std::int64_t step), such as ExponentialDecay,
/// CosineDecay or a user's lambda. `.learning_rate = 1e-3` and `.learning_rate = optim::CosineDecay({...})`
/// both convert.
class LearningRate {
 public:
  LearningRate(double value);  // NOLINT: implicit, so that `.learning_rate = 1e-3` reads as in Keras
  template <class F>
    requires std::is_invocable_r_v<double, const F&, std::int64_t> &&
             (!std::is_arithmetic_v<std::decay_t<F>>) && (!std::is_same_v<std::decay_t<F>, LearningRate>)
  LearningRate(F schedule)  // NOLINT: implicit, like the constant
      : schedule_(std::move(schedule)) {}

  /// The rate at this step (the optimizer's iterations before the step's increment).
  double at(std::int64_t step) const;
  bool is_schedule() const { return static_cast<bool>(schedule_); }
  /// The schedule (empty for a constant): saving a model recognises loom's schedules through target<T>().
  const std::function<double(std::int64_t)>& schedule() const { return schedule_; }

 private:
  double value_ = 0.0;
  std::function<double(std::int64_t)> schedule_;
};

/// The options every optimizer shares, in Keras's order after the optimizer's own arguments.
struct BaseOptions {
  std::optional<double> weight_decay = std::nullopt;     // >= 0
  std::optional<double> clipnorm = std::nullopt;         // > 0
  std::optional<double> clipvalue = std::nullopt;        // > 0
  std::optional<double> global_clipnorm = std::nullopt;  // > 0
  bool use_ema = false;
  double ema_momentum = 0.99;                                          // in [0, 1] with use_ema
  std::optional<std::int64_t> ema_overwrite_frequency = std::nullopt;  // >= 1 with use_ema
  std::optional<double> loss_scale_factor = std::nullopt;              // finite and > 0
  std::optional<std::int64_t> gradient_accumulation_steps = std::nullopt;  // >= 2
  std::optional<std::string> name = std::nullopt;
};

/// The shared fields of an optimizer's own options struct (which lists them flat, after its own arguments,
/// so that designated initializers read as Keras's keyword arguments).
template <class Options>
BaseOptions base_options(Options& options) {
  return {options.weight_decay,
          options.clipnorm,
          options.clipvalue,
          options.global_clipnorm,
          options.use_ema,
          options.ema_momentum,
          options.ema_overwrite_frequency,
          options.loss_scale_factor,
          options.gradient_accumulation_steps,
          std::move(options.name)};
}

/// The inverse of base_options: `options` with its shared fields set from `base` (reading a saved optimizer).
/// An options struct whose weight_decay is a plain number (AdamW's) keeps its own when `base` has none.
template <class Options>
Options with_base_options(Options options, BaseOptions base) {
  if constexpr (std::is_same_v<decltype(options.weight_decay), std::optional<double>>) {
    options.weight_decay = base.weight_decay;
  } else if (base.weight_decay) {
    options.weight_decay = *base.weight_decay;
  }
  options.clipnorm = base.clipnorm;
  options.clipvalue = base.clipvalue;
  options.global_clipnorm = base.global_clipnorm;
  options.use_ema = base.use_ema;
  options.ema_momentum = base.ema_momentum;
  options.ema_overwrite_frequency = base.ema_overwrite_frequency;
  options.loss_scale_factor = base.loss_scale_factor;
  options.gradient_accumulation_steps = base.gradient_accumulation_steps;
  options.name = std::move(base.name);
  return options;
}

/// Combines one step's gradients across processes before the optimizer uses them: the hook that
/// distributed::DistributedOptimizer installs. apply_gradients calls it first, before clipping (as Horovod
/// does), so that every process clips and updates with the same gradients.
class GradientAggregator {
 public:
  virtual ~GradientAggregator() = default;
  /// The gradients the step applies; grads[i] belongs to vars[i] and may be undefined.
  virtual std::vector<Tensor> aggregate(const std::vector<Tensor>& grads, const std::vector<Variable>& vars) = 0;
  /// How much this process's gradients weigh in the next aggregate() only (Model::fit sets its share of the
  /// global batch); otherwise they weigh 1.
  virtual void set_next_weight(double weight) = 0;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  /// One training step: grads[i] is the gradient of vars[i] (same shape and dtype). Undefined gradients
  /// (a variable the loss does not reach) are skipped, as Keras drops None; all undefined is an error.
  void apply_gradients(const std::vector<Tensor>& grads, const std::vector<Variable>& vars);
  /// apply_gradients in two halves, so that a caller can look at the gradients a step will use before it
  /// changes anything (Model::fit refuses a non-finite step): the gradients passed through the aggregator
  /// (the same on every process), then the step with them.
  std::vector<Tensor> aggregate_gradients(const std::vector<Tensor>& grads, const std::vector<Variable>& vars);
  void apply_aggregated_gradients(const std::vector<Tensor>& grads, const std::vector<Variable>& vars);

  /// Keras's scale_loss: the loss times loss_scale_factor (the loss itself when none is set). A training step
  /// differentiates the scaled loss; apply_gradients divides the gradients by the factor again.
  Tensor scale_loss(const Tensor& loss) const;
  /// Keras's finalize_variable_values, which Model::fit calls after its last epoch: with use_ema, each of
  /// `vars` takes its moving average (a loom::Error names a variable the optimizer has no average for);
  /// otherwise, or before the first step, nothing changes.
  void finalize_variable_values(const std::vector<Variable>& vars);

  /// Keras's build: the variables of the first step (or of load_state) are the only ones later steps may
  /// update, so that one optimizer never serves two models with one iteration count. Throws loom::Error naming
  /// `caller` and the first variable outside them; nothing is checked before the optimizer is built.
  void check_variables_are_known(const std::vector<Variable>& vars, std::string_view caller) const;

  /// Keras's `iterations`: the steps that changed the variables, which is the apply_gradients calls divided by
  /// gradient_accumulation_steps (rounded down) when that is set.
  std::int64_t iterations() const;
  /// Keras's `_iterations`: every apply_gradients call so far, the step count a schedule sees.
  std::int64_t apply_count() const { return apply_count_; }
  /// The learning rate the next call will use.
  double learning_rate() const { return learning_rate_.at(apply_count_); }
  /// Replaces the learning rate (a constant or a schedule), as LearningRateScheduler does.
  void set_learning_rate(LearningRate learning_rate) { learning_rate_ = std::move(learning_rate); }
  const std::string& name() const { return name_; }
  /// The learning rate as given (a constant or a schedule) and the options every optimizer shares: what
  /// saving a model writes.
  const LearningRate& learning_rate_setting() const { return learning_rate_; }
  const BaseOptions& shared_options() const { return options_; }

  /// Installs the hook every apply_gradients passes its gradients through (nullptr removes it).
  void set_gradient_aggregator(std::shared_ptr<GradientAggregator> aggregator) { aggregator_ = std::move(aggregator); }
  GradientAggregator* gradient_aggregator() const { return aggregator_.get(); }
  /// True when a hook combines the gradients across processes; Model::fit then shards its batches.
  bool distributed() const { return aggregator_ != nullptr; }

  /// The optimizer's state for checkpoints: "iteration" (i64 scalar, the apply_gradients calls), then for each
  /// variable of `vars` in order "<variable name>/average" (use_ema), "<variable name>/gradient_accumulator"
  /// (gradient_accumulation_steps) and each slot "<variable name>/<slot name>" ("dense/kernel/m"), then the
  /// entries not tied to one variable (Nadam's "u_product").
  std::vector<std::pair<std::string, Tensor>> state(const std::vector<Variable>& vars) const;
  /// Restores what state() wrote for the same variables; every name must be present with the same shape and
  /// dtype (loom::Error listing every mismatch otherwise, and nothing changed).
  void load_state(const std::map<std::string, Tensor>& state, const std::vector<Variable>& vars);
  /// The slot names in the order Keras creates them: one list per call of Keras's add_optimizer_variables,
  /// whose slots alternate per variable (Adam {{"m", "v"}, {"v_hat"}}: m and v of each variable, then every
  /// v_hat).
  virtual std::vector<std::vector<std::string>> keras_slot_order() const { return {slot_names()}; }
  /// The names in state() of Keras's optimizer.variables after iterations and learning_rate (which comes only
  /// when it is not a schedule), in Keras's order for `vars`: every average, every gradient accumulator, the
  /// slots in keras_slot_order(), then the entries not tied to one variable.
  std::vector<std::string> keras_variable_order(const std::vector<Variable>& vars) const;
  /// Number of scalars in Keras's optimizer.variables once built (the "Optimizer params" line of summary()):
  /// iterations, learning_rate unless it is a schedule, the averages, accumulators and slots; 0 before the
  /// first step. Slots and accumulators are made on a variable's first gradient, where Keras makes them all
  /// at build.
  std::int64_t count_params() const;

 protected:
  Optimizer(std::string_view default_name, LearningRate learning_rate, BaseOptions options);

  /// The names of the slots one variable needs, in Keras's order ("m", "v").
  virtual std::vector<std::string> slot_names() const = 0;
  /// The value every element of slot `slot` starts from (Keras's initializer of it): 0 but for Adagrad.
  virtual double slot_initial_value(std::size_t /*slot*/) const { return 0.0; }
  /// Slot `slot` of `var` before its first update: by default var's shape and dtype filled with
  /// slot_initial_value (Adafactor's factored slots have other shapes).
  virtual Tensor initial_slot(std::size_t slot, const Variable& var) const;
  /// Updates `var` in place from its gradient, its slots (initial_slot at first) and the step's learning rate.
  /// Runs under NoGradGuard.
  virtual void update_step(const Tensor& gradient, Variable& var, std::vector<Tensor>& slots, double lr) = 0;
  /// Called once in each step that changes the variables, before its update_step calls (Keras's
  /// _backend_update_step): for state shared by all variables.
  virtual void before_update_steps() {}
  /// The state not tied to one variable, in Keras's order after every slot: the current values, or those
  /// before the first step as they would be made for `vars`.
  virtual std::vector<std::pair<std::string, Tensor>> global_state(const std::vector<Variable>& /*vars*/) const {
    return {};
  }
  /// Restores global_state's entries (present and checked against global_state(vars) by load_state).
  virtual void load_global_state(const std::map<std::string, Tensor>& /*state*/) {}
  /// The variables of the first step (or of load_state), in their order; empty before.
  const std::vector<Variable>& built_variables() const { return built_with_; }

 private:
  void build(const std::vector<Variable>& vars);
  /// Step 3 of apply_gradients: clipping, weight decay and the update of each variable.
  void update_variables(std::vector<Tensor> gradients, std::vector<Variable>& variables);
  /// Step 4: the moving averages and the periodic overwrite of the variables with them.
  void update_moving_averages();

  std::string name_;
  LearningRate learning_rate_;
  BaseOptions options_;
  std::int64_t apply_count_ = 0;                          // Keras's _iterations
  std::map<std::uint64_t, std::vector<Tensor>> slots_;    // by variable id
  std::map<std::uint64_t, Tensor> averages_;              // use_ema: by variable id, made at build
  std::map<std::uint64_t, Tensor> accumulators_;          // gradient accumulation: by variable id
  std::vector<Variable> built_with_;                      // empty until the first step
  std::set<std::uint64_t> built_ids_;
  std::shared_ptr<GradientAggregator> aggregator_;
};

/// A Keras optimizer string (Keras's names: "adadelta", "adafactor", "adagrad", "adam", "adamax", "adamw", "lion",
/// "nadam", "rmsprop", "sgd"; case-insensitive) with default arguments.
std::shared_ptr<Optimizer> get(std::string_view name);

}  // namespace loom::optim
