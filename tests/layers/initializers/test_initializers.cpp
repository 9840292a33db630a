#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "framework/tensor/random.hpp"
#include "layers/initializers/initializers.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;
namespace init = loom::layers::initializers;

namespace {

struct Stats {
  double mean = 0, stddev = 0, min = 0, max = 0;
};

Stats stats(const Tensor& t) {
  const auto v = values(t);
  Stats s;
  for (double x : v) s.mean += x;
  s.mean /= double(v.size());
  for (double x : v) s.stddev += (x - s.mean) * (x - s.mean);
  s.stddev = std::sqrt(s.stddev / double(v.size()));
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  s.min = *lo;
  s.max = *hi;
  return s;
}

// 200 x 300 kernel: fan_in 200, fan_out 300.
const Shape kKernel{200, 300};

}  // namespace

TEST_CASE("compute_fans follows Keras's rules", "[initializers]") {
  const auto fans = [](const Shape& s) {
    const L::Fans f = L::compute_fans(s);
    return std::pair{f.fan_in, f.fan_out};
  };
  CHECK(fans({}) == std::pair{1.0, 1.0});
  CHECK(fans({7}) == std::pair{7.0, 7.0});
  CHECK(fans({3, 5}) == std::pair{3.0, 5.0});
  CHECK(fans({3, 3, 4, 8}) == std::pair{36.0, 72.0});  // conv kernel: receptive field 3*3
  CHECK(fans({16, 2, 8}) == std::pair{32.0, 128.0});   // what Keras < 3.15 gave an MHA query kernel
}

TEST_CASE("variance-scaling initializers have Keras's scale and distribution", "[initializers]") {
  struct Case {
    L::Initializer init;
    double variance;  // the target variance scale / n
    bool uniform;
  };
  const double fan_in = 200, fan_out = 300, fan_avg = 250;
  const std::vector<Case> cases = {
      {init::glorot_uniform(1), 1 / fan_avg, true},  {init::glorot_normal(2), 1 / fan_avg, false},
      {init::he_uniform(3), 2 / fan_in, true},       {init::he_normal(4), 2 / fan_in, false},
      {init::lecun_uniform(5), 1 / fan_in, true},    {init::lecun_normal(6), 1 / fan_in, false},
      {init::variance_scaling(3.0, "fan_out", "untruncated_normal", 7), 3 / fan_out, false},
      {init::variance_scaling(0.5, "fan_out", "uniform", 8), 0.5 / fan_out, true},
  };
  for (const auto& c : cases) {
    INFO(c.init.name());
    const Stats s = stats(c.init(kKernel, DType::f64));
    const double stddev = std::sqrt(c.variance);
    CHECK(s.mean == Approx(0).margin(0.02 * stddev));
    CHECK(s.stddev == Approx(stddev).epsilon(0.02));
    if (c.uniform) {  // U(-limit, limit), limit = sqrt(3 * variance)
      CHECK(s.max <= std::sqrt(3 * c.variance));
      CHECK(s.min >= -std::sqrt(3 * c.variance));
      CHECK(s.max > 0.99 * std::sqrt(3 * c.variance));
    } else if (c.init.name() != "variance_scaling") {  // truncated at 2 stddev of the *untruncated* normal
      CHECK(std::max(-s.min, s.max) <= 2 * stddev / 0.87962566103423978);
      CHECK(std::max(-s.min, s.max) > 1.9 * stddev / 0.87962566103423978);
    }
  }
}

TEST_CASE("random initializers have their mean, spread and bounds", "[initializers]") {
  const Stats normal = stats(init::random_normal(1.0, 0.5, 1)(kKernel, DType::f64));
  CHECK(normal.mean == Approx(1.0).margin(0.01));
  CHECK(normal.stddev == Approx(0.5).epsilon(0.02));
  CHECK(normal.max > 1.0 + 3 * 0.5);  // untruncated: 60000 draws pass 3 sigma

  const Stats uniform = stats(init::random_uniform(-2.0, 4.0, 2)(kKernel, DType::f64));
  CHECK(uniform.min >= -2.0);
  CHECK(uniform.max < 4.0);
  CHECK(uniform.mean == Approx(1.0).margin(0.03));
  CHECK(uniform.stddev == Approx(6.0 / std::sqrt(12.0)).epsilon(0.02));

  // truncated_normal(mean, stddev): draws beyond 2 stddev are redrawn; the spread shrinks by 0.8796.
  const Stats truncated = stats(init::truncated_normal(-1.0, 0.1, 3)(kKernel, DType::f64));
  CHECK(truncated.min >= -1.0 - 0.2);
  CHECK(truncated.max <= -1.0 + 0.2);
  CHECK(truncated.min < -1.19);
  CHECK(truncated.mean == Approx(-1.0).margin(0.002));
  CHECK(truncated.stddev == Approx(0.1 * 0.87962566103423978).epsilon(0.02));

  // Keras's defaults: mean 0, stddev 0.05; uniform in [-0.05, 0.05)
  const Stats by_name = stats(L::Initializer("random_uniform")(kKernel, DType::f32));
  CHECK(by_name.min >= -0.05);
  CHECK(by_name.max < 0.05);
  CHECK(stats(L::Initializer("random_normal")(kKernel, DType::f64)).stddev == Approx(0.05).epsilon(0.02));
}

TEST_CASE("constant initializers fill their value in the requested dtype", "[initializers]") {
  for (DType dtype : {DType::f32, DType::f64}) {
    const Tensor z = L::Initializer("zeros")({2, 3}, dtype);
    CHECK(z.dtype() == dtype);
    CHECK(z.shape() == Shape{2, 3});
    CHECK(values(z) == std::vector<double>(6, 0.0));
    CHECK(values(L::Initializer("ones")({4}, dtype)) == std::vector<double>(4, 1.0));
    CHECK(values(init::constant(-2.5)({2, 2}, dtype)) == std::vector<double>(4, -2.5));
  }
  CHECK(L::Initializer("zeros")({}, DType::f64).ndim() == 0);
  CHECK(L::Initializer("ones")({0, 3}, DType::f64).numel() == 0);
}

TEST_CASE("explicit fans override the shape's", "[initializers]") {
  // EinsumDense passes its own fans: a [64, 4, 16] kernel with fan_in 64, fan_out 64.
  const L::Fans fans{64, 64};
  const Stats s = stats(init::glorot_uniform(1)({64, 4, 16}, DType::f64, fans));
  CHECK(s.max <= std::sqrt(6.0 / 128.0));
  CHECK(s.max > 0.97 * std::sqrt(6.0 / 128.0));
  // fans below 1 count as 1 (Keras's max(1, n))
  const Stats tiny = stats(init::he_uniform(2)({1000}, DType::f64, L::Fans{0.25, 0.25}));
  CHECK(tiny.max <= std::sqrt(6.0));
  CHECK(tiny.max > 0.99 * std::sqrt(6.0));
}

TEST_CASE("seeded initializers repeat, unseeded ones follow this thread's generator", "[initializers]") {
  const L::Initializer seeded = init::he_normal(42);
  CHECK(values(seeded({5, 4}, DType::f64)) == values(seeded({5, 4}, DType::f64)));
  CHECK(values(init::he_normal(42)({5, 4}, DType::f64)) == values(seeded({5, 4}, DType::f64)));
  CHECK(values(init::he_normal(43)({5, 4}, DType::f64)) != values(seeded({5, 4}, DType::f64)));
  // float32 holds the float64 draws rounded
  check_close(values(seeded({5, 4}, DType::f32)), values(seeded({5, 4}, DType::f64)), 1e-6, 1e-7);

  const L::Initializer unseeded("glorot_uniform");
  random::set_seed(9);
  const auto first = values(unseeded({5, 4}, DType::f64));
  const auto second = values(unseeded({5, 4}, DType::f64));
  CHECK(first != second);
  random::set_seed(9);
  CHECK(values(unseeded({5, 4}, DType::f64)) == first);
}

TEST_CASE("initializers by name accept Keras's names and aliases", "[initializers]") {
  for (const char* name : {"glorot_uniform", "glorot_normal", "he_normal", "he_uniform", "lecun_normal",
                           "lecun_uniform", "zeros", "ones", "random_normal", "random_uniform", "truncated_normal",
                           "variance_scaling", "uniform", "normal", "zero", "one"}) {
    INFO(name);
    const Tensor t = L::Initializer(name)({3, 2}, DType::f32);
    CHECK(t.shape() == Shape{3, 2});
  }
  CHECK(L::Initializer("uniform").name() == "random_uniform");
  CHECK(L::Initializer("he_normal").name() == "he_normal");
  CHECK(init::glorot_uniform(1).name() == "glorot_uniform");
}

TEST_CASE("initializers reject unknown names and bad arguments", "[initializers][errors]") {
  using Catch::Contains;
  REQUIRE_THROWS_WITH(L::Initializer("glorot"), Contains("'glorot'") && Contains("glorot_uniform") &&
                                                    Contains("he_normal") && Contains("truncated_normal"));
  REQUIRE_THROWS_WITH(init::variance_scaling(0.0, "fan_in", "uniform"), Contains("scale"));
  REQUIRE_THROWS_WITH(init::variance_scaling(1.0, "fan_sum", "uniform"), Contains("fan_sum") && Contains("fan_avg"));
  REQUIRE_THROWS_WITH(init::variance_scaling(1.0, "fan_in", "cauchy"), Contains("cauchy"));
  REQUIRE_THROWS_WITH(init::random_uniform(1.0, 0.0), Contains("random_uniform") && Contains("minval"));
  REQUIRE_THROWS_WITH(init::random_normal(0.0, -1.0), Contains("random_normal") && Contains("stddev"));
  REQUIRE_THROWS_WITH(init::he_normal()({2, 2}, DType::i64), Contains("he_normal") && Contains("i64"));
  REQUIRE_THROWS_WITH(L::Initializer("zeros")({2, 2}, DType::i64), Contains("zeros") && Contains("i64"));
  REQUIRE_THROWS_WITH(L::Initializer("ones")({2, -1}, DType::f32), Contains("ones") && Contains("[2, -1]"));
  const L::Initializer wrong("wrong", [](const Shape&, DType dtype, const L::Fans&) {
    return Tensor::zeros({1}, dtype);
  });
  REQUIRE_THROWS_WITH(wrong({2, 2}, DType::f32), Contains("wrong") && Contains("[2, 2]") && Contains("[1]"));
}
