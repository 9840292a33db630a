#include "optim/nadam.hpp"

#include <cmath>

#include "framework/ops/ops.hpp"
#include "framework/tensor/error.hpp"

namespace loom::optim {

namespace {

constexpr const char* kUProductKey = "u_product";
constexpr double kMomentumDecay = 0.96;

/// Keras's u_t, the momentum coefficient of step t.
double momentum_at(double beta_1, double t) { return beta_1 * (1.0 - 0.5 * std::pow(kMomentumDecay, t)); }

}  // namespace

Nadam::Nadam(NadamOptions options)
    : Optimizer("nadam", std::move(options.learning_rate), base_options(options)),
      beta_1_(options.beta_1),
      beta_2_(options.beta_2),
      epsilon_(options.epsilon) {
  check(beta_1_ >= 0.0 && beta_1_ <= 1.0, "Nadam: beta_1 must be in [0, 1], got {}", beta_1_);
  // beta_2 = 1 would divide by 1 - beta_2^t = 0.
  check(beta_2_ >= 0.0 && beta_2_ < 1.0, "Nadam: beta_2 must be in [0, 1), got {}", beta_2_);
  check(epsilon_ >= 0.0, "Nadam: epsilon must be >= 0, got {}", epsilon_);
}

std::vector<std::string> Nadam::slot_names() const { return {"momentum", "velocity"}; }

std::vector<std::vector<std::string>> Nadam::keras_slot_order() const { return {{"momentum", "velocity"}}; }

void Nadam::before_update_steps() {
  if (!u_product_.defined()) u_product_ = Tensor::scalar(1.0, built_variables().front().dtype());
  const double t = double(iterations() + 1);
  u_product_ = (u_product_ * beta_1_) * (1.0 - 0.5 * std::pow(kMomentumDecay, t));
}

void Nadam::update_step(const Tensor& gradient, Variable& var, std::vector<Tensor>& slots, double lr) {
  const double t = double(iterations() + 1);
  const double u_t = momentum_at(beta_1_, t);
  const double u_next = momentum_at(beta_1_, t + 1.0);
  const double u_product = u_product_.item<double>();
  const double u_product_next = u_product * u_next;
  const double beta_2_power = std::pow(beta_2_, t);
  Tensor& m = slots[0];
  Tensor& v = slots[1];
  m = m + (gradient - m) * (1.0 - beta_1_);
  v = v + (ops::square(gradient) - v) * (1.0 - beta_2_);
  const Tensor m_hat = (m * u_next) / (1.0 - u_product_next) + (gradient * (1.0 - u_t)) / (1.0 - u_product);
  const Tensor v_hat = v / (1.0 - beta_2_power);
  var.assign_sub((m_hat * lr) / (ops::sqrt(v_hat) + epsilon_));
}

std::vector<std::pair<std::string, Tensor>> Nadam::global_state(const std::vector<Variable>& vars) const {
  if (u_product_.defined()) return {{kUProductKey, u_product_}};
  const std::vector<Variable>& built = built_variables();
  const DType dtype = !built.empty() ? built.front().dtype() : !vars.empty() ? vars.front().dtype() : DType::f32;
  return {{kUProductKey, Tensor::scalar(1.0, dtype)}};
}

void Nadam::load_global_state(const std::map<std::string, Tensor>& state) { u_product_ = state.at(kUProductKey); }

}  // namespace loom::optim
