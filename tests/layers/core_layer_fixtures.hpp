#pragma once
// Checks a layer against a case of tests/fixtures/core_layer_fixtures.txt (make_core_layer_fixtures.py):
// the layer gets the fixture's weights, then its output and the gradients of sum(y * cot) with respect to
// the input and every weight must match Keras: float64 to 1e-9 relative, float32 outputs to 1e-4.
#include <catch2/catch.hpp>

#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "layers/layer.hpp"
#include "tests/fixture_reader.hpp"
#include "tests/test_helpers.hpp"

namespace loom::testing {

/// The cases of core_layer_fixtures.txt whose layer= option is `layer`.
inline std::vector<FixtureCase> core_layer_cases(const std::string& layer) {
  std::vector<FixtureCase> out;
  for (auto& c : read_fixture_cases("core_layer_fixtures.txt"))
    if (c.option("layer") == layer) out.push_back(c);
  REQUIRE(!out.empty());
  return out;
}

/// "-1,2,3" -> {-1, 2, 3}
inline Shape parse_sizes(const std::string& text) {
  Shape out;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');) out.push_back(std::stoll(part));
  return out;
}

/// `make` builds a fresh layer for the case; it is called twice (float64, then float32).
inline void check_against_keras(const FixtureCase& c, const std::function<std::shared_ptr<layers::Layer>()>& make) {
  INFO("fixture case " << c.name);
  const std::vector<std::string> weight_keys = {"kernel", "bias"};
  for (DType dtype : {DType::f64, DType::f32}) {
    INFO("dtype " << fmt::format("{}", dtype));
    const auto layer = make();
    const Tensor x = c.array("x").tensor(dtype);
    layer->maybe_build(x.shape(), dtype);
    std::vector<Variable> weights = layer->weights();
    std::vector<Tensor> sources = {x};
    std::vector<std::string> grad_keys = {"dx"};
    std::size_t k = 0;
    for (const auto& key : weight_keys) {
      if (!c.has(key)) continue;
      REQUIRE(k < weights.size());
      weights[k].assign(c.array(key).tensor(dtype));
      sources.push_back(weights[k]);
      grad_keys.push_back("d" + key);
      ++k;
    }
    REQUIRE(k == weights.size());

    GradientTape tape;
    tape.watch(x);
    const Tensor y = (*layer)(x);
    REQUIRE(y.shape() == c.array("y").shape);
    REQUIRE(y.dtype() == dtype);
    const Tensor loss = ops::sum(y * c.array("cot").tensor(dtype));
    const std::vector<Tensor> grads = tape.gradient(loss, sources);
    const double tol = dtype == DType::f64 ? 1e-9 : 1e-4;
    check_close(values(y), c.array("y").values, tol, tol);
    for (std::size_t i = 0; i < grads.size(); ++i) {
      INFO("gradient " << grad_keys[i]);
      check_close(values(grads[i]), c.array(grad_keys[i]).values, tol, tol);
    }
  }
}

}  // namespace loom::testing
