#include "optim/adam.hpp"

#include <cmath>

#include "framework/ops/ops.hpp"
#include "framework/tensor/error.hpp"

namespace loom::optim {

Adam::Adam(AdamOptions options) : Adam("adam", std::move(options)) {}

Adam::Adam(std::string_view default_name, AdamOptions options)
    : Optimizer(default_name, std::move(options.learning_rate), base_options(options)),
      beta_1_(options.beta_1),
      beta_2_(options.beta_2),
      epsilon_(options.epsilon),
      amsgrad_(options.amsgrad) {
  // beta = 1 would divide by 1 - beta^t = 0.
  check(beta_1_ >= 0.0 && beta_1_ < 1.0, "{}: beta_1 must be in [0, 1), got {}", name(), beta_1_);
  check(beta_2_ >= 0.0 && beta_2_ < 1.0, "{}: beta_2 must be in [0, 1), got {}", name(), beta_2_);
  check(epsilon_ >= 0.0, "{}: epsilon must be >= 0, got {}", name(), epsilon_);
}

std::vector<std::string> Adam::slot_names() const {
  if (amsgrad_) return {"m", "v", "v_hat"};
  return {"m", "v"};
}

std::vector<std::vector<std::string>> Adam::keras_slot_order() const {
  if (amsgrad_) return {{"m", "v"}, {"v_hat"}};
  return {{"m", "v"}};
}

void Adam::update_step(const Tensor& gradient, Variable& var, std::vector<Tensor>& slots, double lr) {
  const double t = double(iterations() + 1);
  const double alpha = lr * std::sqrt(1.0 - std::pow(beta_2_, t)) / (1.0 - std::pow(beta_1_, t));
  Tensor& m = slots[0];
  Tensor& v = slots[1];
  m = m + (gradient - m) * (1.0 - beta_1_);
  v = v + (ops::square(gradient) - v) * (1.0 - beta_2_);
  Tensor second_moment = v;
  if (amsgrad_) {
    slots[2] = ops::maximum(slots[2], v);
    second_moment = slots[2];
  }
  var.assign_sub((m * alpha) / (ops::sqrt(second_moment) + epsilon_));
}

}  // namespace loom::optim
