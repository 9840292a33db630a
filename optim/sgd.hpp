#pragma once
// SGD with optional (Nesterov) momentum, Keras 3's formulation: the velocity holds the learning rate,
//   v <- momentum * v - lr * g;   w <- w + v   (nesterov: w <- w + momentum * v - lr * g)
// which equals PyTorch's SGD for a constant learning rate but not when a schedule changes it.
#include "optim/optimizer.hpp"

namespace loom::optim {

/// Keras's constructor arguments in order, then the options every optimizer shares (BaseOptions).
struct SGDOptions {
  LearningRate learning_rate = 0.01;
  double momentum = 0.0;  // in [0, 1]; 0 keeps no slot
  bool nesterov = false;
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

class SGD : public Optimizer {
 public:
  explicit SGD(SGDOptions options = {});

  double momentum() const { return momentum_; }
  bool nesterov() const { return nesterov_; }

 protected:
  std::vector<std::string> slot_names() const override;
  void update_step(const Tensor& gradient, Variable& var, std::vector<Tensor>& slots, double lr) override;

 private:
  double momentum_;
  bool nesterov_;
};

}  // namespace loom::optim
