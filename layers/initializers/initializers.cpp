#include "layers/initializers/initializers.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include "framework/kernels/dispatch.hpp"
#include "framework/tensor/random.hpp"

namespace loom::layers {

Fans compute_fans(const Shape& shape) {
  if (shape.empty()) return {};
  if (shape.size() == 1) return {double(shape[0]), double(shape[0])};
  double receptive_field = 1;
  for (std::size_t i = 0; i + 2 < shape.size(); ++i) receptive_field *= double(shape[i]);
  return {double(shape[shape.size() - 2]) * receptive_field, double(shape.back()) * receptive_field};
}

namespace {

// Fills a tensor with draws of `sample(generator)`, computed in double and rounded once to the dtype. A seeded
// initializer starts a fresh generator on every call, so it returns the same values each time (as Keras's
// integer seeds); an unseeded one advances this thread's generator.
template <class Sample>
Tensor sample_tensor(const Shape& shape, DType dtype, std::optional<std::uint64_t> seed, const std::string& name,
                     Sample&& sample) {
  Tensor t = Tensor::zeros(shape, dtype);
  random::Generator seeded(seed.value_or(0));
  random::Generator& generator = seed ? seeded : random::thread_generator();
  visit_floating(dtype, "initializer " + name, [&]<class T>() {
    T* out = t.data<T>();
    for (std::int64_t i = 0; i < t.numel(); ++i) out[i] = T(sample(generator));
  });
  return t;
}

// A standard normal draw redrawn until it lies in [-2, 2] (jax.random.truncated_normal's bounds, which
// Keras's truncated_normal scales by stddev).
double truncated_standard_normal(random::Generator& g) {
  for (;;) {
    const double z = g.normal();
    if (std::abs(z) <= 2.0) return z;
  }
}

Tensor filled(const Shape& shape, DType dtype, double value, const std::string& name) {
  check(is_floating(dtype), "initializer {}: expected a float32 or float64 tensor, got {}", name, dtype);
  return Tensor::full(shape, value, dtype);
}

using Factory = Initializer (*)();
const std::map<std::string, Factory, std::less<>>& known_initializers() {
  // Keras's snake_case names and the aliases keras.initializers.get accepts ("normal", "uniform", "one", "zero").
  static const std::map<std::string, Factory, std::less<>> table = {
      {"glorot_uniform", [] { return initializers::glorot_uniform(); }},
      {"glorot_normal", [] { return initializers::glorot_normal(); }},
      {"he_normal", [] { return initializers::he_normal(); }},
      {"he_uniform", [] { return initializers::he_uniform(); }},
      {"lecun_normal", [] { return initializers::lecun_normal(); }},
      {"lecun_uniform", [] { return initializers::lecun_uniform(); }},
      {"zeros", [] { return initializers::zeros(); }},
      {"zero", [] { return initializers::zeros(); }},
      {"ones", [] { return initializers::ones(); }},
      {"one", [] { return initializers::ones(); }},
      {"random_normal", [] { return initializers::random_normal(); }},
      {"normal", [] { return initializers::random_normal(); }},
      {"random_uniform", [] { return initializers::random_uniform(); }},
      {"uniform", [] { return initializers::random_uniform(); }},
      {"truncated_normal", [] { return initializers::truncated_normal(); }},
      {"variance_scaling", [] { return initializers::variance_scaling(1.0, "fan_in", "truncated_normal"); }},
  };
  return table;
}

Initializer by_name(const std::string& name) {
  const auto& table = known_initializers();
  const auto it = table.find(name);
  if (it == table.end()) {
    std::vector<std::string> names;
    for (const auto& [known, factory] : table) names.push_back(known);
    throw Error(fmt::format("Initializer: unknown initializer '{}'; known names: {}", name, fmt::join(names, ", ")));
  }
  return it->second();
}

}  // namespace

Initializer::Initializer(std::string name, Fn fn) : name_(std::move(name)), fn_(std::move(fn)) {
  check(fn_ != nullptr, "Initializer '{}': no function given", name_);
}

Initializer::Initializer(std::string name, Fn fn, InitializerArguments arguments)
    : Initializer(std::move(name), std::move(fn)) {
  arguments_ = std::move(arguments);
}

Initializer::Initializer(const char* name) : Initializer(std::string(name != nullptr ? name : "")) {}

Initializer::Initializer(const std::string& name) : Initializer(by_name(name)) {}

Tensor Initializer::operator()(const Shape& shape, DType dtype, std::optional<Fans> fans) const {
  for (auto d : shape) check(d >= 0, "initializer {}: negative dimension in shape {}", name_, shape);
  Tensor t = fn_(shape, dtype, fans.value_or(compute_fans(shape)));
  check(t.defined() && t.shape() == shape && t.dtype() == dtype,
        "initializer {}: expected a {} tensor of shape {}, the function returned {}", name_, dtype, shape,
        t.defined() ? fmt::format("{} of shape {}", t.dtype(), t.shape()) : std::string("an undefined tensor"));
  return t;
}

namespace initializers {

Initializer zeros() {
  return {"zeros", [](const Shape& s, DType d, const Fans&) { return filled(s, d, 0.0, "zeros"); }, {}};
}

Initializer ones() {
  return {"ones", [](const Shape& s, DType d, const Fans&) { return filled(s, d, 1.0, "ones"); }, {}};
}

Initializer constant(double value) {
  return {"constant", [value](const Shape& s, DType d, const Fans&) { return filled(s, d, value, "constant"); },
          {{{"value", value}}, "", "", std::nullopt}};
}

Initializer random_normal(double mean, double stddev, std::optional<std::uint64_t> seed) {
  check(stddev >= 0, "random_normal: stddev must be non-negative, got {}", stddev);
  return {"random_normal", [=](const Shape& s, DType d, const Fans&) {
            return sample_tensor(s, d, seed, "random_normal",
                                 [&](random::Generator& g) { return mean + stddev * g.normal(); });
          },
          {{{"mean", mean}, {"stddev", stddev}}, "", "", seed}};
}

Initializer random_uniform(double minval, double maxval, std::optional<std::uint64_t> seed) {
  check(minval <= maxval, "random_uniform: expected minval <= maxval, got minval={}, maxval={}", minval, maxval);
  return {"random_uniform", [=](const Shape& s, DType d, const Fans&) {
            return sample_tensor(s, d, seed, "random_uniform",
                                 [&](random::Generator& g) { return g.uniform(minval, maxval); });
          },
          {{{"minval", minval}, {"maxval", maxval}}, "", "", seed}};
}

Initializer truncated_normal(double mean, double stddev, std::optional<std::uint64_t> seed) {
  check(stddev >= 0, "truncated_normal: stddev must be non-negative, got {}", stddev);
  return {"truncated_normal", [=](const Shape& s, DType d, const Fans&) {
            return sample_tensor(s, d, seed, "truncated_normal",
                                 [&](random::Generator& g) { return mean + stddev * truncated_standard_normal(g); });
          },
          {{{"mean", mean}, {"stddev", stddev}}, "", "", seed}};
}

namespace {
// variance_scaling under the name of the Keras class it stands for, so errors and name() say "he_normal".
Initializer scaled(std::string name, double scale, const std::string& mode, const std::string& distribution,
                   std::optional<std::uint64_t> seed) {
  check(scale > 0, "{}: scale must be positive, got {}", name, scale);
  check(mode == "fan_in" || mode == "fan_out" || mode == "fan_avg",
        "{}: unknown mode '{}'; expected fan_in, fan_out or fan_avg", name, mode);
  // Keras accepts "normal" as the old name of "truncated_normal".
  const std::string dist = distribution == "normal" ? "truncated_normal" : distribution;
  check(dist == "truncated_normal" || dist == "untruncated_normal" || dist == "uniform",
        "{}: unknown distribution '{}'; expected truncated_normal, untruncated_normal or uniform", name, distribution);
  return {name, [=](const Shape& s, DType d, const Fans& fans) {
            const double n = mode == "fan_in"    ? fans.fan_in
                             : mode == "fan_out" ? fans.fan_out
                                                 : (fans.fan_in + fans.fan_out) / 2.0;
            const double variance = scale / std::max(1.0, n);
            if (dist == "uniform") {
              const double limit = std::sqrt(3.0 * variance);
              return sample_tensor(s, d, seed, name, [&](random::Generator& g) { return g.uniform(-limit, limit); });
            }
            if (dist == "untruncated_normal") {
              const double stddev = std::sqrt(variance);
              return sample_tensor(s, d, seed, name, [&](random::Generator& g) { return stddev * g.normal(); });
            }
            // The standard deviation of a unit normal truncated to [-2, 2] is 0.8796...: dividing by it makes
            // the truncated samples' variance `variance` (Keras's constant).
            const double stddev = std::sqrt(variance) / 0.87962566103423978;
            return sample_tensor(s, d, seed, name,
                                 [&](random::Generator& g) { return stddev * truncated_standard_normal(g); });
          },
          {{{"scale", scale}}, mode, dist, seed}};
}

}  // namespace

Initializer variance_scaling(double scale, const std::string& mode, const std::string& distribution,
                             std::optional<std::uint64_t> seed) {
  return scaled("variance_scaling", scale, mode, distribution, seed);
}

Initializer glorot_uniform(std::optional<std::uint64_t> seed) {
  return scaled("glorot_uniform", 1.0, "fan_avg", "uniform", seed);
}
Initializer glorot_normal(std::optional<std::uint64_t> seed) {
  return scaled("glorot_normal", 1.0, "fan_avg", "truncated_normal", seed);
}
Initializer he_normal(std::optional<std::uint64_t> seed) {
  return scaled("he_normal", 2.0, "fan_in", "truncated_normal", seed);
}
Initializer he_uniform(std::optional<std::uint64_t> seed) {
  return scaled("he_uniform", 2.0, "fan_in", "uniform", seed);
}
Initializer lecun_normal(std::optional<std::uint64_t> seed) {
  return scaled("lecun_normal", 1.0, "fan_in", "truncated_normal", seed);
}
Initializer lecun_uniform(std::optional<std::uint64_t> seed) {
  return scaled("lecun_uniform", 1.0, "fan_in", "uniform", seed);
}

}  // namespace initializers
}  // namespace loom::layers
