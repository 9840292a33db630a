#pragma once
// Lion, Keras 3's formulation (the sign of an interpolated momentum):
//   w <- w - lr * sign(beta_1 * m + (1 - beta_1) * g);   m <- beta_2 * m + (1 - beta_2) * g
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "optim/optimizer.hpp"

namespace loom::optim {

/// Keras's constructor arguments in order, then the options every optimizer shares (BaseOptions).
struct LionOptions {
  LearningRate learning_rate = 0.001;
  double beta_1 = 0.9;
  double beta_2 = 0.99;
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

class Lion : public Optimizer {
 public:
  explicit Lion(LionOptions options = {});
  double beta_1() const { return beta_1_; }
  double beta_2() const { return beta_2_; }

 protected:
  /// Keras's slot names, in its order: "momentum".
  std::vector<std::string> slot_names() const override;
  void update_step(const Tensor& gradient, Variable& var, std::vector<Tensor>& slots, double lr) override;

 private:
  double beta_1_;
  double beta_2_;
};

}  // namespace loom::optim
