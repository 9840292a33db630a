#include "optim/sgd.hpp"

#include "framework/ops/ops.hpp"
#include "framework/tensor/error.hpp"

namespace loom::optim {

SGD::SGD(SGDOptions options)
    : Optimizer("sgd", std::move(options.learning_rate), base_options(options)),
      momentum_(options.momentum),
      nesterov_(options.nesterov) {
  check(momentum_ >= 0.0 && momentum_ <= 1.0, "SGD: momentum must be in [0, 1], got {}", momentum_);
}

std::vector<std::string> SGD::slot_names() const {
  if (momentum_ == 0.0) return {};
  return {"momentum"};
}

void SGD::update_step(const Tensor& gradient, Variable& var, std::vector<Tensor>& slots, double lr) {
  if (momentum_ == 0.0) {
    var.assign_sub(gradient * lr);
    return;
  }
  Tensor& velocity = slots[0];
  velocity = velocity * momentum_ - gradient * lr;
  var.assign_add(nesterov_ ? velocity * momentum_ - gradient * lr : velocity);
}

}  // namespace loom::optim
