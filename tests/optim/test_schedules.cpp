#include <catch2/catch.hpp>

#include <cmath>
#include <numbers>

#include "optim/optim.hpp"

using namespace loom;

// The schedules' values inside a training run are compared with Keras's in test_optimizers.cpp (the "lr" rows
// of optimizer_fixtures.txt); these cases pin the formulas at their corners.

TEST_CASE("ExponentialDecay is smooth or staircase", "[optim]") {
  const optim::ExponentialDecay smooth({.initial_learning_rate = 0.1, .decay_steps = 10, .decay_rate = 0.5});
  CHECK(smooth(0) == 0.1);
  CHECK(smooth(10) == Approx(0.05).epsilon(1e-15));
  CHECK(smooth(5) == Approx(0.1 * std::sqrt(0.5)).epsilon(1e-15));
  const optim::ExponentialDecay stairs(
      {.initial_learning_rate = 0.1, .decay_steps = 10, .decay_rate = 0.5, .staircase = true});
  CHECK(stairs(9) == 0.1);
  CHECK(stairs(10) == Approx(0.05).epsilon(1e-15));
  CHECK(stairs(25) == Approx(0.025).epsilon(1e-15));
}

TEST_CASE("CosineDecay decays to alpha and warms up linearly", "[optim]") {
  const optim::CosineDecay plain({.initial_learning_rate = 1.0, .decay_steps = 100, .alpha = 0.1});
  CHECK(plain(0) == 1.0);
  CHECK(plain(50) == Approx(0.55).epsilon(1e-15));
  CHECK(plain(100) == Approx(0.1).epsilon(1e-15));
  CHECK(plain(1000) == Approx(0.1).epsilon(1e-15));  // constant after decay_steps
  const optim::CosineDecay warm(
      {.initial_learning_rate = 0.0, .decay_steps = 10, .warmup_target = 2e-3, .warmup_steps = 4});
  CHECK(warm(0) == 0.0);
  CHECK(warm(1) == Approx(5e-4).epsilon(1e-15));
  CHECK(warm(4) == Approx(2e-3).epsilon(1e-15));
  CHECK(warm(9) == Approx(2e-3 * 0.5 * (1.0 + std::cos(std::numbers::pi * 0.5))).epsilon(1e-15));
  CHECK(warm(14) == Approx(0.0).margin(1e-18));
  CHECK(warm(100) == Approx(0.0).margin(1e-18));
}

TEST_CASE("PolynomialDecay stops at the end rate or cycles", "[optim]") {
  const optim::PolynomialDecay linear({.initial_learning_rate = 1.0, .decay_steps = 4, .end_learning_rate = 0.2});
  CHECK(linear(0) == 1.0);
  CHECK(linear(2) == Approx(0.6).epsilon(1e-15));
  CHECK(linear(9) == Approx(0.2).epsilon(1e-15));
  const optim::PolynomialDecay cycling(
      {.initial_learning_rate = 1.0, .decay_steps = 4, .end_learning_rate = 0.0, .power = 2.0, .cycle = true});
  CHECK(cycling(4) == Approx(0.0).margin(1e-18));
  CHECK(cycling(6) == Approx(0.0625).epsilon(1e-15));  // decay_steps grows to 8: (1 - 6/8)^2
}

TEST_CASE("a schedule converts to an optimizer's learning rate", "[optim]") {
  optim::Adam adam({.learning_rate = optim::PolynomialDecay({.initial_learning_rate = 0.1, .decay_steps = 10})});
  CHECK(adam.learning_rate() == 0.1);
  const optim::LearningRate rate = optim::CosineDecay({.initial_learning_rate = 0.5, .decay_steps = 2});
  CHECK(rate.is_schedule());
  CHECK(rate.at(2) == Approx(0.0).margin(1e-18));
  CHECK_FALSE(optim::LearningRate(0.5).is_schedule());
}

TEST_CASE("schedules reject bad arguments", "[optim]") {
  REQUIRE_THROWS_WITH(optim::ExponentialDecay({.initial_learning_rate = 0.1, .decay_steps = 0, .decay_rate = 0.5}),
                      Catch::Contains("ExponentialDecay: decay_steps must be > 0, got 0"));
  REQUIRE_THROWS_WITH(optim::ExponentialDecay({.initial_learning_rate = 0.1, .decay_steps = 5, .decay_rate = 0.0}),
                      Catch::Contains("decay_rate"));
  REQUIRE_THROWS_WITH(optim::CosineDecay({.initial_learning_rate = 0.1, .decay_steps = -3}),
                      Catch::Contains("CosineDecay: decay_steps must be > 0, got -3"));
  REQUIRE_THROWS_WITH(optim::CosineDecay({.initial_learning_rate = 0.1, .decay_steps = 3, .warmup_steps = 2}),
                      Catch::Contains("needs a warmup_target"));
  REQUIRE_THROWS_WITH(optim::CosineDecay({.initial_learning_rate = 0.1, .decay_steps = 3, .warmup_target = 1.0,
                                          .warmup_steps = -1}),
                      Catch::Contains("warmup_steps must be >= 0"));
  REQUIRE_THROWS_WITH(optim::PolynomialDecay({.initial_learning_rate = 0.1, .decay_steps = 0}),
                      Catch::Contains("PolynomialDecay: decay_steps"));
  const optim::CosineDecay cosine({.initial_learning_rate = 0.1, .decay_steps = 3});
  REQUIRE_THROWS_WITH(cosine(-1), Catch::Contains("step must be >= 0, got -1"));
  REQUIRE_THROWS_WITH(optim::InverseTimeDecay({.initial_learning_rate = 0.1, .decay_steps = 0}),
                      Catch::Contains("InverseTimeDecay: decay_steps must be > 0"));
  REQUIRE_THROWS_WITH(optim::InverseTimeDecay({.initial_learning_rate = 0.1, .decay_steps = 2, .decay_rate = -1}),
                      Catch::Contains("decay_rate"));
  REQUIRE_THROWS_WITH(optim::PiecewiseConstantDecay({.boundaries = {3, 5}, .values = {0.1, 0.01}}),
                      Catch::Contains("one entry more than boundaries, got 2 boundaries and 2 values"));
  REQUIRE_THROWS_WITH(optim::PiecewiseConstantDecay({.boundaries = {5, 5}, .values = {0.1, 0.01, 0.001}}),
                      Catch::Contains("boundaries must increase, got [5, 5]"));
  REQUIRE_THROWS_WITH(optim::CosineDecayRestarts({.initial_learning_rate = 0.1, .first_decay_steps = 0}),
                      Catch::Contains("CosineDecayRestarts: first_decay_steps must be > 0"));
  REQUIRE_THROWS_WITH(optim::CosineDecayRestarts({.initial_learning_rate = 0.1, .first_decay_steps = 2, .t_mul = 0}),
                      Catch::Contains("t_mul"));
}

TEST_CASE("PiecewiseConstantDecay's ranges close on their boundary\\, as Keras's", "[optim]") {
  const optim::PiecewiseConstantDecay piecewise({.boundaries = {2, 5}, .values = {1.0, 0.5, 0.1}});
  std::vector<double> rates;
  for (std::int64_t step = 0; step <= 7; ++step) rates.push_back(piecewise(step));
  CHECK(rates == std::vector<double>{1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.1, 0.1});
}
