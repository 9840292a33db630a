#include "optim/rmsprop.hpp"

#include "framework/ops/ops.hpp"
#include "framework/tensor/error.hpp"

namespace loom::optim {

RMSprop::RMSprop(RMSpropOptions options)
    : Optimizer("rmsprop", std::move(options.learning_rate), base_options(options)),
      rho_(options.rho),
      momentum_(options.momentum),
      epsilon_(options.epsilon),
      centered_(options.centered) {
  check(rho_ >= 0.0 && rho_ <= 1.0, "RMSprop: rho must be in [0, 1], got {}", rho_);
  check(momentum_ >= 0.0 && momentum_ <= 1.0, "RMSprop: momentum must be in [0, 1], got {}", momentum_);
  check(epsilon_ >= 0.0, "RMSprop: epsilon must be >= 0, got {}", epsilon_);
}

std::vector<std::string> RMSprop::slot_names() const {
  std::vector<std::string> names{"velocity"};
  if (momentum_ > 0.0) names.push_back("momentum");
  if (centered_) names.push_back("average_gradient");
  return names;
}

std::vector<std::vector<std::string>> RMSprop::keras_slot_order() const {
  std::vector<std::vector<std::string>> order;  // Keras adds velocities, momentums, average gradients in turn
  for (const std::string& slot : slot_names()) order.push_back({slot});
  return order;
}

void RMSprop::update_step(const Tensor& gradient, Variable& var, std::vector<Tensor>& slots, double lr) {
  Tensor& velocity = slots[0];
  velocity = velocity * rho_ + ops::square(gradient) * (1.0 - rho_);
  Tensor denominator;
  if (centered_) {
    Tensor& average_gradient = slots.back();
    average_gradient = average_gradient * rho_ + gradient * (1.0 - rho_);
    denominator = velocity - ops::square(average_gradient) + epsilon_;
  } else {
    denominator = velocity + epsilon_;
  }
  const Tensor increment = (gradient * lr) / ops::sqrt(denominator);
  if (momentum_ > 0.0) {
    Tensor& momentum = slots[1];
    momentum = momentum * momentum_ + increment;
    var.assign_sub(momentum);
  } else {
    var.assign_sub(increment);
  }
}

}  // namespace loom::optim
