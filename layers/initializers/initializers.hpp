#pragma once
// Weight initializers with Keras's names, formulas and fan rules (keras.initializers).
//
//   L::Dense(64, {.kernel_initializer = "he_normal"})                       // by name
//   L::Dense(64, {.kernel_initializer = initializers::glorot_uniform(7)})   // seeded: the same values every call
//
// Without a seed an initializer draws from this thread's generator (random::set_seed makes a run
// reproducible); with one it returns the same values on every call, as Keras does.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "framework/tensor/tensor.hpp"

namespace loom::layers {

/// Fan-in and fan-out of a kernel, which the variance-scaling initializers divide by.
struct Fans {
  double fan_in = 1;
  double fan_out = 1;
};

/// Keras's compute_fans: [n] -> (n, n); [in, out] -> (in, out); higher ranks (convolution kernels) multiply
/// both by the receptive field prod(shape[:-2]).
Fans compute_fans(const Shape& shape);

/// What a built-in initializer was made with, by Keras's argument names: what saving a model writes as the
/// initializer's Keras config.
struct InitializerArguments {
  std::vector<std::pair<std::string, double>> numbers;  // mean, stddev, minval, maxval, value, scale
  std::string mode, distribution;                       // variance_scaling's
  std::optional<std::uint64_t> seed;
};

class Initializer {
 public:
  using Fn = std::function<Tensor(const Shape& shape, DType dtype, const Fans& fans)>;
  Initializer(std::string name, Fn fn);
  /// A built-in initializer: `name` is its Keras function name ("glorot_uniform"), `arguments` its arguments.
  Initializer(std::string name, Fn fn, InitializerArguments arguments);
  /// One of Keras's names: "glorot_uniform", "glorot_normal", "he_normal", "he_uniform", "lecun_normal",
  /// "lecun_uniform", "zeros", "ones", "random_normal", "random_uniform", "truncated_normal" (unseeded,
  /// default arguments). Unknown names are a loom::Error listing the known ones.
  Initializer(const char* name);         // NOLINT: a name converts, as in Keras
  Initializer(const std::string& name);  // NOLINT

  /// A tensor of `shape` and `dtype`; `fans` default to compute_fans(shape). Layers whose kernels are not
  /// [in, out] matrices (EinsumDense) pass their own.
  Tensor operator()(const Shape& shape, DType dtype, std::optional<Fans> fans = {}) const;
  const std::string& name() const { return name_; }
  /// The arguments of a built-in initializer; none for one made from a function.
  const std::optional<InitializerArguments>& arguments() const { return arguments_; }

 private:
  std::string name_;
  Fn fn_;
  std::optional<InitializerArguments> arguments_;
};

namespace initializers {
Initializer zeros();
Initializer ones();
Initializer constant(double value);
Initializer random_normal(double mean = 0.0, double stddev = 0.05, std::optional<std::uint64_t> seed = {});
Initializer random_uniform(double minval = -0.05, double maxval = 0.05, std::optional<std::uint64_t> seed = {});
/// Normal samples redrawn until within two standard deviations of the mean (Keras's rule).
Initializer truncated_normal(double mean = 0.0, double stddev = 0.05, std::optional<std::uint64_t> seed = {});
/// Keras VarianceScaling: mode "fan_in", "fan_out" or "fan_avg"; distribution "truncated_normal" (stddev
/// corrected by 0.87962566103423978), "untruncated_normal" or "uniform".
Initializer variance_scaling(double scale, const std::string& mode, const std::string& distribution,
                             std::optional<std::uint64_t> seed = {});
Initializer glorot_uniform(std::optional<std::uint64_t> seed = {});  // variance_scaling(1, fan_avg, uniform)
Initializer glorot_normal(std::optional<std::uint64_t> seed = {});   // variance_scaling(1, fan_avg, truncated_normal)
Initializer he_normal(std::optional<std::uint64_t> seed = {});       // variance_scaling(2, fan_in, truncated_normal)
Initializer he_uniform(std::optional<std::uint64_t> seed = {});      // variance_scaling(2, fan_in, uniform)
Initializer lecun_normal(std::optional<std::uint64_t> seed = {});    // variance_scaling(1, fan_in, truncated_normal)
Initializer lecun_uniform(std::optional<std::uint64_t> seed = {});   // variance_scaling(1, fan_in, uniform)
}  // namespace initializers

}  // namespace loom::layers
