#pragma once
// Adafactor, Keras 3's formulation (Shazeer & Stern, 2018): second moments factored into row and column
// means for variables of rank >= 2 (over the last two dimensions), a full one below,
//   t = iterations + 1;   rho = min(lr, 1 / sqrt(t));   alpha = max(epsilon_2, rms(w)) * rho
//   g2 = g^2 + epsilon_1;   beta = 1 - t^beta_2_decay
//   rank >= 2: r <- beta * r + (1 - beta) * mean(g2, -1);   c <- beta * c + (1 - beta) * mean(g2, -2)
//              v = (r / mean(r, -1))[..., None] * c[..., None, :]
//   rank < 2:  v <- beta * v + (1 - beta) * g2
//   u = g / sqrt(v);   w <- w - alpha * u / max(1, rms(u) / clip_threshold)
// relative_step (with a constant learning rate) caps lr at 1 / sqrt(t) first, which the cap inside rho
// already does: as in Keras, it does not change the steps.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "optim/optimizer.hpp"

namespace loom::optim {

/// Keras's constructor arguments in order, then the options every optimizer shares (BaseOptions).
struct AdafactorOptions {
  LearningRate learning_rate = 0.001;
  double beta_2_decay = -0.8;
  double epsilon_1 = 1e-30;     // >= 0
  double epsilon_2 = 1e-3;      // >= 0
  double clip_threshold = 1.0;  // > 0
  bool relative_step = true;
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

class Adafactor : public Optimizer {
 public:
  explicit Adafactor(AdafactorOptions options = {});

  double beta_2_decay() const { return beta_2_decay_; }
  double epsilon_1() const { return epsilon_1_; }
  double epsilon_2() const { return epsilon_2_; }
  double clip_threshold() const { return clip_threshold_; }
  bool relative_step() const { return relative_step_; }

 protected:
  /// Keras's order, per variable: "r" (shape[:-1]), "c" (shape[:-2] + shape[-1:]), "velocity" (the
  /// variable's shape). Below rank 2, r and c are unused integer scalars 0, as Keras keeps them.
  std::vector<std::string> slot_names() const override;
  Tensor initial_slot(std::size_t slot, const Variable& var) const override;
  void update_step(const Tensor& gradient, Variable& var, std::vector<Tensor>& slots, double lr) override;

 private:
  double beta_2_decay_;
  double epsilon_1_;
  double epsilon_2_;
  double clip_threshold_;
  bool relative_step_;
};

}  // namespace loom::optim
