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
  ops::AdamUpdate step =
      ops::adam_update(var.value(), gradient, slots[0], slots[1], amsgrad_ ? slots[2] : Tensor(), alpha, beta_1_,
                       beta_2_, epsilon_);
  slots[0] = step.m;
  slots[1] = step.v;
  if (amsgrad_) slots[2] = step.v_hat;
  var.assign(step.variable);
}

}  // namespace loom::optim
