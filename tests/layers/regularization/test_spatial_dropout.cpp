// SpatialDropout1D and SpatialDropout2D: whole feature maps dropped while training (Dropout's mechanics with
// noise_shape [batch, 1, channels] / [batch, 1, 1, channels] or channels_first [batch, channels, 1, 1]), the
// kept ones scaled by 1 / (1 - rate); the identity at inference; seeds; gradchecks; bad options and inputs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "loom.hpp"
#include "tests/bad_input_helpers.hpp"
#include "tests/layers/normalization/normalization_helpers.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

namespace {

/// For y = drop(ones) in training: per (sample, channel) the factor shared by every position of its map, each
/// 0 or 1 / (1 - rate). `channel_of` and `sample_of` map a flat index of y to its channel and sample.
template <class ChannelOf>
std::vector<double> map_factors(const Tensor& y, std::int64_t samples, std::int64_t channels, double rate,
                                ChannelOf channel_of) {
  const auto v = values(y);
  const std::int64_t per_sample = std::int64_t(v.size()) / samples;
  std::vector<double> factor(std::size_t(samples * channels), -1.0);
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::int64_t n = std::int64_t(i) / per_sample, c = channel_of(std::int64_t(i) % per_sample);
    double& f = factor[std::size_t(n * channels + c)];
    if (f < 0) f = v[i];
    CHECK(v[i] == f);  // one value over the whole map
  }
  for (double f : factor) CHECK((f == 0.0 || f == Approx(1.0 / (1.0 - rate)).epsilon(1e-6)));  // float32 too
  return factor;
}

std::size_t count_zeros(const std::vector<double>& v) { return std::size_t(std::count(v.begin(), v.end(), 0.0)); }

}  // namespace

TEST_CASE("SpatialDropout1D and SpatialDropout2D have Keras's names and defaults", "[layers][dropout]") {
  L::reset_layer_names();
  L::SpatialDropout1D drop1(0.25);
  L::SpatialDropout2D drop2(0.5, {.seed = 3});
  CHECK(drop1.name() == "spatial_dropout1d");
  CHECK(drop1.class_name() == "SpatialDropout1D");
  CHECK(drop2.name() == "spatial_dropout2d");
  CHECK(drop2.class_name() == "SpatialDropout2D");
  CHECK(drop1.rate() == 0.25);
  CHECK_FALSE(drop1.seed().has_value());
  CHECK(drop2.seed() == std::optional<std::uint64_t>(3));
  CHECK(drop2.data_format() == "channels_last");
  CHECK(L::SpatialDropout2D(0.1, {.data_format = "Channels_First"}).data_format() == "channels_first");
  CHECK(drop1.supports_masking());  // as Dropout
  CHECK(drop1.weights().empty());
  CHECK(drop2.compute_output_shape({-1, 4, -1, 3}) == Shape{-1, 4, -1, 3});
}

TEST_CASE("SpatialDropout is the identity at inference", "[layers][dropout]") {
  const Tensor steps = randn({2, 5, 3}, 1), image = randn({2, 3, 4, 5}, 2);
  L::SpatialDropout1D drop1(0.5);
  L::SpatialDropout2D drop2(0.5, {.data_format = "channels_first"});
  check_close(values(drop1(steps)), values(steps), 0.0);
  check_close(values(drop2(image)), values(image), 0.0);
  check_close(values(L::SpatialDropout1D(0.0)(steps, true)), values(steps), 0.0);
}

TEST_CASE("SpatialDropout drops whole feature maps and scales the rest by 1 / (1 - rate)", "[layers][dropout]") {
  const double rate = 0.4;
  for (DType dtype : {DType::f64, DType::f32}) {
    // 1-D: [batch, steps, features], one factor per (sample, feature) shared over the steps.
    L::SpatialDropout1D drop1(rate, {.seed = 5});
    const auto f1 = map_factors(drop1(Tensor::ones({40, 6, 10}, dtype), true), 40, 10, rate,
                                [](std::int64_t i) { return i % 10; });
    CHECK(double(count_zeros(f1)) / double(f1.size()) == Approx(rate).margin(0.08));
    // 2-D channels_last: [batch, height, width, channels].
    L::SpatialDropout2D drop2(rate, {.seed = 6});
    const auto f2 = map_factors(drop2(Tensor::ones({40, 3, 4, 10}, dtype), true), 40, 10, rate,
                                [](std::int64_t i) { return i % 10; });
    CHECK(double(count_zeros(f2)) / double(f2.size()) == Approx(rate).margin(0.08));
    // 2-D channels_first: [batch, channels, height, width].
    L::SpatialDropout2D drop_cf(rate, {.data_format = "channels_first", .seed = 7});
    const auto f3 = map_factors(drop_cf(Tensor::ones({40, 10, 3, 4}, dtype), true), 40, 10, rate,
                                [](std::int64_t i) { return i / 12; });
    CHECK(double(count_zeros(f3)) / double(f3.size()) == Approx(rate).margin(0.08));
  }
  // Scaled data: y = x * factor of its map.
  const Tensor x = randn({3, 4, 5}, 8);
  L::SpatialDropout1D drop(0.5, {.seed = 9});
  const Tensor y = drop(x, true);
  const auto xv = values(x), yv = values(y);
  for (std::size_t i = 0; i < xv.size(); ++i) CHECK((yv[i] == 0.0 || yv[i] == Approx(2.0 * xv[i]).epsilon(1e-12)));
  // rate 1 gives zeros while training, as Dropout (and Keras).
  check_close(values(L::SpatialDropout2D(1.0)(randn({1, 2, 2, 2}, 1), true)), std::vector<double>(8, 0.0), 0.0);
}

TEST_CASE("A seeded SpatialDropout draws a new mask per call\\, the same sequence every run", "[layers][dropout]") {
  const Tensor x = Tensor::ones({8, 3, 3, 16});
  L::SpatialDropout2D a(0.5, {.seed = 3}), b(0.5, {.seed = 3});
  const auto a1 = values(a(x, true)), a2 = values(a(x, true));
  CHECK(a1 != a2);
  CHECK(values(b(x, true)) == a1);
  CHECK(values(b(x, true)) == a2);
}

TEST_CASE("SpatialDropout gradchecks: the gradient is the mask\\, and it trains in a model",
          "[layers][dropout][gradcheck]") {
  const Tensor steps = randn({3, 4, 5}, 10), image = randn({2, 3, 2, 4}, 11);
  // gradcheck needs one mask for every evaluation: a fresh layer with the same seed each call.
  require_gradcheck(
      [](const std::vector<Tensor>& in) { return L::SpatialDropout1D(0.4, {.seed = 1})(in[0], true); }, {steps});
  require_gradcheck(
      [](const std::vector<Tensor>& in) {
        return L::SpatialDropout2D(0.4, {.data_format = "channels_first", .seed = 2})(in[0], true);
      },
      {image});
  L::Sequential model({L::Input({4, 4, 2}), L::Dense(6, {.activation = "tanh"}), L::SpatialDropout2D(0.2, {.seed = 4}),
                       L::GlobalAveragePooling2D(), L::Dense(1)});
  const auto [before, after] =
      one_training_step(model, randn({16, 4, 4, 2}, 5, DType::f32), randn({16, 1}, 6, DType::f32), 0.05);
  // Each loss sees its own mask, so only a sound step is asserted, not a lower loss.
  CHECK(std::isfinite(before));
  CHECK(std::isfinite(after));
  CHECK(after != before);
}

TEST_CASE("SpatialDropout rejects bad rates\\, data formats and inputs\\, naming the layer and the shapes",
          "[layers][dropout][bad_input]") {
  L::SpatialDropout1D drop1(0.5, {.name = "drop1"});
  L::SpatialDropout2D drop_cf(0.5, {.data_format = "channels_first", .name = "drop_cf"});
  run_bad_inputs("SpatialDropout", {
      {"a rate above 1", [] { L::SpatialDropout1D(1.5, {.name = "s"}); }, {"s", "rate", "[0, 1]", "1.5"}},
      {"a negative rate", [] { L::SpatialDropout2D(-0.1, {.name = "s"}); }, {"s", "rate", "-0.1"}},
      {"an unknown data_format", [] { L::SpatialDropout2D(0.1, {.data_format = "nchw", .name = "s"}); },
       {"s", "channels_last or channels_first", "nchw"}},
      {"a rank-4 input to SpatialDropout1D", [&] { drop1(randn({2, 3, 4, 5}, 1), true); },
       {"drop1", "rank-3", "[batch, steps, features] (channels_last)", "[2, 3, 4, 5]"}},
      {"SpatialDropout1D checks the rank at inference too", [&] { drop1(randn({2, 3}, 1)); },
       {"drop1", "rank-3", "[2, 3]"}},
      {"a rank-3 input to SpatialDropout2D", [&] { drop_cf(randn({2, 3, 4}, 1), true); },
       {"drop_cf", "rank-4", "[batch, channels, height, width] (channels_first)", "[2, 3, 4]"}},
      {"an integer input", [&] { drop1(i64({1, 2}, {1, 1, 2}), true); }, {"drop1", "i64"}},
  });
}
