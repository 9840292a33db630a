#pragma once
// Adagrad, Keras 3's formulation: the accumulator starts at initial_accumulator_value (not zero).
//   accumulator <- accumulator + g^2;   w <- w - lr * g / sqrt(accumulator + epsilon)
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "optim/optimizer.hpp"

namespace loom::optim {

/// Keras's constructor arguments in order, then the options every optimizer shares (BaseOptions).
struct AdagradOptions {
  LearningRate learning_rate = 0.001;
  double initial_accumulator_value = 0.1;
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

class Adagrad : public Optimizer {
 public:
  explicit Adagrad(AdagradOptions options = {});
  double initial_accumulator_value() const { return initial_accumulator_value_; }
  double epsilon() const { return epsilon_; }

 protected:
  /// Keras's slot names, in its order: "accumulator".
  std::vector<std::string> slot_names() const override;
  double slot_initial_value(std::size_t slot) const override;
  void update_step(const Tensor& gradient, Variable& var, std::vector<Tensor>& slots, double lr) override;

 private:
  double initial_accumulator_value_;
  double epsilon_;
};

}  // namespace loom::optim
