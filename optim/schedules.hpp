#pragma once
// Learning-rate schedules with Keras 3's formulas (keras.optimizers.schedules). Each is a callable
// double(std::int64_t step), step being the optimizer's iterations before the step, so it converts to
// optim::LearningRate:
//   optim::AdamW opt({.learning_rate = optim::CosineDecay({.initial_learning_rate = 0.0, .decay_steps = 1000,
//                                                          .warmup_target = 1e-3, .warmup_steps = 100})});
#include <cstdint>
#include <optional>
#include <vector>

namespace loom::optim {

/// init * decay_rate^(step / decay_steps), the exponent floored when staircase.
class ExponentialDecay {
 public:
  struct Options {
    double initial_learning_rate = 0.0;
    std::int64_t decay_steps = 0;  // > 0
    double decay_rate = 0.0;
    bool staircase = false;
  };
  explicit ExponentialDecay(Options options);
  double operator()(std::int64_t step) const;
  const Options& options() const { return options_; }

 private:
  Options options_;
};

/// Cosine decay from init to init * alpha over decay_steps, then constant. With a warmup_target, first a
/// linear warmup from init to warmup_target over warmup_steps, then the cosine decay from warmup_target.
class CosineDecay {
 public:
  struct Options {
    double initial_learning_rate = 0.0;
    std::int64_t decay_steps = 0;  // > 0
    double alpha = 0.0;
    std::optional<double> warmup_target = std::nullopt;
    std::int64_t warmup_steps = 0;
  };
  explicit CosineDecay(Options options);
  double operator()(std::int64_t step) const;
  const Options& options() const { return options_; }

 private:
  Options options_;
};

/// (init - end) * (1 - p)^power + end with p = min(step, decay_steps) / decay_steps; with cycle, decay_steps
/// grows to the first multiple of itself that is >= step instead of stopping.
class PolynomialDecay {
 public:
  struct Options {
    double initial_learning_rate = 0.0;
    std::int64_t decay_steps = 0;  // > 0
    double end_learning_rate = 0.0001;
    double power = 1.0;
    bool cycle = false;
  };
  explicit PolynomialDecay(Options options);
  double operator()(std::int64_t step) const;
  const Options& options() const { return options_; }

 private:
  Options options_;
};

/// init / (1 + decay_rate * step / decay_steps), the ratio floored when staircase.
class InverseTimeDecay {
 public:
  struct Options {
    double initial_learning_rate = 0.0;
    std::int64_t decay_steps = 0;  // > 0
    double decay_rate = 0.0;       // >= 0
    bool staircase = false;
  };
  explicit InverseTimeDecay(Options options);
  double operator()(std::int64_t step) const;
  const Options& options() const { return options_; }

 private:
  Options options_;
};

/// values[0] while step <= boundaries[0], values[i] while boundaries[i - 1] < step <= boundaries[i], and the
/// last value after the last boundary; one value more than boundaries, which must increase (Keras does not
/// check that, and sums the values of overlapping ranges).
class PiecewiseConstantDecay {
 public:
  struct Options {
    std::vector<std::int64_t> boundaries;
    std::vector<double> values;
  };
  explicit PiecewiseConstantDecay(Options options);
  double operator()(std::int64_t step) const;
  const Options& options() const { return options_; }

 private:
  Options options_;
};

/// SGDR: a cosine decay from init * m_mul^i to init * m_mul^i * alpha over the i-th period, the first
/// first_decay_steps long and each next one t_mul times longer, restarting at the end of each.
class CosineDecayRestarts {
 public:
  struct Options {
    double initial_learning_rate = 0.0;
    std::int64_t first_decay_steps = 0;  // > 0
    double t_mul = 2.0;                  // > 0
    double m_mul = 1.0;                  // >= 0
    double alpha = 0.0;
  };
  explicit CosineDecayRestarts(Options options);
  double operator()(std::int64_t step) const;
  const Options& options() const { return options_; }

 private:
  Options options_;
};

}  // namespace loom::optim
