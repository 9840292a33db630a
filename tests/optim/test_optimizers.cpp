#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "optim/optim.hpp"
#include "tests/fixture_reader.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;

namespace {

constexpr double kKerasTolerance = 1e-12;  // measured: every value agrees within 1e-15

std::optional<double> number_option(const FixtureCase& c, const std::string& key) {
  if (!c.options.count(key)) return std::nullopt;
  return std::stod(c.options.at(key));
}
double number_or(const FixtureCase& c, const std::string& key, double fallback) {
  return number_option(c, key).value_or(fallback);
}
bool flag(const FixtureCase& c, const std::string& key) { return c.option_or(key, "0") == "1"; }
/// A comma-separated list option ("0.02,0.01").
std::vector<double> list_option(const FixtureCase& c, const std::string& key) {
  std::vector<double> out;
  std::istringstream in(c.option(key));
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stod(item));
  return out;
}

/// The learning rate a case names: a constant, or one of the schedules with its arguments.
optim::LearningRate learning_rate_of(const FixtureCase& c, double keras_default) {
  const std::string schedule = c.option_or("schedule", "");
  if (schedule.empty()) return number_or(c, "learning_rate", keras_default);
  const double init = number_or(c, "initial_learning_rate", 0.0);
  const auto decay_steps = std::int64_t(number_or(c, "decay_steps", 0.0));
  if (schedule == "exponential")
    return optim::ExponentialDecay({init, decay_steps, number_or(c, "decay_rate", 0.0), flag(c, "staircase")});
  if (schedule == "cosine")
    return optim::CosineDecay({init, decay_steps, number_or(c, "alpha", 0.0), number_option(c, "warmup_target"),
                               std::int64_t(number_or(c, "warmup_steps", 0.0))});
  if (schedule == "inverse_time")
    return optim::InverseTimeDecay({init, decay_steps, number_or(c, "decay_rate", 0.0), flag(c, "staircase")});
  if (schedule == "piecewise_constant") {
    std::vector<std::int64_t> boundaries;
    for (double b : list_option(c, "boundaries")) boundaries.push_back(std::int64_t(b));
    return optim::PiecewiseConstantDecay({boundaries, list_option(c, "values")});
  }
  if (schedule == "cosine_restarts")
    return optim::CosineDecayRestarts({init, std::int64_t(number_or(c, "first_decay_steps", 0.0)),
                                       number_or(c, "t_mul", 2.0), number_or(c, "m_mul", 1.0),
                                       number_or(c, "alpha", 0.0)});
  REQUIRE(schedule == "polynomial");
  return optim::PolynomialDecay({init, decay_steps, number_or(c, "end_learning_rate", 0.0001),
                                 number_or(c, "power", 1.0), flag(c, "cycle")});
}

/// Fills the options all optimizers share from the case (weight_decay is AdamW's own field, set apart).
template <class Options>
Options with_clipping(Options options, const FixtureCase& c) {
  options.clipnorm = number_option(c, "clipnorm");
  options.clipvalue = number_option(c, "clipvalue");
  options.global_clipnorm = number_option(c, "global_clipnorm");
  return options;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const FixtureCase& c) {
  const std::string& kind = c.words.at(0);
  if (kind == "sgd")
    return std::make_unique<optim::SGD>(with_clipping(
        optim::SGDOptions{.learning_rate = learning_rate_of(c, 0.01),
                          .momentum = number_or(c, "momentum", 0.0),
                          .nesterov = flag(c, "nesterov"),
                          .weight_decay = number_option(c, "weight_decay")},
        c));
  if (kind == "adam")
    return std::make_unique<optim::Adam>(with_clipping(
        optim::AdamOptions{.learning_rate = learning_rate_of(c, 0.001),
                           .beta_1 = number_or(c, "beta_1", 0.9),
                           .beta_2 = number_or(c, "beta_2", 0.999),
                           .epsilon = number_or(c, "epsilon", 1e-7),
                           .amsgrad = flag(c, "amsgrad"),
                           .weight_decay = number_option(c, "weight_decay")},
        c));
  if (kind == "adamw")
    return std::make_unique<optim::AdamW>(with_clipping(
        optim::AdamWOptions{.learning_rate = learning_rate_of(c, 0.001),
                            .weight_decay = number_or(c, "weight_decay", 0.004),
                            .beta_1 = number_or(c, "beta_1", 0.9),
                            .beta_2 = number_or(c, "beta_2", 0.999),
                            .epsilon = number_or(c, "epsilon", 1e-7),
                            .amsgrad = flag(c, "amsgrad")},
        c));
  if (kind == "adagrad")
    return std::make_unique<optim::Adagrad>(with_clipping(
        optim::AdagradOptions{.learning_rate = learning_rate_of(c, 0.001),
                              .initial_accumulator_value = number_or(c, "initial_accumulator_value", 0.1),
                              .epsilon = number_or(c, "epsilon", 1e-7),
                              .weight_decay = number_option(c, "weight_decay")},
        c));
  if (kind == "adamax")
    return std::make_unique<optim::Adamax>(with_clipping(
        optim::AdamaxOptions{.learning_rate = learning_rate_of(c, 0.001),
                             .beta_1 = number_or(c, "beta_1", 0.9),
                             .beta_2 = number_or(c, "beta_2", 0.999),
                             .epsilon = number_or(c, "epsilon", 1e-7),
                             .weight_decay = number_option(c, "weight_decay")},
        c));
  if (kind == "adadelta")
    return std::make_unique<optim::Adadelta>(with_clipping(
        optim::AdadeltaOptions{.learning_rate = learning_rate_of(c, 0.001),
                               .rho = number_or(c, "rho", 0.95),
                               .epsilon = number_or(c, "epsilon", 1e-7),
                               .weight_decay = number_option(c, "weight_decay")},
        c));
  if (kind == "lion")
    return std::make_unique<optim::Lion>(with_clipping(
        optim::LionOptions{.learning_rate = learning_rate_of(c, 0.001),
                           .beta_1 = number_or(c, "beta_1", 0.9),
                           .beta_2 = number_or(c, "beta_2", 0.99),
                           .weight_decay = number_option(c, "weight_decay")},
        c));
  REQUIRE(kind == "rmsprop");
  return std::make_unique<optim::RMSprop>(with_clipping(
      optim::RMSpropOptions{.learning_rate = learning_rate_of(c, 0.001),
                            .rho = number_or(c, "rho", 0.9),
                            .momentum = number_or(c, "momentum", 0.0),
                            .epsilon = number_or(c, "epsilon", 1e-7),
                            .centered = flag(c, "centered"),
                            .weight_decay = number_option(c, "weight_decay")},
      c));
}

/// Row `step` of a [steps, ...] fixture array.
std::vector<double> row(const FixtureArray& a, std::int64_t step) {
  const std::int64_t size = numel(a.shape) / a.shape[0];
  return {a.values.begin() + step * size, a.values.begin() + (step + 1) * size};
}

Tensor step_tensor(const FixtureArray& a, std::int64_t step) {
  return Tensor::from_vector(row(a, step), Shape(a.shape.begin() + 1, a.shape.end()));
}

/// The two variables of the fixtures, W [3, 2] and b [2], at their initial values.
std::vector<Variable> fixture_variables(const FixtureCase& inputs) {
  return {Variable(inputs.array("W0").tensor(), "W"), Variable(inputs.array("b0").tensor(), "b")};
}

/// The fixture's gradients for `step`; b has none before skip_b.
std::vector<Tensor> fixture_gradients(const FixtureCase& inputs, std::int64_t step, std::int64_t skip_b = 0) {
  return {step_tensor(inputs.array("gW"), step), step < skip_b ? Tensor() : step_tensor(inputs.array("gb"), step)};
}

}  // namespace

TEST_CASE("optimizers take Keras's steps for 20 fixed gradients", "[optim]") {
  const std::vector<FixtureCase> cases = read_fixture_cases("optimizer_fixtures.txt");
  REQUIRE(cases.size() > 1);
  const FixtureCase& inputs = cases[0];
  REQUIRE(inputs.name == "inputs");
  for (std::size_t k = 1; k < cases.size(); ++k) {
    const FixtureCase& c = cases[k];
    INFO("case " << c.name);
    std::unique_ptr<optim::Optimizer> opt = make_optimizer(c);
    std::vector<Variable> vars = fixture_variables(inputs);
    const auto skip_b = std::int64_t(number_or(c, "skip_b", 0.0));
    const FixtureArray& lr = c.array("lr");
    if (flag(c, "lr_float32")) {
      // Keras computed this schedule's cosine in float32: compare the rates at that precision, then replay
      // Keras's own rates so that the steps are compared at full precision.
      const optim::LearningRate schedule = learning_rate_of(c, 0.0);
      for (std::int64_t step = 0; step < lr.shape[0]; ++step)
        CHECK(schedule.at(step) == Approx(lr.values[std::size_t(step)]).epsilon(1e-6).margin(1e-9));
      opt->set_learning_rate([rates = lr.values](std::int64_t step) { return rates.at(std::size_t(step)); });
    }
    for (std::int64_t step = 0; step < lr.shape[0]; ++step) {
      INFO("step " << step);
      CHECK(opt->learning_rate() == Approx(lr.values[std::size_t(step)]).epsilon(kKerasTolerance).margin(1e-15));
      opt->apply_gradients(fixture_gradients(inputs, step, skip_b), vars);
      check_close(values(vars[0].value()), row(c.array("W"), step), kKerasTolerance);
      check_close(values(vars[1].value()), row(c.array("b"), step), kKerasTolerance);
    }
    CHECK(opt->iterations() == lr.shape[0]);
  }
}

TEST_CASE("float32 variables follow the float64 reference to float precision", "[optim]") {
  const std::vector<FixtureCase> cases = read_fixture_cases("optimizer_fixtures.txt");
  const FixtureCase& inputs = cases[0];
  for (const FixtureCase& c : cases) {
    if (c.name != "adamw_cosine_warmup" && c.name != "rmsprop_centered_momentum_clipnorm") continue;
    INFO("case " << c.name);
    std::unique_ptr<optim::Optimizer> opt = make_optimizer(c);
    std::vector<Variable> vars{Variable(inputs.array("W0").tensor(DType::f32), "W"),
                               Variable(inputs.array("b0").tensor(DType::f32), "b")};
    for (std::int64_t step = 0; step < 20; ++step) {
      std::vector<Tensor> grads = fixture_gradients(inputs, step);
      for (Tensor& g : grads) g = g.to(DType::f32);
      opt->apply_gradients(grads, vars);
    }
    REQUIRE(vars[0].dtype() == DType::f32);
    check_close(values(vars[0].value()), row(c.array("W"), 19), 1e-4);
    check_close(values(vars[1].value()), row(c.array("b"), 19), 1e-4);
  }
}

TEST_CASE("Adam with weight_decay steps exactly as AdamW", "[optim]") {
  const std::vector<FixtureCase> cases = read_fixture_cases("optimizer_fixtures.txt");
  const FixtureCase& inputs = cases[0];
  optim::Adam adam({.learning_rate = 0.01, .weight_decay = 0.1});
  optim::AdamW adamw({.learning_rate = 0.01, .weight_decay = 0.1});
  std::vector<Variable> a = fixture_variables(inputs), b = fixture_variables(inputs);
  for (std::int64_t step = 0; step < 5; ++step) {
    adam.apply_gradients(fixture_gradients(inputs, step), a);
    adamw.apply_gradients(fixture_gradients(inputs, step), b);
  }
  CHECK(values(a[0].value()) == values(b[0].value()));
  CHECK(values(a[1].value()) == values(b[1].value()));
  CHECK(adam.name() == "adam");
  CHECK(adamw.name() == "adamw");
}

TEST_CASE("optimizers keep Keras's defaults", "[optim]") {
  CHECK(optim::SGD().learning_rate() == 0.01);
  CHECK(optim::Adam().learning_rate() == 0.001);
  CHECK(optim::AdamW().learning_rate() == 0.001);
  CHECK(optim::RMSprop().learning_rate() == 0.001);
  CHECK(optim::SGD({.name = "mine"}).name() == "mine");
  // AdamW decays by default: one step with a zero gradient still shrinks the weight by lr * 0.004.
  optim::AdamW adamw;
  Variable w(vec({2.0}), "w");
  adamw.apply_gradients({vec({0.0})}, {w});
  CHECK(values(w.value())[0] == Approx(2.0 - 2.0 * 0.004 * 0.001).epsilon(1e-15));
}

TEST_CASE("the clipping options are mutually exclusive and positive", "[optim]") {
  REQUIRE_THROWS_WITH(optim::SGD({.clipnorm = 1.0, .clipvalue = 0.5}),
                      Catch::Contains("only one of clipnorm, clipvalue and global_clipnorm") &&
                          Catch::Contains("clipnorm=1") && Catch::Contains("clipvalue=0.5"));
  REQUIRE_THROWS_WITH(optim::Adam({.clipnorm = 1.0, .global_clipnorm = 1.0}), Catch::Contains("only one of"));
  REQUIRE_THROWS_WITH(optim::RMSprop({.clipvalue = 1.0, .global_clipnorm = 1.0}), Catch::Contains("only one of"));
  REQUIRE_THROWS_WITH(optim::AdamW({.clipnorm = 1.0, .clipvalue = 1.0, .global_clipnorm = 1.0}),
                      Catch::Contains("adamw") && Catch::Contains("only one of"));
  REQUIRE_THROWS_WITH(optim::SGD({.clipnorm = -1.0}), Catch::Contains("clipnorm must be"));
  REQUIRE_THROWS_WITH(optim::SGD({.clipvalue = 0.0}), Catch::Contains("clipvalue must be"));
  REQUIRE_NOTHROW(optim::SGD({.global_clipnorm = 2.0}));
}

TEST_CASE("optimizer arguments out of range are rejected", "[optim]") {
  REQUIRE_THROWS_WITH(optim::SGD({.momentum = 1.5}), Catch::Contains("SGD: momentum must be in [0, 1], got 1.5"));
  REQUIRE_THROWS_WITH(optim::SGD({.momentum = -0.1}), Catch::Contains("momentum"));
  REQUIRE_NOTHROW(optim::SGD({.momentum = 1.0}));
  REQUIRE_THROWS_WITH(optim::Adam({.beta_1 = 1.0}), Catch::Contains("beta_1 must be in [0, 1)"));
  REQUIRE_THROWS_WITH(optim::AdamW({.beta_2 = -0.5}), Catch::Contains("beta_2"));
  REQUIRE_THROWS_WITH(optim::Adam({.epsilon = -1e-7}), Catch::Contains("epsilon"));
  REQUIRE_THROWS_WITH(optim::AdamW({.weight_decay = -0.1}), Catch::Contains("weight_decay must be"));
  REQUIRE_THROWS_WITH(optim::RMSprop({.rho = 1.5}), Catch::Contains("rho"));
  REQUIRE_THROWS_WITH(optim::RMSprop({.momentum = 2.0}), Catch::Contains("momentum"));
  REQUIRE_THROWS_WITH(optim::SGD({.learning_rate = std::nan("")}), Catch::Contains("must be finite"));
}

TEST_CASE("learning_rate follows the schedule and set_learning_rate replaces it", "[optim]") {
  optim::SGD opt({.learning_rate = optim::ExponentialDecay({.initial_learning_rate = 0.1, .decay_steps = 2,
                                                            .decay_rate = 0.5, .staircase = true})});
  Variable w(vec({1.0, 2.0}), "w");
  const std::vector<double> expected{0.1, 0.1, 0.05, 0.05, 0.025};
  for (std::size_t step = 0; step < expected.size(); ++step) {
    CHECK(opt.iterations() == std::int64_t(step));
    CHECK(opt.learning_rate() == Approx(expected[step]).epsilon(1e-15));
    opt.apply_gradients({vec({1.0, 1.0})}, {w});
  }
  CHECK(opt.iterations() == 5);
  // w moved by the sum of the rates used: 0.1 + 0.1 + 0.05 + 0.05 + 0.025.
  check_close(values(w.value()), {1.0 - 0.325, 2.0 - 0.325}, 1e-15);

  opt.set_learning_rate(0.5);
  CHECK(opt.learning_rate() == 0.5);
  opt.apply_gradients({vec({1.0, 1.0})}, {w});
  check_close(values(w.value()), {1.0 - 0.825, 2.0 - 0.825}, 1e-15);
  opt.set_learning_rate([](std::int64_t step) { return 1.0 / double(step + 1); });
  CHECK(opt.learning_rate() == Approx(1.0 / 7.0));
  CHECK(opt.iterations() == 6);
}

TEST_CASE("slots are created on a variable's first update", "[optim]") {
  optim::Adam adam({.amsgrad = true});
  Variable w(Tensor::zeros(Shape{3, 2}, DType::f64), "w"), b(Tensor::zeros(Shape{2}, DType::f64), "b");
  CHECK(adam.count_params() == 0);
  adam.apply_gradients({Tensor::ones(Shape{3, 2}, DType::f64), Tensor()}, {w, b});
  CHECK(adam.count_params() == 2 + 3 * 6);  // iterations, learning_rate; m, v and v_hat of w (b: no gradient yet)
  CHECK(values(b.value()) == std::vector<double>{0.0, 0.0});
  adam.apply_gradients({Tensor::ones(Shape{3, 2}, DType::f64), Tensor::ones(Shape{2}, DType::f64)}, {w, b});
  CHECK(adam.count_params() == 2 + 3 * 8);
  CHECK(adam.iterations() == 2);

  optim::SGD plain;
  plain.apply_gradients({Tensor::ones(Shape{3, 2}, DType::f64)}, {w});
  CHECK(plain.count_params() == 2);  // plain SGD keeps no slots, only iterations and learning_rate
  optim::RMSprop rms({.momentum = 0.5, .centered = true});
  rms.apply_gradients({Tensor::ones(Shape{2}, DType::f64)}, {b});
  CHECK(rms.count_params() == 2 + 3 * 2);
  optim::SGD scheduled({.learning_rate = [](std::int64_t step) { return 0.1 / double(step + 1); }, .momentum = 0.9});
  scheduled.apply_gradients({Tensor::ones(Shape{2}, DType::f64)}, {b});
  CHECK(scheduled.count_params() == 1 + 2);  // a schedule is not a variable
}

TEST_CASE("state and load_state round trip gives identical next steps", "[optim]") {
  const std::vector<FixtureCase> cases = read_fixture_cases("optimizer_fixtures.txt");
  const FixtureCase& inputs = cases[0];
  const auto make = [] { return optim::RMSprop({.learning_rate = 0.01, .momentum = 0.5, .centered = true}); };
  optim::RMSprop original = make();
  std::vector<Variable> vars = fixture_variables(inputs);
  for (std::int64_t step = 0; step < 4; ++step) original.apply_gradients(fixture_gradients(inputs, step), vars);

  const auto entries = original.state(vars);
  REQUIRE(entries.size() == 1 + 2 * 3);
  CHECK(entries[0].first == "iteration");
  CHECK(entries[0].second.dtype() == DType::i64);
  CHECK(entries[0].second.item<std::int64_t>() == 4);
  CHECK(entries[1].first == "W/velocity");
  CHECK(entries[2].first == "W/momentum");
  CHECK(entries[3].first == "W/average_gradient");
  CHECK(entries[6].first == "b/average_gradient");

  // A second optimizer and a copy of the variables continue from the checkpoint.
  std::map<std::string, Tensor> checkpoint(entries.begin(), entries.end());
  checkpoint["model/unrelated"] = vec({1.0});  // other entries of a checkpoint are ignored
  std::vector<Variable> copies{Variable(vars[0].value(), "W"), Variable(vars[1].value(), "b")};
  optim::RMSprop restored = make();
  restored.load_state(checkpoint, copies);
  CHECK(restored.iterations() == 4);
  CHECK(restored.count_params() == original.count_params());
  for (std::int64_t step = 4; step < 8; ++step) {
    original.apply_gradients(fixture_gradients(inputs, step), vars);
    restored.apply_gradients(fixture_gradients(inputs, step), copies);
    CHECK(values(copies[0].value()) == values(vars[0].value()));
    CHECK(values(copies[1].value()) == values(vars[1].value()));
  }
  // And the run still matches Keras's.
  for (const FixtureCase& c : cases) {
    if (c.name == "rmsprop_centered_momentum") {
      check_close(values(vars[0].value()), row(c.array("W"), 7), kKerasTolerance);
      check_close(values(copies[1].value()), row(c.array("b"), 7), kKerasTolerance);
    }
  }
}

TEST_CASE("state of a variable not updated yet is its initial zeros", "[optim]") {
  optim::Adam adam;
  Variable w(vec({1.0, 2.0}), "w"), b(vec({3.0}), "b");
  adam.apply_gradients({vec({1.0, 1.0}), Tensor()}, {w, b});
  const auto entries = adam.state({w, b});
  REQUIRE(entries.size() == 5);
  CHECK(entries[3].first == "b/m");
  CHECK(values(entries[3].second) == std::vector<double>{0.0});
  CHECK(adam.count_params() == 2 + 4);  // state() creates nothing
}

TEST_CASE("load_state reports every mismatch and changes nothing", "[optim]") {
  optim::Adam adam;
  Variable w(vec({1.0, 2.0}), "dense/kernel"), b(vec({3.0}), "dense/bias");
  adam.apply_gradients({vec({1.0, 1.0}), vec({1.0})}, {w, b});
  auto entries = adam.state({w, b});
  std::map<std::string, Tensor> bad(entries.begin(), entries.end());
  bad.erase("dense/kernel/v");
  bad["dense/bias/m"] = vec({1.0, 2.0});
  bad["iteration"] = Tensor::scalar(3.0, DType::f64);

  optim::Adam fresh;
  try {
    fresh.load_state(bad, {w, b});
    FAIL("load_state accepted a mismatched state");
  } catch (const Error& e) {
    const std::string message = e.what();
    CHECK_THAT(message, Catch::Contains("load_state"));
    CHECK_THAT(message, Catch::Contains("'dense/kernel/v' is missing"));
    CHECK_THAT(message, Catch::Contains("'dense/bias/m' is f64 of shape [2], expected f64 of shape [1]"));
    CHECK_THAT(message, Catch::Contains("'iteration' is f64"));
  }
  CHECK(fresh.iterations() == 0);
  CHECK(fresh.count_params() == 0);
}

TEST_CASE("undefined gradients are skipped and all undefined is an error", "[optim]") {
  optim::SGD sgd({.learning_rate = 0.5});
  Variable w(vec({1.0}), "w"), b(vec({2.0}), "b");
  sgd.apply_gradients({Tensor(), vec({1.0})}, {w, b});
  CHECK(values(w.value()) == std::vector<double>{1.0});
  CHECK(values(b.value()) == std::vector<double>{1.5});
  REQUIRE_THROWS_WITH(sgd.apply_gradients({Tensor(), Tensor()}, {w, b}),
                      Catch::Contains("no gradient provided for any of the 2 variables"));
  CHECK(sgd.iterations() == 1);
}

TEST_CASE("apply_gradients checks counts, shapes and dtypes", "[optim]") {
  optim::Adam adam;
  Variable w(Tensor::zeros(Shape{3, 2}, DType::f64), "dense/kernel");
  REQUIRE_THROWS_WITH(adam.apply_gradients({Tensor::zeros(Shape{2, 3}, DType::f64)}, {w}),
                      Catch::Contains("'dense/kernel'") && Catch::Contains("[2, 3]") &&
                          Catch::Contains("[3, 2]"));
  REQUIRE_THROWS_WITH(adam.apply_gradients({Tensor::zeros(Shape{3, 2}, DType::f32)}, {w}),
                      Catch::Contains("'dense/kernel'") && Catch::Contains("dtype f32"));
  REQUIRE_THROWS_WITH(adam.apply_gradients({Tensor::zeros(Shape{3, 2}, DType::f64)}, {w, w}),
                      Catch::Contains("1 gradients for 2 variables"));
  Variable labels(Tensor::zeros(Shape{2}, DType::i64), "labels");
  REQUIRE_THROWS_WITH(adam.apply_gradients({Tensor::zeros(Shape{2}, DType::i64)}, {labels}),
                      Catch::Contains("only f32 and f64"));
  CHECK(adam.iterations() == 0);
  CHECK(adam.count_params() == 0);
}

TEST_CASE("apply_gradients records nothing on an active tape", "[optim]") {
  optim::Adam adam({.learning_rate = 0.1, .weight_decay = 0.01, .clipnorm = 1.0});
  Variable w(vec({1.0, -2.0}), "w");
  GradientTape tape({.persistent = true});
  const Tensor loss = ops::sum(ops::square(w.value()));
  const std::vector<Tensor> grads = tape.gradient(loss, std::vector<Variable>{w});
  const std::size_t recorded = tape.recorded_ops().size();
  adam.apply_gradients(grads, {w});
  CHECK(tape.recorded_ops().size() == recorded);
  CHECK(values(w.value()) != std::vector<double>{1.0, -2.0});
}

TEST_CASE("optim::get makes optimizers from Keras strings", "[optim]") {
  CHECK(optim::get("adam")->name() == "adam");
  CHECK(optim::get("Adam")->learning_rate() == 0.001);
  CHECK(optim::get("SGD")->learning_rate() == 0.01);
  CHECK(dynamic_cast<optim::SGD*>(optim::get("sgd").get()) != nullptr);
  CHECK(dynamic_cast<optim::AdamW*>(optim::get("ADAMW").get()) != nullptr);
  CHECK(dynamic_cast<optim::RMSprop*>(optim::get("RMSprop").get()) != nullptr);
  CHECK(dynamic_cast<optim::Adagrad*>(optim::get("Adagrad").get()) != nullptr);
  REQUIRE_THROWS_WITH(optim::get("adafactor"), Catch::Contains("unknown optimizer 'adafactor'") &&
                                                   Catch::Contains("adadelta, adagrad, adam, adamax, adamw, lion"));
}
