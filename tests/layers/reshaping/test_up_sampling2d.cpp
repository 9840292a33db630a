// UpSampling2D: Keras's names and defaults, "nearest" and "bilinear" (jax.image.resize: half-pixel centers,
// edges repeated) against direct loops in both data formats, output shapes with unknown sizes, float64
// gradchecks, one training step through a model, and bad options and inputs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "loom.hpp"
#include "tests/bad_input_helpers.hpp"
#include "tests/layers/normalization/normalization_helpers.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

namespace {

/// Direct loops over x [N, H, W, C] (channels_last): output (i, j) reads the input at source coordinates
/// (i + 0.5) / sh - 0.5 and (j + 0.5) / sw - 0.5, clamped into the input, rounded down ("nearest": the
/// input row i / sh) or interpolated between the two neighbours ("bilinear").
Tensor upsampled_reference(const Tensor& x, std::int64_t sh, std::int64_t sw, bool bilinear) {
  const Shape& s = x.shape();
  const std::int64_t h = s[1] * sh, w = s[2] * sw;
  const auto v = values(x);
  const auto at = [&](std::int64_t n, std::int64_t i, std::int64_t j, std::int64_t c) {
    return v[std::size_t(((n * s[1] + i) * s[2] + j) * s[3] + c)];
  };
  struct Tap {
    std::int64_t low, high;
    double t;
  };
  const auto tap = [](std::int64_t o, std::int64_t factor, std::int64_t size) {
    const double f = std::clamp((double(o) + 0.5) / double(factor) - 0.5, 0.0, double(size - 1));
    const auto low = std::int64_t(std::floor(f));
    return Tap{low, std::min(low + 1, size - 1), f - double(low)};
  };
  std::vector<double> out;
  for (std::int64_t n = 0; n < s[0]; ++n)
    for (std::int64_t i = 0; i < h; ++i)
      for (std::int64_t j = 0; j < w; ++j)
        for (std::int64_t c = 0; c < s[3]; ++c) {
          if (!bilinear) {
            out.push_back(at(n, i / sh, j / sw, c));
            continue;
          }
          const Tap r = tap(i, sh, s[1]), q = tap(j, sw, s[2]);
          const double top = at(n, r.low, q.low, c) * (1 - q.t) + at(n, r.low, q.high, c) * q.t;
          const double bottom = at(n, r.high, q.low, c) * (1 - q.t) + at(n, r.high, q.high, c) * q.t;
          out.push_back(top * (1 - r.t) + bottom * r.t);
        }
  return f64(out, {s[0], h, w, s[3]});
}

Tensor to_channels_first(const Tensor& x) { return ops::contiguous(ops::permute(x, {0, 3, 1, 2})); }

}  // namespace

TEST_CASE("UpSampling2D has Keras's name and defaults", "[layers][reshaping]") {
  L::reset_layer_names();
  L::UpSampling2D up;
  CHECK(up.name() == "up_sampling2d");
  CHECK(up.class_name() == "UpSampling2D");
  CHECK(up.size() == std::vector<std::int64_t>{2, 2});
  CHECK(up.data_format() == "channels_last");
  CHECK(up.interpolation() == "nearest");
  const L::UpSampling2D other({.size = {3}, .data_format = "Channels_First", .interpolation = "BiLinear"});
  CHECK(other.size() == std::vector<std::int64_t>{3, 3});
  CHECK(other.data_format() == "channels_first");
  CHECK(other.interpolation() == "bilinear");
  CHECK(up.weights().empty());
}

TEST_CASE("UpSampling2D matches direct loops for nearest and bilinear in both data formats",
          "[layers][reshaping]") {
  const Tensor x = randn({2, 3, 4, 2}, 1);
  for (const char* interpolation : {"nearest", "bilinear"})
    for (const std::vector<std::int64_t>& size : {std::vector<std::int64_t>{2, 2}, {2, 3}, {3, 1}, {1, 1}, {4, 2}}) {
      INFO(interpolation << " size " << fmt::format("{}", size));
      const Tensor want = upsampled_reference(x, size[0], size[1], std::string(interpolation) == "bilinear");
      L::UpSampling2D up({.size = size, .interpolation = interpolation});
      const Tensor y = up(x);
      CHECK(y.shape() == want.shape());
      CHECK(up.compute_output_shape(x.shape()) == y.shape());
      check_close(values(y), values(want));
      L::UpSampling2D up_cf({.size = size, .data_format = "channels_first", .interpolation = interpolation});
      const Tensor y_cf = up_cf(to_channels_first(x));
      CHECK(y_cf.shape() == to_channels_first(want).shape());
      check_close(values(y_cf), values(to_channels_first(want)));
      check_close(values(up(x.to(DType::f32))), values(want), 1e-6);
    }
  // Half-pixel centers by hand: [0, 1] doubled is [0, 0.25, 0.75, 1] (the edges repeated, as jax.image.resize).
  const Tensor row = f64({0, 1}, {1, 1, 2, 1});
  check_close(values(L::UpSampling2D({.size = {1, 2}, .interpolation = "bilinear"})(row)), {0, 0.25, 0.75, 1});
  check_close(values(L::UpSampling2D({.size = {1, 2}})(row)), {0, 0, 1, 1}, 0.0);
  CHECK(L::UpSampling2D({.size = {2, 3}}).compute_output_shape({-1, -1, 4, 2}) == Shape{-1, -1, 12, 2});
  CHECK(L::UpSampling2D({.data_format = "channels_first"}).compute_output_shape({-1, 2, 3, -1}) ==
        Shape{-1, 2, 6, -1});
  // "nearest" repeats any dtype.
  CHECK(values(L::UpSampling2D({.size = {1, 2}})(i64({5, 6}, {1, 1, 2, 1}))) == std::vector<double>{5, 5, 6, 6});
}

TEST_CASE("UpSampling2D passes gradcheck in float64 and trains in a model", "[layers][reshaping][gradcheck]") {
  for (const char* interpolation : {"nearest", "bilinear"}) {
    INFO(interpolation);
    L::UpSampling2D up({.size = {2, 3}, .interpolation = interpolation});
    L::UpSampling2D up_cf({.size = {3, 2}, .data_format = "channels_first", .interpolation = interpolation});
    require_gradcheck([&](const std::vector<Tensor>& in) { return up(in[0]); }, {randn({2, 3, 2, 2}, 2)});
    require_gradcheck([&](const std::vector<Tensor>& in) { return up_cf(in[0]); }, {randn({1, 2, 3, 2}, 3)});
    require_gradgradcheck([&](const std::vector<Tensor>& in) { return ops::square(up(in[0])); },
                          {randn({1, 2, 2, 1}, 4)});
    L::Sequential model({L::Input({3, 3, 2}), L::Dense(3, {.activation = "tanh"}),
                         L::UpSampling2D({.interpolation = interpolation}), L::Flatten(), L::Dense(1)});
    const auto [before, after] =
        one_training_step(model, randn({8, 3, 3, 2}, 5, DType::f32), randn({8, 1}, 6, DType::f32), 0.05);
    CHECK(after < before);
  }
}

TEST_CASE("UpSampling2D rejects bad options and inputs\\, naming the layer and the shapes",
          "[layers][reshaping][bad_input]") {
  L::UpSampling2D up({.name = "up"});
  L::UpSampling2D bilinear({.data_format = "channels_first", .interpolation = "bilinear", .name = "bilinear"});
  run_bad_inputs("UpSampling2D", {
      {"size 0", [] { L::UpSampling2D({.size = {0, 2}, .name = "u"}); }, {"u", "size", "[0, 2]"}},
      {"a negative size", [] { L::UpSampling2D({.size = {-2}, .name = "u"}); }, {"u", "size", "[-2, -2]"}},
      {"three sizes", [] { L::UpSampling2D({.size = {1, 2, 3}, .name = "u"}); }, {"u", "size", "[1, 2, 3]"}},
      {"bicubic, which loom does not implement", [] { L::UpSampling2D({.interpolation = "bicubic", .name = "u"}); },
       {"u", "interpolation", "'nearest' or 'bilinear'", "bicubic"}},
      {"an unknown interpolation", [] { L::UpSampling2D({.interpolation = "cubic", .name = "u"}); }, {"u", "cubic"}},
      {"an unknown data_format", [] { L::UpSampling2D({.data_format = "nhwc", .name = "u"}); }, {"u", "nhwc"}},
      {"a rank-3 input", [&] { up(randn({2, 3, 4}, 1)); },
       {"up", "rank-4", "[batch, height, width, channels] (channels_last)", "[2, 3, 4]"}},
      {"channels_first: a rank-2 input", [&] { bilinear(randn({2, 3}, 1)); },
       {"bilinear", "rank-4", "(channels_first)", "[2, 3]"}},
      {"bilinear: an integer input", [&] { bilinear(i64({1, 2}, {1, 1, 1, 2})); }, {"bilinear", "i64"}},
  });
}
