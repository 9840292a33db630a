#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "tests/bad_input_helpers.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;

namespace {

/// A direct pool of a channels_last input, written from Keras's definition: windows of `pool` every
/// `strides`, "same" padding split as TensorFlow (the smaller half before), padded positions left out.
Tensor direct_pool(const Tensor& x, std::vector<std::int64_t> pool, std::vector<std::int64_t> strides,
                   const std::string& padding, bool max) {
  const Shape xs = x.shape();
  const bool one_d = xs.size() == 3;
  const std::size_t rank = xs.size() - 2;
  if (pool.size() == 1) pool.resize(rank, pool[0]);
  if (strides.empty()) strides = pool;
  if (strides.size() == 1) strides.resize(rank, strides[0]);
  std::vector<std::int64_t> out(rank), before(rank);
  for (std::size_t d = 0; d < rank; ++d) {
    const std::int64_t in = xs[d + 1];
    if (padding == "same") {
      out[d] = (in + strides[d] - 1) / strides[d];
      before[d] = std::max<std::int64_t>((out[d] - 1) * strides[d] + pool[d] - in, 0) / 2;
    } else {
      out[d] = (in - pool[d]) / strides[d] + 1;
      before[d] = 0;
    }
  }
  const std::int64_t n = xs[0], c = xs.back(), in_h = one_d ? 1 : xs[1], in_w = xs[rank];
  const std::int64_t ph = one_d ? 1 : pool[0], pw = pool.back(), sh = one_d ? 1 : strides[0], sw = strides.back();
  const std::int64_t out_h = one_d ? 1 : out[0], out_w = out.back(), bh = one_d ? 0 : before[0], bw = before.back();
  const auto xv = values(x);
  std::vector<double> y;
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t oh = 0; oh < out_h; ++oh)
      for (std::int64_t ow = 0; ow < out_w; ++ow)
        for (std::int64_t ch = 0; ch < c; ++ch) {
          double best = -std::numeric_limits<double>::infinity(), sum = 0;
          int count = 0;
          for (std::int64_t i = 0; i < ph; ++i)
            for (std::int64_t j = 0; j < pw; ++j) {
              const std::int64_t h = oh * sh + i - bh, w = ow * sw + j - bw;
              if (h < 0 || h >= in_h || w < 0 || w >= in_w) continue;
              const double v = xv[std::size_t(((b * in_h + h) * in_w + w) * c + ch)];
              best = std::max(best, v);
              sum += v;
              ++count;
            }
          y.push_back(max ? best : sum / count);
        }
  Shape out_shape{n};
  out_shape.insert(out_shape.end(), out.begin(), out.end());
  out_shape.push_back(c);
  return f64(y, out_shape);
}

struct PoolCase {
  Shape x;
  std::vector<std::int64_t> pool;
  std::optional<std::vector<std::int64_t>> strides;
  std::string padding;
};

std::vector<PoolCase> pool_cases() {
  return {
      {{2, 7, 3}, {2}, std::nullopt, "valid"},
      {{2, 7, 3}, {3}, std::vector<std::int64_t>{1}, "valid"},
      {{2, 7, 3}, {3}, std::vector<std::int64_t>{2}, "same"},
      {{2, 8, 2}, {2}, std::nullopt, "same"},
      {{2, 6, 5, 3}, {2, 2}, std::nullopt, "valid"},
      {{2, 6, 5, 3}, {2, 2}, std::nullopt, "same"},  // the last column's windows overhang
      {{1, 7, 7, 2}, {3, 3}, std::vector<std::int64_t>{2, 2}, "same"},
      {{1, 5, 7, 2}, {2, 3}, std::vector<std::int64_t>{1, 2}, "valid"},
      {{1, 4, 4, 2}, {4, 4}, std::vector<std::int64_t>{1, 1}, "same"},  // windows wider than half the input
  };
}

}  // namespace

TEST_CASE("max_pool and average_pool match direct loops for every padding and stride", "[pool]") {
  for (const auto& c : pool_cases()) {
    INFO(fmt::format("x {} pool {} {}", c.x, Shape(c.pool), c.padding));
    const Tensor x = randn(c.x, 1);
    const ops::PoolOptions options{.strides = c.strides, .padding = c.padding};
    const auto strides = c.strides.value_or(std::vector<std::int64_t>{});
    const Tensor want_max = direct_pool(x, c.pool, strides, c.padding, true);
    const Tensor want_mean = direct_pool(x, c.pool, strides, c.padding, false);
    const Tensor got_max = ops::max_pool(x, c.pool, options), got_mean = ops::average_pool(x, c.pool, options);
    REQUIRE(got_max.shape() == want_max.shape());
    REQUIRE(got_mean.shape() == want_mean.shape());
    check_close(values(got_max), values(want_max), 1e-15);
    check_close(values(got_mean), values(want_mean), 1e-14);
    const Tensor x32 = x.to(DType::f32);
    check_close(values(ops::average_pool(x32, c.pool, options)), values(want_mean), 1e-6, 1e-6);
    check_close(values(ops::max_pool(x32, c.pool, options)), values(want_max), 1e-6, 1e-6);
  }
}

TEST_CASE("pooling's float64 gradients check\\, to second order", "[pool][gradcheck]") {
  for (const auto& c : pool_cases()) {
    INFO(fmt::format("x {} pool {} {}", c.x, Shape(c.pool), c.padding));
    const ops::PoolOptions options{.strides = c.strides, .padding = c.padding};
    const auto pool = c.pool;
    // distinct values far apart: no window's maximum is within a finite-difference step of another value
    std::vector<double> shuffled;
    for (std::int64_t i = 0; i < numel(c.x); ++i) shuffled.push_back(double(i * 7919 % numel(c.x)) * 0.37);
    const Tensor x = f64(shuffled, c.x);
    require_gradcheck([=](const std::vector<Tensor>& v) { return ops::average_pool(v[0], pool, options); }, {x});
    require_gradcheck([=](const std::vector<Tensor>& v) { return ops::max_pool(v[0], pool, options); }, {x});
    require_gradgradcheck([=](const std::vector<Tensor>& v) { return ops::average_pool(v[0], pool, options); }, {x});
  }
}

TEST_CASE("max_pool sends the gradient to the first maximum and a NaN wins its window", "[pool]") {
  const Tensor x = f64({1, 3, 3, 2, std::nan(""), 0}, {1, 6, 1});
  GradientTape tape;
  tape.watch(x);
  const Tensor y = ops::max_pool(x, {3});
  const auto yv = values(y);
  CHECK(yv[0] == 3);
  CHECK(std::isnan(yv[1]));
  CHECK(values(tape.gradient(y, {x})[0]) == std::vector<double>{0, 1, 0, 0, 1, 0});
}

TEST_CASE("pooling with channels_first is the channels_last pool transposed", "[pool]") {
  const Tensor x = randn({2, 3, 5, 6}, 3);
  const ops::PoolOptions first{.strides = std::vector<std::int64_t>{2}, .padding = "same", .data_format = "channels_first"};
  const Tensor want = ops::permute(ops::max_pool(ops::permute(x, {0, 2, 3, 1}), {3, 3}, {.strides = {{2}}, .padding = "same"}),
                                   {0, 3, 1, 2});
  const Tensor y = ops::max_pool(x, {3, 3}, first);
  REQUIRE(y.shape() == Shape{2, 3, 3, 3});
  check_close(values(y), values(want), 0);
  const Tensor x1 = randn({2, 3, 7}, 4);
  const Tensor a = ops::average_pool(x1, {2}, {.data_format = "channels_first"});
  check_close(values(a), values(ops::permute(ops::average_pool(ops::permute(x1, {0, 2, 1}), {2}), {0, 2, 1})), 1e-15);
}

TEST_CASE("pooling ops reject bad input with the op and the shapes", "[pool][bad-input]") {
  const Tensor x = randn({2, 5, 5, 3}, 5);
  run_bad_inputs("pool", {
      {"pool larger than the input", [&] { ops::max_pool(x, {6, 2}); }, {"max_pool", "[2, 5, 5, 3]"}},
      {"pool larger than the input, average", [&] { ops::average_pool(x, {2, 7}); }, {"average_pool", "[2, 5, 5, 3]"}},
      {"wrong rank", [&] { ops::max_pool(randn({5, 3}, 1), {2}); }, {"max_pool", "[5, 3]"}},
      {"rank 5", [&] { ops::average_pool(randn({1, 2, 2, 2, 2}, 1), {2}); }, {"average_pool", "[1, 2, 2, 2, 2]"}},
      {"zero pool size", [&] { ops::max_pool(x, {0, 2}); }, {"max_pool"}},
      {"negative stride", [&] { ops::max_pool(x, {2}, {.strides = {{-1}}}); }, {"max_pool", "stride"}},
      {"pool_size of the wrong length", [&] { ops::max_pool(x, {2, 2, 2}); }, {"max_pool", "pool_size"}},
      {"unknown padding", [&] { ops::average_pool(x, {2}, {.padding = "causal"}); }, {"average_pool", "causal"}},
      {"unknown data_format", [&] { ops::max_pool(x, {2}, {.data_format = "NCHW"}); }, {"max_pool", "NCHW"}},
      {"integer input", [&] { ops::max_pool(i64({1, 2, 3, 4}, {1, 4, 1}), {2}); }, {"max_pool"}},
  });
}
