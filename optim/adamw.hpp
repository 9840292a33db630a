#pragma once
// AdamW: Adam with decoupled weight decay on by default (Keras's default 0.004). The decay itself is the
// base Optimizer's `w <- w - w * weight_decay * lr`, applied before the Adam step, so Adam({.weight_decay = x})
// and AdamW({.weight_decay = x}) take the same steps.
#include "optim/adam.hpp"

namespace loom::optim {

/// Keras's constructor arguments in order (weight_decay comes second), then the remaining shared options.
struct AdamWOptions {
  LearningRate learning_rate = 0.001;
  double weight_decay = 0.004;
  double beta_1 = 0.9;
  double beta_2 = 0.999;
  double epsilon = 1e-7;
  bool amsgrad = false;
  std::optional<double> clipnorm = std::nullopt;
  std::optional<double> clipvalue = std::nullopt;
  std::optional<double> global_clipnorm = std::nullopt;
  bool use_ema = false;
  double ema_momentum = 0.99;
  std::optional<std::int64_t> ema_overwrite_frequency = std::nullopt;
  std::optional<double> loss_scale_factor = std::nullopt;
  std::optional<std::int64_t> gradient_accumulation_steps = std::nullopt;
  std::optional<std::string> name = std::nullopt;
};

class AdamW : public Adam {
 public:
  explicit AdamW(AdamWOptions options = {});
};

}  // namespace loom::optim
