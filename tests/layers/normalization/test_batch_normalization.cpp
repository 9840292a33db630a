#include <catch2/catch.hpp>

#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "layers/normalization/batch_normalization.hpp"
#include "tests/layers/normalization/normalization_helpers.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

TEST_CASE("BatchNormalization creates gamma, beta, moving_mean and moving_variance", "[layers][batch_normalization]") {
  L::reset_layer_names();
  L::BatchNormalization bn({.axis = -1, .momentum = 0.99, .epsilon = 1e-3});
  CHECK(bn.name() == "batch_normalization");
  const Tensor y = bn(Tensor::randn({4, 3, 5}, DType::f32, 1));
  CHECK(y.shape() == Shape{4, 3, 5});
  CHECK(bn.compute_output_shape({4, 3, 5}) == y.shape());
  const auto w = bn.weights();
  REQUIRE(w.size() == 4);
  const std::vector<std::string> names{"gamma", "beta", "moving_mean", "moving_variance"};
  const std::vector<double> initial{1.0, 0.0, 0.0, 1.0};
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(w[i].name() == "batch_normalization/" + names[i]);
    CHECK(w[i].shape() == Shape{5});
    CHECK(values(w[i].value()) == std::vector<double>(5, initial[i]));
    CHECK(w[i].trainable() == (i < 2));
  }
  CHECK(bn.trainable_weights().size() == 2);
  CHECK(bn.non_trainable_weights().size() == 2);
  CHECK(bn.count_params() == 20);

  L::BatchNormalization channels_first({.axis = 1, .center = false});
  channels_first(Tensor::randn({2, 3, 4}, DType::f32, 2));
  CHECK(channels_first.axis() == 1);
  REQUIRE(channels_first.weights().size() == 3);
  CHECK(short_name(channels_first.weights()[0]) == "gamma");
  CHECK(channels_first.weights()[0].shape() == Shape{3});
}

TEST_CASE("BatchNormalization matches Keras (training with the moving update, inference)",
          "[layers][batch_normalization]") {
  for (const auto& c : normalization_cases("BatchNormalization"))
    for (DType dtype : {DType::f64, DType::f32}) {
      L::BatchNormalization bn({.axis = axes_option(c).at(0),
                                .momentum = number_option(c, "momentum", 0.99),
                                .epsilon = number_option(c, "epsilon", 1e-3)});
      check_against_keras(bn, c, dtype);
    }
}

TEST_CASE("BatchNormalization uses batch statistics in training and moving ones in inference",
          "[layers][batch_normalization]") {
  L::BatchNormalization bn({.axis = 1, .momentum = 0.8, .epsilon = 1e-3});
  const Tensor x = randn({6, 3, 2}, 1) * 2.0 + 5.0;
  bn(x);  // build
  auto w = bn.weights();
  const Tensor gamma = Tensor::uniform({3}, 0.5, 1.5, DType::f64, 2), beta = randn({3}, 3);
  w[0].assign(gamma);
  w[1].assign(beta);
  const Shape along{1, 3, 1};

  // Inference: moving statistics (still the initial 0 and 1), nothing updated.
  check_close(values(bn(x, false)), values(x / std::sqrt(1.0 + 1e-3) * gamma.reshape(along) + beta.reshape(along)),
              1e-12);
  check_close(values(w[2].value()), {0.0, 0.0, 0.0}, 0.0);

  // Several training steps: batch statistics, and moving = moving * 0.8 + batch * 0.2 with the biased variance.
  std::vector<double> moving_mean(3, 0.0), moving_var(3, 1.0);
  for (std::uint64_t step = 0; step < 4; ++step) {
    const Tensor batch = randn({6, 3, 2}, 10 + step) * double(step + 1) + double(step);
    const Tensor mean = ops::mean(batch, {0, 2}, true), var = ops::var(batch, {0, 2}, true);
    check_close(values(bn(batch, true)),
                values((batch - mean) / ops::sqrt(var + 1e-3) * gamma.reshape(along) + beta.reshape(along)), 1e-12);
    const auto m = values(mean), v = values(var);
    for (std::size_t c = 0; c < 3; ++c) {
      moving_mean[c] = moving_mean[c] * 0.8 + m[c] * 0.2;
      moving_var[c] = moving_var[c] * 0.8 + v[c] * 0.2;
    }
    check_close(values(w[2].value()), moving_mean, 1e-12);
    check_close(values(w[3].value()), moving_var, 1e-12);
  }
  // Inference now uses the moving statistics.
  const Tensor mm = Tensor::from_vector(moving_mean, along), mv = Tensor::from_vector(moving_var, along);
  check_close(values(bn(x)), values((x - mm) / ops::sqrt(mv + 1e-3) * gamma.reshape(along) + beta.reshape(along)),
              1e-12);
}

TEST_CASE("BatchNormalization updates its moving statistics without recording them", "[layers][batch_normalization]") {
  L::BatchNormalization bn;
  const Tensor x = randn({8, 4}, 1);
  bn(x);
  const auto w = bn.weights();
  const auto mean_id = w[2].id(), var_id = w[3].id();
  GradientTape tape({.persistent = true});
  tape.watch(x);
  const Tensor y = bn(x, true);
  REQUIRE(tape.recorded_ops().size() == 1);  // the fused op only: the moving update is not on the tape
  CHECK(tape.recorded_ops()[0] == "batch_norm");
  CHECK(w[2].id() == mean_id);  // updated in place
  CHECK(w[3].id() == var_id);
  CHECK(values(w[2].value()) != std::vector<double>(4, 0.0));
  const auto g = tape.gradient(ops::sum(y), std::vector<Tensor>{w[2].value(), w[3].value()}, {},
                               UnconnectedGradients::none);
  CHECK(!g[0].defined());
  CHECK(!g[1].defined());
}

TEST_CASE("A frozen BatchNormalization runs in inference mode", "[layers][batch_normalization]") {
  L::BatchNormalization bn({.momentum = 0.5});
  const Tensor x = randn({8, 3}, 1) * 3.0 + 2.0;
  bn(x);
  bn.set_trainable(false);
  CHECK(bn.trainable_weights().empty());
  CHECK(bn.non_trainable_weights().size() == 4);
  const Tensor y = bn(x, /*training=*/true);
  check_close(values(y), values(bn(x, false)), 0.0);
  check_close(values(y), values(x / std::sqrt(1.0 + 1e-3)), 1e-12);
  check_close(values(bn.weights()[2].value()), {0.0, 0.0, 0.0}, 0.0);
  check_close(values(bn.weights()[3].value()), {1.0, 1.0, 1.0}, 0.0);
  bn.set_trainable(true);
  bn(x, true);
  CHECK(values(bn.weights()[2].value()) != std::vector<double>(3, 0.0));
}

TEST_CASE("BatchNormalization passes gradcheck in training and inference", "[layers][batch_normalization]") {
  for (bool training : {true, false}) {
    INFO("training " << training);
    L::BatchNormalization bn({.axis = 1});
    const Tensor x = randn({4, 3, 2}, 11) * 2.0 + 1.0;
    bn(x);
    auto w = bn.weights();
    w[0].assign(Tensor::uniform({3}, 0.5, 1.5, DType::f64, 12));
    w[1].assign(randn({3}, 13));
    w[2].assign(randn({3}, 14));
    w[3].assign(Tensor::uniform({3}, 0.5, 2.0, DType::f64, 15));
    require_gradcheck([&](const std::vector<Tensor>& in) { return bn(in[0], training); },
                      {x, w[0].value(), w[1].value()});
  }
}

TEST_CASE("BatchNormalization trains: one step lowers the loss", "[layers][batch_normalization]") {
  L::BatchNormalization bn;
  const auto [before, after] = one_training_step(bn, randn({8, 6}, 21), randn({8, 6}, 22), 0.5);
  CHECK(after < before);
}

TEST_CASE("BatchNormalization rejects bad options and inputs", "[layers][batch_normalization]") {
  using Catch::Contains;
  REQUIRE_THROWS_WITH(L::BatchNormalization({.momentum = 1.5, .name = "b0"}), Contains("b0") && Contains("momentum"));
  REQUIRE_THROWS_WITH(L::BatchNormalization({.epsilon = -1e-3, .name = "b1"}), Contains("b1") && Contains("epsilon"));
  L::BatchNormalization bad_axis({.axis = 2, .name = "b2"});
  REQUIRE_THROWS_WITH(bad_axis(randn({2, 3}, 1)), Contains("b2") && Contains("2"));
  L::BatchNormalization built({.name = "b3"});
  built(randn({4, 3}, 1));
  REQUIRE_THROWS_WITH(built(randn({4, 5}, 1), true), Contains("b3") && Contains("dimensions [3]") && Contains("[4, 5]"));
  REQUIRE_THROWS_WITH(built(randn({4, 2, 3}, 1)), Contains("b3") && Contains("rank 2"));
  REQUIRE_THROWS_WITH(built(randn({4, 3}, 1, DType::f32)), Contains("b3") && Contains("f32"));
  REQUIRE_THROWS_WITH(built(Tensor::zeros({0, 3}, DType::f64), true), Contains("batch_norm") && Contains("zero"));
}
