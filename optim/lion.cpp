#include "optim/lion.hpp"

#include "framework/ops/ops.hpp"
#include "framework/tensor/error.hpp"

namespace loom::optim {

Lion::Lion(LionOptions options)
    : Optimizer("lion", std::move(options.learning_rate), base_options(options)),
      beta_1_(options.beta_1),
      beta_2_(options.beta_2) {
  check(beta_1_ > 0.0 && beta_1_ <= 1.0, "Lion: beta_1 must be in (0, 1] (0 degenerates to SignSGD), got {}", beta_1_);
  check(beta_2_ >= 0.0 && beta_2_ <= 1.0, "Lion: beta_2 must be in [0, 1], got {}", beta_2_);
}

std::vector<std::string> Lion::slot_names() const { return {"momentum"}; }

void Lion::update_step(const Tensor& gradient, Variable& var, std::vector<Tensor>& slots, double lr) {
  Tensor& m = slots[0];
  var.assign_sub(ops::sign(m * beta_1_ + gradient * (1.0 - beta_1_)) * lr);
  m = m * beta_2_ + gradient * (1.0 - beta_2_);
}

}  // namespace loom::optim
