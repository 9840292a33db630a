// MaxPooling1D/2D, AveragePooling1D/2D, GlobalAveragePooling2D and GlobalMaxPooling2D: Keras's names and
// defaults, output shapes (compute_output_shape with unknown sizes), values against direct loops in both data
// formats, float64 gradchecks, one training step through a small model, and bad options and inputs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "loom.hpp"
#include "tests/bad_input_helpers.hpp"
#include "tests/layers/normalization/normalization_helpers.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

namespace {

struct PoolCase {
  std::array<std::int64_t, 2> pool, strides;
  bool same;
};

/// Direct loops: the maximum or the mean of each window of x [N, H, W, C] (channels_last); a "same" window
/// is padded as TensorFlow (ceil(n / stride) outputs, the odd position after) and covers only the positions
/// inside the input.
Tensor pool_reference(const Tensor& x, const PoolCase& p, bool max) {
  const Shape& s = x.shape();
  const std::array<std::int64_t, 2> in{s[1], s[2]};
  std::array<std::int64_t, 2> out{}, before{};
  for (std::size_t d = 0; d < 2; ++d) {
    if (p.same) {
      out[d] = (in[d] + p.strides[d] - 1) / p.strides[d];
      before[d] = std::max<std::int64_t>((out[d] - 1) * p.strides[d] + p.pool[d] - in[d], 0) / 2;
    } else {
      out[d] = (in[d] - p.pool[d]) / p.strides[d] + 1;
    }
  }
  const auto v = values(x);
  const std::int64_t channels = s[3];
  std::vector<double> y;
  for (std::int64_t n = 0; n < s[0]; ++n)
    for (std::int64_t i = 0; i < out[0]; ++i)
      for (std::int64_t j = 0; j < out[1]; ++j)
        for (std::int64_t c = 0; c < channels; ++c) {
          double best = -std::numeric_limits<double>::infinity(), total = 0;
          int count = 0;
          for (std::int64_t a = 0; a < p.pool[0]; ++a)
            for (std::int64_t b = 0; b < p.pool[1]; ++b) {
              const std::int64_t h = i * p.strides[0] - before[0] + a, w = j * p.strides[1] - before[1] + b;
              if (h < 0 || h >= in[0] || w < 0 || w >= in[1]) continue;
              const double e = v[std::size_t(((n * in[0] + h) * in[1] + w) * channels + c)];
              best = std::max(best, e);
              total += e;
              ++count;
            }
          y.push_back(max ? best : total / count);
        }
  return f64(y, {s[0], out[0], out[1], channels});
}

Tensor to_channels_first(const Tensor& x) {
  return ops::contiguous(x.ndim() == 3 ? ops::permute(x, {0, 2, 1}) : ops::permute(x, {0, 3, 1, 2}));
}

/// The 1-D layer's input [N, T, C] seen as an image [N, 1, T, C] and the window as (1, k).
PoolCase as_2d(std::int64_t pool, std::int64_t strides, bool same) { return {{1, pool}, {1, strides}, same}; }

}  // namespace

TEST_CASE("The pooling layers have Keras's names\\, defaults and stored options", "[layers][pooling]") {
  L::reset_layer_names();
  L::MaxPooling2D pool({.pool_size = {2, 2}});  // the DESIGN spelling
  L::GlobalAveragePooling2D gap;
  CHECK(pool.name() == "max_pooling2d");
  CHECK(pool.class_name() == "MaxPooling2D");
  CHECK(gap.name() == "global_average_pooling2d");
  CHECK(gap.class_name() == "GlobalAveragePooling2D");
  CHECK(L::MaxPooling1D().class_name() == "MaxPooling1D");
  CHECK(L::AveragePooling1D().name() == "average_pooling1d");
  CHECK(L::AveragePooling2D().class_name() == "AveragePooling2D");
  CHECK(L::GlobalMaxPooling2D().class_name() == "GlobalMaxPooling2D");
  CHECK(L::MaxPooling2D().name() == "max_pooling2d_1");

  L::MaxPooling2D defaults;
  CHECK(defaults.pool_size() == std::vector<std::int64_t>{2, 2});
  CHECK(defaults.strides() == std::vector<std::int64_t>{2, 2});  // Keras: strides = pool_size when None
  CHECK(defaults.padding() == "valid");
  CHECK(defaults.data_format() == "channels_last");
  L::AveragePooling1D one_d;
  CHECK(one_d.pool_size() == std::vector<std::int64_t>{2});
  CHECK(one_d.strides() == std::vector<std::int64_t>{2});
  // One value for all dimensions, lower-cased names, explicit strides.
  L::AveragePooling2D avg({.pool_size = {3}, .strides = {{1, 2}}, .padding = "SAME", .data_format = "Channels_First"});
  CHECK(avg.pool_size() == std::vector<std::int64_t>{3, 3});
  CHECK(avg.strides() == std::vector<std::int64_t>{1, 2});
  CHECK(avg.padding() == "same");
  CHECK(avg.data_format() == "channels_first");
  CHECK(pool.weights().empty());
  CHECK_FALSE(gap.keepdims());
  CHECK(gap.data_format() == "channels_last");
}

TEST_CASE("The pooling layers' output shapes: compute_output_shape matches the call\\, -1 stays unknown",
          "[layers][pooling]") {
  const auto check_shape = [](L::Layer& layer, const Shape& in, const Shape& want) {
    INFO(layer.class_name() << " on " << fmt::format("{}", in));
    CHECK(layer.compute_output_shape(in) == want);
    CHECK(layer(randn(in, 1)).shape() == want);
  };
  L::MaxPooling2D pool;
  check_shape(pool, {2, 5, 4, 3}, {2, 2, 2, 3});
  L::MaxPooling2D same({.pool_size = {3, 2}, .strides = {{2, 1}}, .padding = "same"});
  check_shape(same, {2, 5, 4, 3}, {2, 3, 4, 3});
  L::AveragePooling2D cf({.pool_size = {2, 3}, .strides = {{1, 2}}, .data_format = "channels_first"});
  check_shape(cf, {1, 3, 4, 7}, {1, 3, 3, 3});
  L::MaxPooling1D pool1d;
  check_shape(pool1d, {2, 5, 3}, {2, 2, 3});
  L::AveragePooling1D avg1d({.pool_size = {3}, .strides = {{2}}, .padding = "same", .data_format = "channels_first"});
  check_shape(avg1d, {2, 3, 7}, {2, 3, 4});
  L::GlobalAveragePooling2D gap;
  check_shape(gap, {2, 5, 4, 3}, {2, 3});
  L::GlobalMaxPooling2D gmp_cf({.data_format = "channels_first", .keepdims = true});
  check_shape(gmp_cf, {2, 3, 5, 4}, {2, 3, 1, 1});

  CHECK(pool.compute_output_shape({-1, -1, 6, 3}) == Shape{-1, -1, 3, 3});
  CHECK(same.compute_output_shape({-1, 7, -1, 1}) == Shape{-1, 4, -1, 1});
  CHECK(cf.compute_output_shape({-1, 3, -1, 7}) == Shape{-1, 3, -1, 3});
  CHECK(avg1d.compute_output_shape({-1, 3, -1}) == Shape{-1, 3, -1});
  CHECK(gap.compute_output_shape({-1, -1, -1, 8}) == Shape{-1, 8});
  CHECK(L::GlobalAveragePooling2D({.keepdims = true}).compute_output_shape({-1, -1, 4, 8}) == Shape{-1, 1, 1, 8});
}

TEST_CASE("MaxPooling2D and AveragePooling2D match direct loops in both data formats", "[layers][pooling]") {
  const Tensor x = randn({2, 5, 6, 3}, 7);
  for (const PoolCase& p : {PoolCase{{2, 2}, {2, 2}, false}, PoolCase{{3, 2}, {2, 1}, true},
                            PoolCase{{2, 3}, {1, 2}, false}, PoolCase{{3, 3}, {2, 2}, true},
                            PoolCase{{4, 1}, {3, 1}, true}})
    for (bool max : {true, false})
      for (const char* format : {"channels_last", "channels_first"}) {
        INFO("pool " << p.pool[0] << "x" << p.pool[1] << " strides " << p.strides[0] << "x" << p.strides[1]
                     << (p.same ? " same " : " valid ") << (max ? "max " : "average ") << format);
        const L::Pooling2DOptions o{.pool_size = {p.pool[0], p.pool[1]},
                                    .strides = std::vector<std::int64_t>{p.strides[0], p.strides[1]},
                                    .padding = p.same ? "same" : "valid",
                                    .data_format = format};
        std::shared_ptr<L::Layer> layer = max ? std::shared_ptr<L::Layer>(std::make_shared<L::MaxPooling2D>(o))
                                              : std::make_shared<L::AveragePooling2D>(o);
        const bool first = std::string(format) == "channels_first";
        const Tensor want = pool_reference(x, p, max);
        const Tensor got = (*layer)(first ? to_channels_first(x) : x);
        CHECK(got.shape() == (first ? to_channels_first(want) : want).shape());
        check_close(values(got), values(first ? to_channels_first(want) : want));
        // float32 gives the same values to float32 precision.
        check_close(values((*layer)((first ? to_channels_first(x) : x).to(DType::f32))),
                    values(first ? to_channels_first(want) : want), 1e-6);
      }
}

TEST_CASE("MaxPooling1D and AveragePooling1D match direct loops in both data formats", "[layers][pooling]") {
  const Tensor x = randn({2, 7, 3}, 8);
  const Tensor image = ops::reshape(x, {2, 1, 7, 3});
  for (const auto& [pool, strides, same] : {std::array<std::int64_t, 3>{2, 2, 0}, std::array<std::int64_t, 3>{3, 2, 1},
                                            std::array<std::int64_t, 3>{3, 1, 0}, std::array<std::int64_t, 3>{4, 3, 1}})
    for (bool max : {true, false})
      for (const char* format : {"channels_last", "channels_first"}) {
        INFO("pool " << pool << " strides " << strides << (same ? " same " : " valid ") << (max ? "max " : "average ")
                     << format);
        const L::Pooling1DOptions o{.pool_size = {pool},
                                    .strides = std::vector<std::int64_t>{strides},
                                    .padding = same ? "same" : "valid",
                                    .data_format = format};
        std::shared_ptr<L::Layer> layer = max ? std::shared_ptr<L::Layer>(std::make_shared<L::MaxPooling1D>(o))
                                              : std::make_shared<L::AveragePooling1D>(o);
        const Tensor ref = pool_reference(image, as_2d(pool, strides, same != 0), max);
        const Tensor want = ops::reshape(ref, {2, ref.shape()[2], 3});
        const bool first = std::string(format) == "channels_first";
        const Tensor got = (*layer)(first ? to_channels_first(x) : x);
        const Tensor expected = first ? to_channels_first(want) : want;
        CHECK(got.shape() == expected.shape());
        check_close(values(got), values(expected));
      }
}

TEST_CASE("GlobalAveragePooling2D and GlobalMaxPooling2D reduce height and width", "[layers][pooling]") {
  const Tensor x = randn({2, 3, 4, 5}, 9);
  const auto v = values(x);
  std::vector<double> mean(10, 0.0), max(10, -kInf);
  for (std::int64_t n = 0; n < 2; ++n)
    for (std::int64_t p = 0; p < 12; ++p)
      for (std::int64_t c = 0; c < 5; ++c) {
        const double e = v[std::size_t((n * 12 + p) * 5 + c)];
        mean[std::size_t(n * 5 + c)] += e / 12.0;
        max[std::size_t(n * 5 + c)] = std::max(max[std::size_t(n * 5 + c)], e);
      }
  check_close(values(L::GlobalAveragePooling2D()(x)), mean);
  check_close(values(L::GlobalMaxPooling2D()(x)), max);
  const Tensor kept = L::GlobalAveragePooling2D({.keepdims = true})(x);
  CHECK(kept.shape() == Shape{2, 1, 1, 5});
  check_close(values(kept), mean);
  const Tensor xf = to_channels_first(x);
  check_close(values(L::GlobalAveragePooling2D({.data_format = "channels_first"})(xf)), mean);
  const Tensor kept_cf = L::GlobalMaxPooling2D({.data_format = "channels_first", .keepdims = true})(xf);
  CHECK(kept_cf.shape() == Shape{2, 5, 1, 1});
  check_close(values(kept_cf), max);
}

TEST_CASE("The pooling layers pass gradcheck in float64", "[layers][pooling][gradcheck]") {
  const Tensor image = randn({2, 5, 4, 3}, 11), image_cf = randn({2, 3, 5, 4}, 12);
  const Tensor steps = randn({2, 7, 3}, 13), steps_cf = randn({2, 3, 7}, 14);
  std::vector<std::pair<std::shared_ptr<L::Layer>, Tensor>> cases = {
      {std::make_shared<L::MaxPooling2D>(), image},
      {std::make_shared<L::MaxPooling2D>(L::MaxPooling2DOptions{.pool_size = {3, 2}, .strides = {{2, 1}},
                                                                .padding = "same"}),
       image},
      {std::make_shared<L::AveragePooling2D>(), image},
      {std::make_shared<L::AveragePooling2D>(L::AveragePooling2DOptions{
           .pool_size = {3, 3}, .strides = {{2, 2}}, .padding = "same", .data_format = "channels_first"}),
       image_cf},
      {std::make_shared<L::MaxPooling1D>(L::MaxPooling1DOptions{.pool_size = {3}, .strides = {{2}}, .padding = "same"}),
       steps},
      {std::make_shared<L::MaxPooling1D>(L::MaxPooling1DOptions{.data_format = "channels_first"}), steps_cf},
      {std::make_shared<L::AveragePooling1D>(L::AveragePooling1DOptions{.pool_size = {3}, .strides = {{1}}}), steps},
      {std::make_shared<L::AveragePooling1D>(
           L::AveragePooling1DOptions{.pool_size = {2}, .padding = "same", .data_format = "channels_first"}),
       steps_cf},
      {std::make_shared<L::GlobalAveragePooling2D>(), image},
      {std::make_shared<L::GlobalAveragePooling2D>(
           L::GlobalAveragePooling2DOptions{.data_format = "channels_first", .keepdims = true}),
       image_cf},
      {std::make_shared<L::GlobalMaxPooling2D>(), image},
      {std::make_shared<L::GlobalMaxPooling2D>(L::GlobalMaxPooling2DOptions{.keepdims = true}), image},
  };
  for (auto& [layer, x] : cases) {
    INFO(layer->class_name());
    require_gradcheck([&, l = layer](const std::vector<Tensor>& in) { return (*l)(in[0]); }, {x});
  }
}

TEST_CASE("One training step through a model with each pooling layer lowers the loss", "[layers][pooling]") {
  const std::vector<std::shared_ptr<L::Layer>> pools = {
      std::make_shared<L::MaxPooling2D>(),
      std::make_shared<L::AveragePooling2D>(L::AveragePooling2DOptions{.pool_size = {3}, .padding = "same"}),
      std::make_shared<L::GlobalAveragePooling2D>(),
      std::make_shared<L::GlobalMaxPooling2D>(),
  };
  for (const auto& pool : pools) {
    INFO(pool->class_name());
    L::Sequential model({L::Input({6, 6, 2}), L::Dense(4, {.activation = "tanh"}), pool, L::Flatten(), L::Dense(1)});
    const auto [before, after] =
        one_training_step(model, randn({8, 6, 6, 2}, 1, DType::f32), randn({8, 1}, 2, DType::f32), 0.05);
    CHECK(after < before);
  }
  const std::vector<std::shared_ptr<L::Layer>> pools_1d = {
      std::make_shared<L::MaxPooling1D>(),
      std::make_shared<L::AveragePooling1D>(L::AveragePooling1DOptions{.pool_size = {3}}),
  };
  for (const auto& pool : pools_1d) {
    INFO(pool->class_name());
    L::Sequential model({L::Input({7, 2}), L::Dense(4, {.activation = "tanh"}), pool, L::Flatten(), L::Dense(1)});
    const auto [before, after] =
        one_training_step(model, randn({8, 7, 2}, 3, DType::f32), randn({8, 1}, 4, DType::f32), 0.05);
    CHECK(after < before);
  }
}

TEST_CASE("The pooling layers work on symbolic tensors in a Functional model", "[layers][pooling][functional]") {
  L::reset_layer_names();
  Tensor x = loom::Input({8, 6, 3});
  Tensor p = L::MaxPooling2D({.pool_size = {2, 3}})(x);
  CHECK(p.shape() == Shape{-1, 4, 2, 3});
  Tensor a = L::AveragePooling2D({.pool_size = {3, 3}, .strides = {{1, 1}}, .padding = "same"})(p);
  CHECK(a.shape() == Shape{-1, 4, 2, 3});
  Tensor g = L::GlobalMaxPooling2D()(a);
  CHECK(g.shape() == Shape{-1, 3});
  loom::Model m(x, g);
  const Tensor data = Tensor::randn({2, 8, 6, 3}, DType::f32, 5);
  const Tensor want = L::GlobalMaxPooling2D()(
      L::AveragePooling2D({.pool_size = {3, 3}, .strides = {{1, 1}}, .padding = "same"})(
          L::MaxPooling2D({.pool_size = {2, 3}})(data)));
  check_close(values(m.predict(data, {.verbose = 0})), values(want), 1e-6);
}

TEST_CASE("The pooling layers reject bad options and inputs\\, naming the layer and the shapes",
          "[layers][pooling][bad_input]") {
  L::reset_layer_names();
  L::MaxPooling2D pool({.pool_size = {3, 3}, .name = "pool"});
  L::AveragePooling2D pool_cf({.data_format = "channels_first", .name = "pool_cf"});
  L::MaxPooling1D pool1d({.pool_size = {4}, .name = "pool1d"});
  L::GlobalAveragePooling2D gap({.name = "gap"});
  L::GlobalMaxPooling2D gmp_cf({.data_format = "channels_first", .name = "gmp_cf"});
  run_bad_inputs("pooling layers", {
      {"pool_size 0", [] { L::MaxPooling2D({.pool_size = {0, 2}, .name = "p"}); }, {"p", "pool_size", "[0, 2]"}},
      {"a negative pool_size", [] { L::AveragePooling1D({.pool_size = {-1}, .name = "p"}); }, {"p", "pool_size", "-1"}},
      {"three pool sizes for 2-D", [] { L::MaxPooling2D({.pool_size = {1, 2, 3}, .name = "p"}); },
       {"p", "pool_size", "[1, 2, 3]"}},
      {"an empty pool_size", [] { L::MaxPooling1D({.pool_size = {}, .name = "p"}); }, {"p", "pool_size", "[]"}},
      {"strides 0", [] { L::MaxPooling2D({.strides = {{0}}, .name = "p"}); }, {"p", "strides", "[0, 0]"}},
      {"two strides for 1-D", [] { L::AveragePooling1D({.strides = {{1, 2}}, .name = "p"}); }, {"p", "strides"}},
      {"padding 'causal'", [] { L::MaxPooling1D({.padding = "causal", .name = "p"}); }, {"p", "padding", "causal"}},
      {"an unknown padding", [] { L::AveragePooling2D({.padding = "full", .name = "p"}); }, {"p", "padding", "full"}},
      {"an unknown data_format", [] { L::MaxPooling2D({.data_format = "nhwc", .name = "p"}); },
       {"p", "channels_last or channels_first", "nhwc"}},
      {"GlobalMaxPooling2D: an unknown data_format",
       [] { L::GlobalMaxPooling2D({.data_format = "channels_middle", .name = "g"}); }, {"g", "channels_middle"}},
      {"a rank-3 input to a 2-D pool", [&] { pool(randn({2, 5, 3}, 1)); },
       {"pool", "rank-4", "[batch, height, width, channels] (channels_last)", "[2, 5, 3]"}},
      {"a rank-3 input to channels_first", [&] { pool_cf(randn({2, 5, 3}, 1)); },
       {"pool_cf", "rank-4", "[batch, channels, height, width] (channels_first)", "[2, 5, 3]"}},
      {"a rank-4 input to a 1-D pool", [&] { pool1d(randn({2, 5, 3, 1}, 1)); },
       {"pool1d", "rank-3", "[batch, steps, features] (channels_last)", "[2, 5, 3, 1]"}},
      {"a pool larger than the input", [&] { pool(randn({1, 2, 5, 1}, 1)); },
       {"pool", "pool size [3, 3]", "larger", "[1, 2, 5, 1]", "valid"}},
      {"a pool larger than the steps", [&] { pool1d(randn({1, 3, 2}, 1)); }, {"pool1d", "[4]", "larger", "[1, 3, 2]"}},
      {"channels_first: the pool against height and width",
       [&] { pool_cf(randn({1, 4, 1, 8}, 1)); }, {"pool_cf", "larger", "[1, 4, 1, 8]", "channels_first"}},
      {"compute_output_shape: a pool larger than the input", [&] { pool.compute_output_shape({-1, 2, -1, 1}); },
       {"pool", "larger", "[-1, 2, -1, 1]"}},
      {"an empty spatial axis", [&] { pool_cf(randn({1, 2, 0, 4}, 1)); }, {"pool_cf", "at least one", "[1, 2, 0, 4]"}},
      {"an integer input", [&] { pool(i64(std::vector<std::int64_t>(9, 1), {1, 3, 3, 1})); }, {"pool", "i64"}},
      {"GlobalAveragePooling2D: a rank-3 input", [&] { gap(randn({2, 3, 4}, 1)); },
       {"gap", "rank-4", "[batch, height, width, channels]", "[2, 3, 4]"}},
      {"GlobalMaxPooling2D: a rank-5 input", [&] { gmp_cf(randn({1, 2, 3, 4, 5}, 1)); },
       {"gmp_cf", "rank-4", "(channels_first)", "[1, 2, 3, 4, 5]"}},
      {"GlobalAveragePooling2D: an integer input", [&] { gap(i64({1, 2, 3, 4}, {1, 2, 2, 1})); }, {"gap", "i64"}},
  });
}
