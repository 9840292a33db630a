#pragma once
// Nadam, Keras 3's formulation (Adam with Nesterov momentum and Dozat's momentum schedule):
//   t = iterations + 1;   u_t = beta_1 * (1 - 0.5 * 0.96^t);   u_{t+1} = beta_1 * (1 - 0.5 * 0.96^(t+1))
//   u_product <- u_product * u_t   (once per step, shared by all variables; 1 before the first step)
//   m <- m + (g - m) * (1 - beta_1);   v <- v + (g^2 - v) * (1 - beta_2)
//   m_hat = u_{t+1} * m / (1 - u_product * u_{t+1}) + (1 - u_t) * g / (1 - u_product)
//   w <- w - lr * m_hat / (sqrt(v / (1 - beta_2^t)) + epsilon)
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "optim/optimizer.hpp"

namespace loom::optim {

/// Keras's constructor arguments in order, then the options every optimizer shares (BaseOptions).
struct NadamOptions {
  LearningRate learning_rate = 0.001;
  double beta_1 = 0.9;    // in [0, 1]
  double beta_2 = 0.999;  // in [0, 1)
  double epsilon = 1e-7;  // >= 0
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

class Nadam : public Optimizer {
 public:
  explicit Nadam(NadamOptions options = {});

  double beta_1() const { return beta_1_; }
  double beta_2() const { return beta_2_; }
  double epsilon() const { return epsilon_; }

  /// Keras's order: each variable's momentum and velocity in turn.
  std::vector<std::vector<std::string>> keras_slot_order() const override;

 protected:
  std::vector<std::string> slot_names() const override;
  void update_step(const Tensor& gradient, Variable& var, std::vector<Tensor>& slots, double lr) override;
  void before_update_steps() override;
  /// "u_product": a scalar of the first variable's dtype, as Keras makes it.
  std::vector<std::pair<std::string, Tensor>> global_state(const std::vector<Variable>& vars) const override;
  void load_global_state(const std::map<std::string, Tensor>& state) override;

 private:
  double beta_1_;
  double beta_2_;
  double epsilon_;
  Tensor u_product_;  // undefined until the first step or load_state
};

}  // namespace loom::optim
