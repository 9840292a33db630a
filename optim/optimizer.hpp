#pragma once
// Optimizer: the base of SGD, Adam, AdamW and RMSprop, with Keras 3's semantics (keras.optimizers.Optimizer).
// One apply_gradients() is one training step, in Keras's order: clip the gradients (clipnorm, clipvalue or
// global_clipnorm, at most one), decoupled weight decay `w -= w * weight_decay * lr` when weight_decay is set,
// the optimizer's own update_step() per variable, then iterations += 1. The learning rate is evaluated at
// the step count before the increment, so a schedule's first step uses schedule(0).
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
  std::optional<double> weight_decay = std::nullopt;
  std::optional<double> clipnorm = std::nullopt;
  std::optional<double> clipvalue = std::nullopt;
  std::optional<double> global_clipnorm = std::nullopt;
  std::optional<std::string> name = std::nullopt;
};

/// The shared fields of an optimizer's own options struct (which lists them flat, after its own arguments,
/// so that designated initializers read as Keras's keyword arguments).
template <class Options>
BaseOptions base_options(Options& options) {
  return {options.weight_decay, options.clipnorm, options.clipvalue, options.global_clipnorm,
          std::move(options.name)};
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

  /// Keras's build: the variables of the first step (or of load_state) are the only ones later steps may
  /// update, so that one optimizer never serves two models with one iteration count. Throws loom::Error naming
  /// `caller` and the first variable outside them; nothing is checked before the optimizer is built.
  void check_variables_are_known(const std::vector<Variable>& vars, std::string_view caller) const;

  /// Steps taken so far (Keras's `iterations`).
  std::int64_t iterations() const { return iterations_; }
  /// The learning rate the next step will use.
  double learning_rate() const { return learning_rate_.at(iterations_); }
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

  /// The optimizer's state for checkpoints: "iteration" (i64 scalar), then each slot of each variable that
  /// has slots, named "<variable name>/<slot name>" ("dense/kernel/m"), in the order of `vars`.
  std::vector<std::pair<std::string, Tensor>> state(const std::vector<Variable>& vars) const;
  /// Restores what state() wrote for the same variables; every name must be present with the same shape and
  /// dtype (loom::Error listing every mismatch otherwise, and nothing changed).
  void load_state(const std::map<std::string, Tensor>& state, const std::vector<Variable>& vars);
  /// The slot names in the order Keras creates them: one list per call of Keras's add_optimizer_variables,
  /// whose slots alternate per variable (Adam {{"m", "v"}, {"v_hat"}}: m and v of each variable, then every
  /// v_hat). Keras's optimizer.variables are iterations, learning_rate (when not a schedule), then these.
  virtual std::vector<std::vector<std::string>> keras_slot_order() const { return {slot_names()}; }
  /// Number of scalars in Keras's optimizer.variables once built (the "Optimizer params" line of summary()):
  /// iterations, learning_rate unless it is a schedule, and the slots; 0 before the first step. Slots are made
  /// on a variable's first gradient, where Keras makes them all at build.
  std::int64_t count_params() const;

 protected:
  Optimizer(std::string_view default_name, LearningRate learning_rate, BaseOptions options);

  /// The names of the slots one variable needs, in Keras's order ("m", "v").
  virtual std::vector<std::string> slot_names() const = 0;
  /// The value every element of slot `slot` starts from (Keras's initializer of it): 0 but for Adagrad.
  virtual double slot_initial_value(std::size_t /*slot*/) const { return 0.0; }
  /// Updates `var` in place from its gradient, its slots (zeros at first, same shape and dtype as var) and
  /// the step's learning rate. Runs under NoGradGuard.
  virtual void update_step(const Tensor& gradient, Variable& var, std::vector<Tensor>& slots, double lr) = 0;

 private:
  std::string name_;
  LearningRate learning_rate_;
  BaseOptions options_;
  std::int64_t iterations_ = 0;
  std::map<std::uint64_t, std::vector<Tensor>> slots_;  // by variable id
  std::set<std::uint64_t> built_with_;                   // variable ids; empty until the first step
  std::shared_ptr<GradientAggregator> aggregator_;
};

/// A Keras optimizer string ("adam", "sgd", "adamw", "rmsprop"; case-insensitive) with default arguments.
std::shared_ptr<Optimizer> get(std::string_view name);

}  // namespace loom::optim
