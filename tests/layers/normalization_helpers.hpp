#pragma once
// Shared by the normalization layer tests: reads tests/fixtures/normalization_fixtures.txt (made by
// make_normalization_fixtures.py; the format is described there), checks a layer against one of its cases
// (output, gradients of sum(y * c) with respect to the input and every trainable weight, moving statistics),
// and runs a one-step training smoke test.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "framework/ops.hpp"
#include "framework/tape.hpp"
#include "layers/layer.hpp"
#include "tests/test_helpers.hpp"

namespace loom::testing {

struct FixtureArray {
  Shape shape;
  std::vector<double> values;
  Tensor tensor(DType dtype) const { return Tensor::from_vector(values, shape).to(dtype); }
};

struct NormalizationCase {
  std::string name, layer;
  std::map<std::string, std::string> options;  // as written: axis=1,2 epsilon=0.001 ...
  std::map<std::string, FixtureArray> arrays;

  bool has(const std::string& key) const { return options.count(key) != 0; }
  double number(const std::string& key) const { return std::stod(options.at(key)); }
  bool flag(const std::string& key) const { return !has(key) || options.at(key) == "1"; }
  std::vector<std::int64_t> axes() const {
    std::vector<std::int64_t> out;
    std::istringstream in(options.at("axis"));
    for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoll(item));
    return out;
  }
};

/// The cases of one layer class ("LayerNormalization", ...).
inline std::vector<NormalizationCase> normalization_cases(const std::string& layer) {
  std::ifstream file(std::string(LOOM_FIXTURES_DIR) + "/normalization_fixtures.txt");
  REQUIRE(file.good());
  std::vector<NormalizationCase> cases;
  std::string line;
  while (std::getline(file, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string key;
    in >> key;
    if (key == "case") {
      NormalizationCase c;
      in >> c.name >> c.layer;
      for (std::string option; in >> option;) {
        const auto eq = option.find('=');
        REQUIRE(eq != std::string::npos);
        c.options[option.substr(0, eq)] = option.substr(eq + 1);
      }
      cases.push_back(c);
      continue;
    }
    REQUIRE(!cases.empty());
    FixtureArray a;
    std::size_t rank = 0;
    in >> rank;
    a.shape.resize(rank);
    for (auto& d : a.shape) in >> d;
    for (double v; in >> v;) a.values.push_back(v);
    REQUIRE(std::int64_t(a.values.size()) == numel(a.shape));
    cases.back().arrays[key] = a;
  }
  std::vector<NormalizationCase> selected;
  for (const auto& c : cases)
    if (c.layer == layer) selected.push_back(c);
  REQUIRE(!selected.empty());
  return selected;
}

/// The last part of a weight's path ("layer_normalization/gamma" -> "gamma").
inline std::string short_name(const Variable& v) { return v.name().substr(v.name().rfind('/') + 1); }

/// Sets the case's weights on `layer` (built from x), calls it in `dtype` and compares the output, the
/// gradients and the moving statistics with Keras: float64 to 1e-9 relative, float32 to 1e-4.
inline void check_against_keras(layers::Layer& layer, const NormalizationCase& c, DType dtype) {
  INFO("case " << c.name << " in " << fmt::format("{}", dtype));
  const double tol = dtype == DType::f64 ? 1e-9 : 1e-4;
  const Tensor x = c.arrays.at("x").tensor(dtype);
  layer.maybe_build(x.shape(), dtype);
  for (auto& w : layer.weights()) w.assign(c.arrays.at(short_name(w)).tensor(dtype));
  const bool training = c.has("training") && c.options.at("training") == "1";
  GradientTape tape;
  tape.watch(x);
  const Tensor y = layer(x, training);
  check_close(values(y), c.arrays.at("y").values, tol, tol);
  std::vector<Tensor> sources{x};
  for (const auto& w : layer.trainable_weights()) sources.push_back(w.value());
  const auto grads = tape.gradient(ops::sum(y * c.arrays.at("c").tensor(dtype)), sources);
  check_close(values(grads[0]), c.arrays.at("d_x").values, tol, tol);
  const auto trainable = layer.trainable_weights();
  for (std::size_t i = 0; i < trainable.size(); ++i) {
    INFO("gradient of " << short_name(trainable[i]));
    check_close(values(grads[i + 1]), c.arrays.at("d_" + short_name(trainable[i])).values, tol, tol);
  }
  for (const auto& w : layer.non_trainable_weights()) {
    INFO("updated " << short_name(w));
    check_close(values(w.value()), c.arrays.at("new_" + short_name(w)).values, tol, tol);
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
