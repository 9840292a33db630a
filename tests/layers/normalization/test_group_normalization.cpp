#include <catch2/catch.hpp>

#include "framework/ops/ops.hpp"
#include "layers/normalization/group_normalization.hpp"
#include "tests/layers/normalization/normalization_helpers.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

TEST_CASE("GroupNormalization creates gamma then beta per channel", "[layers][group_normalization]") {
  L::reset_layer_names();
  L::GroupNormalization gn({.groups = 4, .axis = -1, .epsilon = 1e-3});
  CHECK(gn.name() == "group_normalization");
  const Tensor y = gn(Tensor::randn({2, 3, 8}, DType::f32, 1));
  CHECK(y.shape() == Shape{2, 3, 8});
  CHECK(gn.compute_output_shape({2, 3, 8}) == y.shape());
  CHECK(gn.groups() == 4);
  auto w = gn.weights();
  REQUIRE(w.size() == 2);
  CHECK(w[0].name() == "group_normalization/gamma");
  CHECK(w[1].name() == "group_normalization/beta");
  CHECK(w[0].shape() == Shape{8});
  CHECK(w[1].shape() == Shape{8});

  L::GroupNormalization instance({.groups = -1, .axis = 1});
  instance(Tensor::randn({2, 6, 5}, DType::f32, 2));
  CHECK(instance.groups() == 6);
  L::GroupNormalization defaults;  // 32 groups
  defaults(Tensor::randn({2, 64}, DType::f32, 3));
  CHECK(defaults.groups() == 32);
  L::GroupNormalization bare({.groups = 2, .center = false, .scale = false});
  bare(Tensor::randn({2, 4}, DType::f32, 4));
  CHECK(bare.weights().empty());
}

TEST_CASE("GroupNormalization matches Keras (outputs and gradients, f64 and f32)", "[layers][group_normalization]") {
  for (const auto& c : normalization_cases("GroupNormalization"))
    for (DType dtype : {DType::f64, DType::f32}) {
      L::GroupNormalization gn({.groups = std::int64_t(number_option(c, "groups", 32)),
                                .axis = axes_option(c).at(0),
                                .epsilon = number_option(c, "epsilon", 1e-3)});
      check_against_keras(gn, c, dtype);
    }
}

TEST_CASE("GroupNormalization passes gradcheck w.r.t. input, gamma and beta", "[layers][group_normalization]") {
  for (std::int64_t axis : {-1, 1}) {
    L::GroupNormalization gn({.groups = 2, .axis = axis});
    const Tensor x = randn({2, 4, 4}, 11) * 2.0;
    gn(x);
    auto w = gn.weights();
    w[0].assign(Tensor::uniform({4}, 0.5, 1.5, DType::f64, 12));
    w[1].assign(randn({4}, 13));
    require_gradcheck([&](const std::vector<Tensor>& in) { return gn(in[0]); }, {x, w[0].value(), w[1].value()});
  }
}

TEST_CASE("GroupNormalization trains: one step lowers the loss", "[layers][group_normalization]") {
  L::GroupNormalization gn({.groups = 2});
  const auto [before, after] = one_training_step(gn, randn({4, 3, 6}, 21), randn({4, 3, 6}, 22), 0.5);
  CHECK(after < before);
}

TEST_CASE("GroupNormalization rejects bad options and inputs", "[layers][group_normalization]") {
  using Catch::Contains;
  REQUIRE_THROWS_WITH(L::GroupNormalization({.groups = 0, .name = "g0"}), Contains("g0") && Contains("groups"));
  REQUIRE_THROWS_WITH(L::GroupNormalization({.groups = -2, .name = "g1"}), Contains("g1") && Contains("-1"));
  REQUIRE_THROWS_WITH(L::GroupNormalization({.epsilon = 0.0, .name = "g2"}), Contains("epsilon"));
  L::GroupNormalization uneven({.groups = 3, .name = "g3"});
  REQUIRE_THROWS_WITH(uneven(randn({2, 4}, 1)), Contains("g3") && Contains("GroupNormalization") &&
                                                    Contains("channels % groups != 0") && Contains("[2, 4]"));
  L::GroupNormalization too_many({.name = "g4"});  // 32 groups
  REQUIRE_THROWS_WITH(too_many(randn({2, 16}, 1)), Contains("g4") && Contains("32 groups but 16 channels"));
  L::GroupNormalization batch_axis({.groups = 1, .axis = 0, .name = "g5"});
  REQUIRE_THROWS_WITH(batch_axis(randn({2, 4}, 1)), Contains("g5") && Contains("batch axis"));
  L::GroupNormalization rank1({.groups = 1, .name = "g6"});
  REQUIRE_THROWS_WITH(rank1(randn({4}, 1)), Contains("g6") && Contains("rank >= 2"));
  L::GroupNormalization built({.groups = 2, .name = "g7"});
  built(randn({2, 4}, 1));
  REQUIRE_THROWS_WITH(built(randn({2, 6}, 1)), Contains("g7") && Contains("dimensions [4]") && Contains("[2, 6]"));
  REQUIRE_THROWS_WITH(built(randn({2, 4}, 1, DType::f32)), Contains("g7") && Contains("f32"));
}
