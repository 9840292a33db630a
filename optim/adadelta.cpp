#include "optim/adadelta.hpp"

#include "framework/ops/ops.hpp"
#include "framework/tensor/error.hpp"

namespace loom::optim {

Adadelta::Adadelta(AdadeltaOptions options)
    : Optimizer("adadelta", std::move(options.learning_rate), base_options(options)),
      rho_(options.rho),
      epsilon_(options.epsilon) {
  check(rho_ >= 0.0 && rho_ <= 1.0, "Adadelta: rho must be in [0, 1], got {}", rho_);
  check(epsilon_ >= 0.0, "Adadelta: epsilon must be >= 0, got {}", epsilon_);
}

std::vector<std::string> Adadelta::slot_names() const { return {"accumulated_grad", "accumulated_delta_var"}; }

void Adadelta::update_step(const Tensor& gradient, Variable& var, std::vector<Tensor>& slots, double lr) {
  Tensor& accumulated_grad = slots[0];
  Tensor& accumulated_delta = slots[1];
  accumulated_grad = accumulated_grad * rho_ + ops::square(gradient) * (1.0 - rho_);
  const Tensor delta = -((ops::sqrt(accumulated_delta + epsilon_) * gradient) / ops::sqrt(accumulated_grad + epsilon_));
  accumulated_delta = accumulated_delta * rho_ + ops::square(delta) * (1.0 - rho_);
  var.assign_add(delta * lr);
}

}  // namespace loom::optim
