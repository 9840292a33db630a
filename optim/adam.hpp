#pragma once
// Adam, Keras 3's formulation: epsilon is added to sqrt of the uncorrected second moment and the bias
// corrections are folded into the step size,
//   t = iterations + 1;   alpha = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)
//   m <- m + (g - m) * (1 - beta_1);   v <- v + (g^2 - v) * (1 - beta_2)
//   amsgrad: v_hat <- max(v_hat, v), used in place of v
//   w <- w - m * alpha / (sqrt(v) + epsilon)
#include "optim/optimizer.hpp"

namespace loom::optim {

/// Keras's constructor arguments in order, then the options every optimizer shares (BaseOptions).
struct AdamOptions {
  LearningRate learning_rate = 0.001;
  double beta_1 = 0.9;
  double beta_2 = 0.999;
  double epsilon = 1e-7;
  bool amsgrad = false;
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

class Adam : public Optimizer {
 public:
  explicit Adam(AdamOptions options = {});

  double beta_1() const { return beta_1_; }
  double beta_2() const { return beta_2_; }
  double epsilon() const { return epsilon_; }
  bool amsgrad() const { return amsgrad_; }

  std::vector<std::vector<std::string>> keras_slot_order() const override;

 protected:
  /// For AdamW, which is Adam under another name with weight decay on by default.
  Adam(std::string_view default_name, AdamOptions options);

  std::vector<std::string> slot_names() const override;
  void update_step(const Tensor& gradient, Variable& var, std::vector<Tensor>& slots, double lr) override;

 private:
  double beta_1_;
  double beta_2_;
  double epsilon_;
  bool amsgrad_;
};

}  // namespace loom::optim
