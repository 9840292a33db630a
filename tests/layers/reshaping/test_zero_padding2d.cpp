// ZeroPadding2D: Keras's padding forms and defaults, values against direct loops in both data formats, output
// shapes with unknown sizes, a float64 gradcheck, one training step through a model, and bad options and inputs.
#include <catch2/catch.hpp>

#include <vector>

#include "loom.hpp"
#include "tests/bad_input_helpers.hpp"
#include "tests/layers/normalization/normalization_helpers.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

namespace {

/// Direct loops: x [N, H, W, C] inside zeros, `top` rows above, ... (channels_last).
Tensor padded_reference(const Tensor& x, std::int64_t top, std::int64_t bottom, std::int64_t left,
                        std::int64_t right) {
  const Shape& s = x.shape();
  const std::int64_t h = s[1] + top + bottom, w = s[2] + left + right;
  std::vector<double> out(std::size_t(s[0] * h * w * s[3]), 0.0);
  const auto v = values(x);
  for (std::int64_t n = 0; n < s[0]; ++n)
    for (std::int64_t i = 0; i < s[1]; ++i)
      for (std::int64_t j = 0; j < s[2]; ++j)
        for (std::int64_t c = 0; c < s[3]; ++c)
          out[std::size_t(((n * h + i + top) * w + j + left) * s[3] + c)] =
              v[std::size_t(((n * s[1] + i) * s[2] + j) * s[3] + c)];
  return f64(out, {s[0], h, w, s[3]});
}

Tensor to_channels_first(const Tensor& x) { return ops::contiguous(ops::permute(x, {0, 3, 1, 2})); }

}  // namespace

TEST_CASE("ZeroPadding2D has Keras's name\\, default and padding forms", "[layers][reshaping]") {
  L::reset_layer_names();
  L::ZeroPadding2D pad;
  CHECK(pad.name() == "zero_padding2d");
  CHECK(pad.class_name() == "ZeroPadding2D");
  CHECK(pad.padding() == std::vector<std::int64_t>{1, 1, 1, 1});  // Keras's default (1, 1)
  CHECK(pad.data_format() == "channels_last");
  CHECK(L::ZeroPadding2D({.padding = {3}}).padding() == std::vector<std::int64_t>{3, 3, 3, 3});
  CHECK(L::ZeroPadding2D({.padding = {1, 2}}).padding() == std::vector<std::int64_t>{1, 1, 2, 2});
  CHECK(L::ZeroPadding2D({.padding = {0, 1, 2, 3}}).padding() == std::vector<std::int64_t>{0, 1, 2, 3});
  CHECK(L::ZeroPadding2D({.data_format = "CHANNELS_FIRST"}).data_format() == "channels_first");
  CHECK(pad.weights().empty());
}

TEST_CASE("ZeroPadding2D matches direct loops in both data formats\\, with its output shapes",
          "[layers][reshaping]") {
  const Tensor x = randn({2, 3, 4, 2}, 1);
  for (const std::vector<std::int64_t>& sides :
       {std::vector<std::int64_t>{1, 1, 1, 1}, {2, 2, 1, 1}, {1, 2, 0, 3}, {0, 0, 0, 0}}) {
    INFO("padding " << fmt::format("{}", sides));
    const Tensor want = padded_reference(x, sides[0], sides[1], sides[2], sides[3]);
    L::ZeroPadding2D pad({.padding = sides});
    const Tensor y = pad(x);
    CHECK(y.shape() == want.shape());
    CHECK(pad.compute_output_shape(x.shape()) == y.shape());
    check_close(values(y), values(want), 0.0);
    L::ZeroPadding2D pad_cf({.padding = sides, .data_format = "channels_first"});
    const Tensor y_cf = pad_cf(to_channels_first(x));
    CHECK(y_cf.shape() == to_channels_first(want).shape());
    CHECK(pad_cf.compute_output_shape(to_channels_first(x).shape()) == y_cf.shape());
    check_close(values(y_cf), values(to_channels_first(want)), 0.0);
  }
  L::ZeroPadding2D pad({.padding = {1, 2, 0, 3}});
  CHECK(pad.compute_output_shape({-1, -1, 4, 2}) == Shape{-1, -1, 7, 2});
  CHECK(L::ZeroPadding2D({.data_format = "channels_first"}).compute_output_shape({-1, 3, 5, -1}) ==
        Shape{-1, 3, 7, -1});
  // Any dtype pads, as keras.ops.pad.
  CHECK(values(L::ZeroPadding2D({.padding = {0, 0, 1, 0}})(i64({5, 6}, {1, 1, 2, 1}))) ==
        std::vector<double>{0, 5, 6});
  CHECK(pad(x.to(DType::f32)).dtype() == DType::f32);
}

TEST_CASE("ZeroPadding2D passes gradcheck in float64 and trains in a model", "[layers][reshaping][gradcheck]") {
  L::ZeroPadding2D pad({.padding = {1, 2, 0, 3}});
  L::ZeroPadding2D pad_cf({.padding = {2, 1}, .data_format = "channels_first"});
  require_gradcheck([&](const std::vector<Tensor>& in) { return pad(in[0]); }, {randn({2, 3, 2, 2}, 2)});
  require_gradcheck([&](const std::vector<Tensor>& in) { return pad_cf(in[0]); }, {randn({1, 2, 3, 2}, 3)});
  require_gradgradcheck([&](const std::vector<Tensor>& in) { return ops::square(pad(in[0])); },
                        {randn({1, 2, 2, 1}, 4)});
  L::Sequential model({L::Input({4, 4, 2}), L::Dense(3, {.activation = "tanh"}), L::ZeroPadding2D(), L::Flatten(),
                       L::Dense(1)});
  const auto [before, after] =
      one_training_step(model, randn({8, 4, 4, 2}, 5, DType::f32), randn({8, 1}, 6, DType::f32), 0.05);
  CHECK(after < before);
}

TEST_CASE("ZeroPadding2D rejects bad options and inputs\\, naming the layer and the shapes",
          "[layers][reshaping][bad_input]") {
  L::ZeroPadding2D pad({.name = "pad"});
  L::ZeroPadding2D pad_cf({.data_format = "channels_first", .name = "pad_cf"});
  run_bad_inputs("ZeroPadding2D", {
      {"three values", [] { L::ZeroPadding2D({.padding = {1, 2, 3}, .name = "z"}); }, {"z", "padding", "[1, 2, 3]"}},
      {"no value", [] { L::ZeroPadding2D({.padding = {}, .name = "z"}); }, {"z", "padding", "[]"}},
      {"a negative value", [] { L::ZeroPadding2D({.padding = {1, -1}, .name = "z"}); },
       {"z", "non-negative", "[1, -1]"}},
      {"an unknown data_format", [] { L::ZeroPadding2D({.data_format = "nchw", .name = "z"}); }, {"z", "nchw"}},
      {"a rank-3 input", [&] { pad(randn({2, 3, 4}, 1)); },
       {"pad", "rank-4", "[batch, height, width, channels] (channels_last)", "[2, 3, 4]"}},
      {"channels_first: a rank-5 input", [&] { pad_cf(randn({1, 2, 3, 4, 5}, 1)); },
       {"pad_cf", "rank-4", "[batch, channels, height, width] (channels_first)", "[1, 2, 3, 4, 5]"}},
  });
}
