#include "optim/adafactor.hpp"

#include <algorithm>
#include <cmath>

#include "framework/ops/ops.hpp"
#include "framework/tensor/error.hpp"

namespace loom::optim {

namespace {

enum Slot : std::size_t { kRow = 0, kColumn = 1, kVelocity = 2 };

/// Root mean square of all elements.
double rms(const Tensor& x) { return std::sqrt(ops::mean(ops::square(x)).item<double>()); }

}  // namespace

Adafactor::Adafactor(AdafactorOptions options)
    : Optimizer("adafactor", std::move(options.learning_rate), base_options(options)),
      beta_2_decay_(options.beta_2_decay),
      epsilon_1_(options.epsilon_1),
      epsilon_2_(options.epsilon_2),
      clip_threshold_(options.clip_threshold),
      relative_step_(options.relative_step) {
  check(std::isfinite(beta_2_decay_), "Adafactor: beta_2_decay must be finite, got {}", beta_2_decay_);
  check(std::isfinite(epsilon_1_) && epsilon_1_ >= 0.0, "Adafactor: epsilon_1 must be a finite number >= 0, got {}",
        epsilon_1_);
  check(std::isfinite(epsilon_2_) && epsilon_2_ >= 0.0, "Adafactor: epsilon_2 must be a finite number >= 0, got {}",
        epsilon_2_);
  check(std::isfinite(clip_threshold_) && clip_threshold_ > 0.0,
        "Adafactor: clip_threshold must be a finite number > 0, got {}", clip_threshold_);
}

std::vector<std::string> Adafactor::slot_names() const { return {"r", "c", "velocity"}; }

Tensor Adafactor::initial_slot(std::size_t slot, const Variable& var) const {
  const Shape& shape = var.shape();
  if (slot == kVelocity) return Tensor::zeros(shape, var.dtype());
  if (shape.size() < 2) return Tensor::zeros(Shape{}, DType::i64);
  Shape factored(shape.begin(), shape.end() - 1);             // r: the last dimension reduced
  if (slot == kColumn) factored.back() = shape.back();        // c: the second last reduced
  return Tensor::zeros(factored, var.dtype());
}

void Adafactor::update_step(const Tensor& gradient, Variable& var, std::vector<Tensor>& slots, double lr) {
  const double t = double(iterations() + 1);
  const double step_cap = 1.0 / std::sqrt(t);
  if (relative_step_ && !learning_rate_setting().is_schedule()) lr = std::min(lr, step_cap);
  const double rho = std::min(lr, step_cap);
  const double alpha = std::max(epsilon_2_, rms(var.value())) * rho;
  const Tensor regulated_grad_square = ops::square(gradient) + epsilon_1_;
  const double beta_2 = 1.0 - std::pow(t, beta_2_decay_);
  Tensor& v = slots[kVelocity];
  if (var.shape().size() >= 2) {
    Tensor& r = slots[kRow];
    Tensor& c = slots[kColumn];
    r = r * beta_2 + ops::mean(regulated_grad_square, {-1}) * (1.0 - beta_2);
    c = c * beta_2 + ops::mean(regulated_grad_square, {-2}) * (1.0 - beta_2);
    v = ops::expand_dims(r / ops::mean(r, {-1}, /*keepdims=*/true), -1) * ops::expand_dims(c, -2);
  } else {
    v = v * beta_2 + regulated_grad_square * (1.0 - beta_2);
  }
  const Tensor u = gradient / ops::sqrt(v);
  const Tensor u_hat = u / std::max(1.0, rms(u) / clip_threshold_);
  var.assign_sub(u_hat * alpha);
}

}  // namespace loom::optim
