#pragma once
// Adadelta, Keras 3's formulation (with a learning rate, as Keras):
//   a <- rho * a + (1 - rho) * g^2;   delta = -sqrt(d + epsilon) * g / sqrt(a + epsilon)
//   d <- rho * d + (1 - rho) * delta^2;   w <- w + lr * delta
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "optim/optimizer.hpp"

namespace loom::optim {

/// Keras's constructor arguments in order, then the options every optimizer shares (BaseOptions).
struct AdadeltaOptions {
  LearningRate learning_rate = 0.001;
  double rho = 0.95;
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

class Adadelta : public Optimizer {
 public:
  explicit Adadelta(AdadeltaOptions options = {});
  double rho() const { return rho_; }
  double epsilon() const { return epsilon_; }

 protected:
  /// Keras's slot names, in its order: "accumulated_grad", "accumulated_delta_var".
  std::vector<std::string> slot_names() const override;
  void update_step(const Tensor& gradient, Variable& var, std::vector<Tensor>& slots, double lr) override;

 private:
  double rho_;
  double epsilon_;
};

}  // namespace loom::optim
