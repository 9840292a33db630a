#pragma once
// RMSprop, Keras 3's formulation (epsilon inside the square root):
//   v <- rho * v + (1 - rho) * g^2
//   centered: a <- rho * a + (1 - rho) * g;   denominator = v - a^2 + epsilon   (else v + epsilon)
//   increment = lr * g / sqrt(denominator)
//   momentum > 0: mom <- momentum * mom + increment;  w <- w - mom   (else w <- w - increment)
#include "optim/optimizer.hpp"

namespace loom::optim {

/// Keras's constructor arguments in order, then the options every optimizer shares (BaseOptions).
struct RMSpropOptions {
  LearningRate learning_rate = 0.001;
  double rho = 0.9;
  double momentum = 0.0;
  double epsilon = 1e-7;
  bool centered = false;
  std::optional<double> weight_decay = std::nullopt;
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

class RMSprop : public Optimizer {
 public:
  explicit RMSprop(RMSpropOptions options = {});

  double rho() const { return rho_; }
  double momentum() const { return momentum_; }
  double epsilon() const { return epsilon_; }
  bool centered() const { return centered_; }

  std::vector<std::vector<std::string>> keras_slot_order() const override;

 protected:
  /// Keras's order: "velocity", then "momentum" when momentum > 0, then "average_gradient" when centered.
  std::vector<std::string> slot_names() const override;
  void update_step(const Tensor& gradient, Variable& var, std::vector<Tensor>& slots, double lr) override;

 private:
  double rho_;
  double momentum_;
  double epsilon_;
  bool centered_;
};

}  // namespace loom::optim
