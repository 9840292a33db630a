#include "optim/adagrad.hpp"

#include <cmath>

#include "framework/ops/ops.hpp"
#include "framework/tensor/error.hpp"

namespace loom::optim {

Adagrad::Adagrad(AdagradOptions options)
    : Optimizer("adagrad", std::move(options.learning_rate), base_options(options)),
      initial_accumulator_value_(options.initial_accumulator_value),
      epsilon_(options.epsilon) {
  check(std::isfinite(initial_accumulator_value_) && initial_accumulator_value_ >= 0.0,
        "Adagrad: initial_accumulator_value must be >= 0, got {}", initial_accumulator_value_);
  check(epsilon_ >= 0.0, "Adagrad: epsilon must be >= 0, got {}", epsilon_);
}

std::vector<std::string> Adagrad::slot_names() const { return {"accumulator"}; }

double Adagrad::slot_initial_value(std::size_t) const { return initial_accumulator_value_; }

void Adagrad::update_step(const Tensor& gradient, Variable& var, std::vector<Tensor>& slots, double lr) {
  Tensor& accumulator = slots[0];
  accumulator = accumulator + ops::square(gradient);
  var.assign_sub((gradient * lr) / ops::sqrt(accumulator + epsilon_));
}

}  // namespace loom::optim
