#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "loom.hpp"
#include "tests/fixture_reader.hpp"
#include "tests/temp_files.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

// A .keras archive Keras wrote under mixed_bfloat16 (tests/fixtures/make_mixed_precision_fixtures.py): loom
// reads each layer's policy from it and predicts within bf16's precision of both Keras's mixed result and the
// exact (float32) one.

namespace {

/// max |got - want| over the elements.
double max_difference(const Tensor& got, const FixtureArray& want) {
  REQUIRE(got.shape() == want.shape);
  const std::vector<double> g = got.to_vector<double>();
  double worst = 0.0;
  for (std::size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::abs(g[i] - want.values[i]));
  return worst;
}

}  // namespace

TEST_CASE("a Keras mixed_bfloat16 archive loads with its policies and predicts within bf16's precision",
          "[models][saving][mixed_precision]") {
  const FixtureCase c = read_fixture_cases("mixed_precision_fixtures.txt").at(0);
  auto model = models::load_model(std::string(LOOM_FIXTURES_DIR) + "/" + c.words.at(0));
  for (const std::string name : {"hidden", "attention", "norm", "probs"}) {
    INFO("layer " << name);
    CHECK(model->get_layer(name)->dtype_policy().name == c.option("policy/" + name));
  }
  CHECK(model->get_layer("hidden")->dtype_policy().mixed_bfloat16);
  CHECK_FALSE(model->get_layer("probs")->dtype_policy().mixed_bfloat16);
  for (const Variable& w : model->weights()) CHECK(w.value().dtype() == DType::f32);

  const Tensor probabilities = model->predict(c.array("x").tensor(DType::f32), {.verbose = 0});
  CHECK(probabilities.dtype() == DType::f32);
  // Probabilities of three classes; bf16 keeps 8 significant bits (a relative 2^-9 per rounding). Keras also
  // rounds every activation to bf16, loom only the matmuls' operands, so the two differ by a few roundings.
  const double from_exact = max_difference(probabilities, c.array("float32_output"));
  const double from_keras = max_difference(probabilities, c.array("mixed_output"));
  INFO("max difference from the float32 result " << from_exact << ", from Keras's mixed result " << from_keras);
  CHECK(from_exact < 2e-2);
  CHECK(from_keras < 2e-2);
  CHECK(from_exact > 0.0);  // the bf16 path ran
}

TEST_CASE("a loom model saved under mixed_bfloat16 keeps the policy through .keras",
          "[models][saving][mixed_precision]") {
  const TempDir dir("mixed-precision");
  mixed_precision::set_global_policy("mixed_bfloat16");
  Tensor x = L::Input({6});
  Tensor h = L::Dense(8, {.activation = "relu", .name = "hidden"})(x);
  Tensor y = L::Dense(2, {.name = "out", .dtype = "float32"})(h);
  mixed_precision::set_global_policy("float32");
  Model model(x, y);
  const std::string path = dir.file("m.keras");
  model.save(path);
  auto restored = models::load_model(path);
  CHECK(restored->get_layer("hidden")->dtype_policy().mixed_bfloat16);
  CHECK_FALSE(restored->get_layer("out")->dtype_policy().mixed_bfloat16);
  const Tensor input = Tensor::randn({3, 6}, DType::f32, 9);
  const std::vector<float> a = model.predict(input, {.verbose = 0}).to_vector<float>();
  const std::vector<float> b = restored->predict(input, {.verbose = 0}).to_vector<float>();
  CHECK(a == b);
}
