#include "optim/schedules.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numbers>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

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

InverseTimeDecay::InverseTimeDecay(Options options) : options_(options) {
  check_common("InverseTimeDecay", options_.initial_learning_rate, options_.decay_steps);
  check(std::isfinite(options_.decay_rate) && options_.decay_rate >= 0.0,
        "InverseTimeDecay: decay_rate must be a finite number >= 0, got {}", options_.decay_rate);
}

double InverseTimeDecay::operator()(std::int64_t step) const {
  check_step("InverseTimeDecay", step);
  double p = double(step) / double(options_.decay_steps);
  if (options_.staircase) p = std::floor(p);
  return options_.initial_learning_rate / (1.0 + options_.decay_rate * p);
}

PiecewiseConstantDecay::PiecewiseConstantDecay(Options options) : options_(std::move(options)) {
  const auto& b = options_.boundaries;
  const auto& v = options_.values;
  check(!b.empty() && v.size() == b.size() + 1,
        "PiecewiseConstantDecay: values must have one entry more than boundaries, got {} boundaries and {} values",
        b.size(), v.size());
  check(std::adjacent_find(b.begin(), b.end(), std::greater_equal<>()) == b.end(),
        "PiecewiseConstantDecay: boundaries must increase, got [{}]", fmt::join(b, ", "));
  check(std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); }),
        "PiecewiseConstantDecay: values must be finite, got [{}]", fmt::join(v, ", "));
}

double PiecewiseConstantDecay::operator()(std::int64_t step) const {
  check_step("PiecewiseConstantDecay", step);
  const auto& b = options_.boundaries;
  // The first boundary >= step closes the range the step is in.
  return options_.values[std::size_t(std::lower_bound(b.begin(), b.end(), step) - b.begin())];
}

CosineDecayRestarts::CosineDecayRestarts(Options options) : options_(options) {
  check(std::isfinite(options_.initial_learning_rate), "CosineDecayRestarts: initial_learning_rate must be finite, "
        "got {}", options_.initial_learning_rate);
  check(options_.first_decay_steps > 0, "CosineDecayRestarts: first_decay_steps must be > 0, got {}",
        options_.first_decay_steps);
  check(std::isfinite(options_.t_mul) && options_.t_mul > 0.0, "CosineDecayRestarts: t_mul must be > 0, got {}",
        options_.t_mul);
  check(std::isfinite(options_.m_mul) && options_.m_mul >= 0.0, "CosineDecayRestarts: m_mul must be >= 0, got {}",
        options_.m_mul);
  check(std::isfinite(options_.alpha), "CosineDecayRestarts: alpha must be finite, got {}", options_.alpha);
}

double CosineDecayRestarts::operator()(std::int64_t step) const {
  check_step("CosineDecayRestarts", step);
  const double t_mul = options_.t_mul;
  double fraction = double(step) / double(options_.first_decay_steps);  // in units of the first period
  double restart = 0.0;
  if (t_mul == 1.0) {
    restart = std::floor(fraction);
    fraction -= restart;
  } else {
    // Periods 1, t, t^2, ...: restart i begins at (1 - t^i) / (1 - t).
    restart = std::floor(std::log(1.0 - fraction * (1.0 - t_mul)) / std::log(t_mul));
    const double begun = (1.0 - std::pow(t_mul, restart)) / (1.0 - t_mul);
    fraction = (fraction - begun) / std::pow(t_mul, restart);
  }
  const double cosine = 0.5 * std::pow(options_.m_mul, restart) * (1.0 + std::cos(std::numbers::pi * fraction));
  return options_.initial_learning_rate * ((1.0 - options_.alpha) * cosine + options_.alpha);
}

}  // namespace loom::optim
