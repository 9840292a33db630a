#include "optim/schedules.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "framework/tensor/error.hpp"

namespace loom::optim {

namespace {

void check_common(const char* schedule, double initial_learning_rate, std::int64_t decay_steps) {
  check(std::isfinite(initial_learning_rate), "{}: initial_learning_rate must be finite, got {}", schedule,
        initial_learning_rate);
  check(decay_steps > 0, "{}: decay_steps must be > 0, got {}", schedule, decay_steps);
}

void check_step(const char* schedule, std::int64_t step) {
  check(step >= 0, "{}: step must be >= 0, got {}", schedule, step);
}

}  // namespace

ExponentialDecay::ExponentialDecay(Options options) : options_(options) {
  check_common("ExponentialDecay", options_.initial_learning_rate, options_.decay_steps);
  check(std::isfinite(options_.decay_rate) && options_.decay_rate > 0.0,
        "ExponentialDecay: decay_rate must be a finite number > 0, got {}", options_.decay_rate);
}

double ExponentialDecay::operator()(std::int64_t step) const {
  check_step("ExponentialDecay", step);
  double p = double(step) / double(options_.decay_steps);
  if (options_.staircase) p = std::floor(p);
  return options_.initial_learning_rate * std::pow(options_.decay_rate, p);
}

CosineDecay::CosineDecay(Options options) : options_(options) {
  check_common("CosineDecay", options_.initial_learning_rate, options_.decay_steps);
  check(std::isfinite(options_.alpha), "CosineDecay: alpha must be finite, got {}", options_.alpha);
  check(options_.warmup_steps >= 0, "CosineDecay: warmup_steps must be >= 0, got {}", options_.warmup_steps);
  check(!options_.warmup_target || std::isfinite(*options_.warmup_target),
        "CosineDecay: warmup_target must be finite, got {}", options_.warmup_target.value_or(0.0));
  check(options_.warmup_target || options_.warmup_steps == 0,
        "CosineDecay: warmup_steps = {} needs a warmup_target to warm up to", options_.warmup_steps);
}

double CosineDecay::operator()(std::int64_t step) const {
  check_step("CosineDecay", step);
  const double decay_steps = double(options_.decay_steps);
  const auto decay = [&](double s, double from) {
    const double cosine = 0.5 * (1.0 + std::cos(std::numbers::pi * (s / decay_steps)));
    return from * ((1.0 - options_.alpha) * cosine + options_.alpha);
  };
  if (!options_.warmup_target) return decay(std::min(double(step), decay_steps), options_.initial_learning_rate);
  const double warmup_steps = double(options_.warmup_steps);
  const double s = std::min(double(step), decay_steps + warmup_steps);
  if (s < warmup_steps) {
    const double delta = *options_.warmup_target - options_.initial_learning_rate;
    return delta * (s / warmup_steps) + options_.initial_learning_rate;
  }
  return decay(s - warmup_steps, *options_.warmup_target);
}

PolynomialDecay::PolynomialDecay(Options options) : options_(options) {
  check_common("PolynomialDecay", options_.initial_learning_rate, options_.decay_steps);
  check(std::isfinite(options_.end_learning_rate), "PolynomialDecay: end_learning_rate must be finite, got {}",
        options_.end_learning_rate);
  check(std::isfinite(options_.power) && options_.power > 0.0, "PolynomialDecay: power must be > 0, got {}",
        options_.power);
}

double PolynomialDecay::operator()(std::int64_t step) const {
  check_step("PolynomialDecay", step);
  double s = double(step);
  double decay_steps = double(options_.decay_steps);
  if (options_.cycle) {
    // The first multiple of decay_steps that is >= step (1 at step 0), so the decay restarts each cycle.
    decay_steps *= step == 0 ? 1.0 : std::ceil(s / decay_steps);
  } else {
    s = std::min(s, decay_steps);
  }
  const double p = s / decay_steps;
  return (options_.initial_learning_rate - options_.end_learning_rate) * std::pow(1.0 - p, options_.power) +
         options_.end_learning_rate;
}

}  // namespace loom::optim
