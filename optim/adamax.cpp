#include "optim/adamax.hpp"

#include <cmath>

#include "framework/ops/ops.hpp"
#include "framework/tensor/error.hpp"

namespace loom::optim {

Adamax::Adamax(AdamaxOptions options)
    : Optimizer("adamax", std::move(options.learning_rate), base_options(options)),
      beta_1_(options.beta_1),
      beta_2_(options.beta_2),
      epsilon_(options.epsilon) {
  check(beta_1_ >= 0.0 && beta_1_ < 1.0, "Adamax: beta_1 must be in [0, 1), got {}", beta_1_);
  check(beta_2_ >= 0.0 && beta_2_ <= 1.0, "Adamax: beta_2 must be in [0, 1], got {}", beta_2_);
  check(epsilon_ >= 0.0, "Adamax: epsilon must be >= 0, got {}", epsilon_);
}

std::vector<std::string> Adamax::slot_names() const { return {"momentum", "norm"}; }

void Adamax::update_step(const Tensor& gradient, Variable& var, std::vector<Tensor>& slots, double lr) {
  Tensor& m = slots[0];
  Tensor& u = slots[1];
  const double beta_1_power = std::pow(beta_1_, double(iterations() + 1));
  m = m + (gradient - m) * (1.0 - beta_1_);
  u = ops::maximum(u * beta_2_, ops::abs(gradient));
  var.assign_sub((m * lr) / ((u + epsilon_) * (1.0 - beta_1_power)));
}

}  // namespace loom::optim
