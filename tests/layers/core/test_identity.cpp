// The Identity layer: the input and its Keras mask unchanged (checked against Keras, tests/fixtures/
// make_merging_pooling_fixtures.py), a float64 gradcheck, and use inside a Functional model.
#include <catch2/catch.hpp>

#include <vector>

#include "loom.hpp"
#include "tests/layers/merging_pooling_fixtures.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

TEST_CASE("Identity returns its input and passes its mask on, as Keras", "[layers][identity]") {
  for (const auto& c : merging_pooling_cases("Identity"))
    for (DType dtype : {DType::f64, DType::f32}) check_fixture_output(c, L::Identity()(fixture_inputs(c, dtype)[0]));
  L::reset_layer_names();
  L::Identity identity;
  CHECK(identity.name() == "identity");
  CHECK(identity.class_name() == "Identity");
  CHECK(identity.supports_masking());
  CHECK(identity.weights().empty());
  const Tensor x = randn({2, 3}, 1);
  const Tensor y = identity(x);
  CHECK(y.id() == x.id());
  CHECK_FALSE(y.keras_mask().defined());
  CHECK(identity.compute_output_shape({-1, 7}) == Shape{-1, 7});
  CHECK_THROWS_WITH(identity(Tensor()), Catch::Contains("identity") && Catch::Contains("undefined"));
}

TEST_CASE("Identity passes gradcheck in float64", "[layers][identity]") {
  L::Identity identity;
  require_gradcheck([&](const std::vector<Tensor>& in) { return identity(in[0]) * 2.0; }, {randn({2, 3}, 1)});
}

TEST_CASE("Identity works on symbolic tensors and keeps Embedding's mask", "[layers][identity][functional]") {
  L::reset_layer_names();
  Tensor tokens = loom::Input({4}, {.dtype = DType::i64});
  L::Embedding embedding(10, 3, {.mask_zero = true});
  Tensor e = L::Identity()(embedding(tokens));
  CHECK(e.shape() == Shape{-1, 4, 3});
  REQUIRE(e.keras_mask().defined());
  loom::Model m(tokens, L::GlobalAveragePooling1D()(e));
  const Tensor ids = i64({1, 2, 0, 0, 3, 4, 5, 0}, {2, 4});
  check_close(values(m.predict(ids, {.verbose = 0})), values(L::GlobalAveragePooling1D()(embedding(ids))), 1e-6);
}
