#pragma once
// Loss: Keras's loss object (keras.losses.Loss). It holds a per-sample loss function, a reduction and a name;
// calling it gives the reduced loss, weighted by an optional sample_weight and by y_pred's Keras mask, exactly
// as Keras's reduce_weighted_values:
//   values = fn(y_true, y_pred)                       per-sample (or per-timestep) losses
//   w      = sample_weight, times the mask            (a mask alone weighs valid entries total / valid)
//   values * w, after squeeze_or_expand_to_same_rank(values, w)
//   "sum_over_batch_size", "mean": sum / number of values; "sum": sum;
//   "mean_with_sample_weight": sum / sum(w) (number of values without weights); "none": the values.
// A scalar or empty `values` is returned as it is. Every step is a recorded op, so the reduced loss has
// gradients of any order.
//
//   losses::Huber huber({.delta = 2.0, .reduction = "sum"});
//   Tensor l = huber(y_true, y_pred, sample_weight);
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "framework/tensor/tensor.hpp"

namespace loom::losses {

/// Per-sample losses from (y_true, y_pred), as the functions of loom::losses return them.
using LossFunction = std::function<Tensor(const Tensor& y_true, const Tensor& y_pred)>;

/// One entry of a loss's Keras config (get_config): a bool, a number, an integer or None.
using ConfigValue = std::variant<bool, double, std::int64_t, std::nullptr_t>;
using LossConfig = std::vector<std::pair<std::string, ConfigValue>>;

/// The reductions Keras accepts; a loom::Error naming `owner` and listing them otherwise.
void check_reduction(const std::string& reduction, const std::string& owner);

/// Keras's apply_mask: `mask` (undefined: none) folded into `sample_weight` (undefined: none) in `dtype`.
/// Under "mean" and "sum_over_batch_size" a valid entry weighs total / valid, so that dividing by the number
/// of values averages over the valid ones; under the other reductions the mask is 0 / 1.
Tensor apply_mask(const Tensor& sample_weight, const Tensor& mask, DType dtype, const std::string& reduction);

/// Keras's reduce_weighted_values (see the header comment). `sample_weight` and `mask` may be undefined;
/// `owner` names the loss in errors (a weight that does not broadcast against the values).
Tensor reduce_weighted_values(const Tensor& values, const Tensor& sample_weight, const Tensor& mask,
                              const std::string& reduction, const std::string& owner);

class Loss {
 public:
  /// A loss from a per-sample function (Keras's LossFunctionWrapper): `class_name` and `config` are what a
  /// .keras archive stores for it; a user's function has no class name and cannot be saved.
  Loss(LossFunction fn, std::string name, std::string reduction = "sum_over_batch_size", std::string class_name = "",
       LossConfig config = {});

  /// The reduced loss, unweighted.
  Tensor operator()(const Tensor& y_true, const Tensor& y_pred) const;
  /// The reduced loss with each value weighted by `sample_weight` (undefined: no weights): [N] weighs samples,
  /// [N, T] the timesteps of sequence losses. A [N] weight against [N, T] values weighs each sample's
  /// timesteps alike (Keras refuses that pair; it gives what Keras gives for the weight reshaped to [N, 1]).
  Tensor operator()(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) const;
  /// The per-sample values, before weighting and reduction (Keras's call()).
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const { return fn_(y_true, y_pred); }

  const std::string& name() const { return name_; }
  const std::string& reduction() const { return reduction_; }
  /// Keras's class name ("Huber"), empty for a wrapped user function.
  const std::string& class_name() const { return class_name_; }
  /// The class's own options in Keras's config keys ("delta"), without name and reduction.
  const LossConfig& config() const { return config_; }
  const LossFunction& function() const { return fn_; }

 private:
  LossFunction fn_;
  std::string name_;
  std::string reduction_;
  std::string class_name_;
  LossConfig config_;
};

}  // namespace loom::losses
