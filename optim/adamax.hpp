#pragma once
// Adamax, Keras 3's formulation (Adam with the infinity norm), t = iterations + 1:
//   m <- m + (g - m) * (1 - beta_1);   u <- max(beta_2 * u, |g|)
//   w <- w - lr * m / ((1 - beta_1^t) * (u + epsilon))
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "optim/optimizer.hpp"

namespace loom::optim {

/// Keras's constructor arguments in order, then the options every optimizer shares (BaseOptions).
struct AdamaxOptions {
  LearningRate learning_rate = 0.001;
  double beta_1 = 0.9;
  double beta_2 = 0.999;
  double epsilon = 1e-7;
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

class Adamax : public Optimizer {
 public:
  explicit Adamax(AdamaxOptions options = {});
  double beta_1() const { return beta_1_; }
  double beta_2() const { return beta_2_; }
  double epsilon() const { return epsilon_; }

 protected:
  /// Keras's slot names, in its order: "momentum", "norm".
  std::vector<std::string> slot_names() const override;
  void update_step(const Tensor& gradient, Variable& var, std::vector<Tensor>& slots, double lr) override;

 private:
  double beta_1_;
  double beta_2_;
  double epsilon_;
};

}  // namespace loom::optim
