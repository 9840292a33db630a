#pragma once
// Shared by the normalization layer tests: selects the cases of tests/fixtures/normalization_fixtures.txt
// (made by make_normalization_fixtures.py; the format is described there), checks a layer against one
// of them (output, gradients of sum(y * c) with respect to the input and every trainable weight, moving
// statistics), and runs a one-step training smoke test.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "layers/layer.hpp"
#include "tests/fixture_reader.hpp"
#include "tests/test_helpers.hpp"

namespace loom::testing {

/// The cases of one layer class (the case's first word: "LayerNormalization", ...).
inline std::vector<FixtureCase> normalization_cases(const std::string& layer) {
  std::vector<FixtureCase> selected;
  for (const auto& c : read_fixture_cases("normalization_fixtures.txt"))
    if (!c.words.empty() && c.words[0] == layer) selected.push_back(c);
  REQUIRE(!selected.empty());
  return selected;
}

/// The case's axis option, a comma-separated list ("1,2").
inline std::vector<std::int64_t> axes_option(const FixtureCase& c) {
  std::vector<std::int64_t> out;
  std::istringstream in(c.option("axis"));
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoll(item));
  return out;
}

inline double number_option(const FixtureCase& c, const std::string& key, double fallback) {
  return std::stod(c.option_or(key, fmt::format("{}", fallback)));
}

/// A boolean option written 0 or 1; absent options keep Keras's default `fallback`.
inline bool flag_option(const FixtureCase& c, const std::string& key, bool fallback = true) {
  return c.option_or(key, fallback ? "1" : "0") == "1";
}

/// The last part of a weight's path ("layer_normalization/gamma" -> "gamma").
inline std::string short_name(const Variable& v) { return v.name().substr(v.name().rfind('/') + 1); }

/// Sets the case's weights on `layer` (built from x), calls it in `dtype` and compares the output, the
/// gradients and the moving statistics with Keras: float64 to 1e-9 relative, float32 to 1e-4.
inline void check_against_keras(layers::Layer& layer, const FixtureCase& c, DType dtype) {
  INFO("case " << c.name << " in " << fmt::format("{}", dtype));
  const double tol = dtype == DType::f64 ? 1e-9 : 1e-4;
  const Tensor x = c.array("x").tensor(dtype);
  layer.maybe_build(x.shape(), dtype);
  for (auto& w : layer.weights()) w.assign(c.array(short_name(w)).tensor(dtype));
  const bool training = flag_option(c, "training", false);
  GradientTape tape;
  tape.watch(x);
  const Tensor y = layer(x, training);
  check_close(values(y), c.array("y").values, tol, tol);
  std::vector<Tensor> sources{x};
  for (const auto& w : layer.trainable_weights()) sources.push_back(w.value());
  const auto grads = tape.gradient(ops::sum(y * c.array("c").tensor(dtype)), sources);
  check_close(values(grads[0]), c.array("d_x").values, tol, tol);
  const auto trainable = layer.trainable_weights();
  for (std::size_t i = 0; i < trainable.size(); ++i) {
    INFO("gradient of " << short_name(trainable[i]));
    check_close(values(grads[i + 1]), c.array("d_" + short_name(trainable[i])).values, tol, tol);
  }
  for (const auto& w : layer.non_trainable_weights()) {
    INFO("updated " << short_name(w));
    check_close(values(w.value()), c.array("new_" + short_name(w)).values, tol, tol);
  }
}

/// Loss mean((layer(x) - target)^2) before and after one gradient-descent step on the trainable weights.
inline std::pair<double, double> one_training_step(layers::Layer& layer, const Tensor& x, const Tensor& target,
                                                   double learning_rate) {
  const auto loss_of = [&] { return ops::mean(ops::square(layer(x, /*training=*/true) - target)); };
  std::vector<Variable> weights;
  std::vector<Tensor> grads;
  double before = 0;
  {
    GradientTape tape;
    const Tensor loss = loss_of();  // builds the layer on its first call
    before = loss.item<double>();
    weights = layer.trainable_weights();
    REQUIRE(!weights.empty());
    grads = tape.gradient(loss, weights);
  }
  for (std::size_t i = 0; i < weights.size(); ++i) {
    Variable w = weights[i];
    w.assign_sub(grads[i] * learning_rate);
  }
  return {before, loss_of().item<double>()};
}

}  // namespace loom::testing
