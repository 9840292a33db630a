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

constexpr double kKerasTolerance = 1e-12;  // measured: every value agrees within 1e-14

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

std::optional<std::int64_t> integer_option(const FixtureCase& c, const std::string& key) {
  if (!c.options.count(key)) return std::nullopt;
  return std::stoll(c.options.at(key));
}

/// Fills the options all optimizers share from the case (weight_decay is each optimizer's own field, set apart).
template <class Options>
Options with_shared_options(Options options, const FixtureCase& c) {
  options.clipnorm = number_option(c, "clipnorm");
  options.clipvalue = number_option(c, "clipvalue");
  options.global_clipnorm = number_option(c, "global_clipnorm");
  options.use_ema = flag(c, "use_ema");
  options.ema_momentum = number_or(c, "ema_momentum", 0.99);
  options.ema_overwrite_frequency = integer_option(c, "ema_overwrite_frequency");
  options.loss_scale_factor = number_option(c, "loss_scale_factor");
  options.gradient_accumulation_steps = integer_option(c, "gradient_accumulation_steps");
  return options;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const FixtureCase& c) {
  const std::string& kind = c.words.at(0);
  if (kind == "sgd")
    return std::make_unique<optim::SGD>(with_shared_options(
        optim::SGDOptions{.learning_rate = learning_rate_of(c, 0.01),
                          .momentum = number_or(c, "momentum", 0.0),
                          .nesterov = flag(c, "nesterov"),
                          .weight_decay = number_option(c, "weight_decay")},
        c));
  if (kind == "adam")
    return std::make_unique<optim::Adam>(with_shared_options(
        optim::AdamOptions{.learning_rate = learning_rate_of(c, 0.001),
                           .beta_1 = number_or(c, "beta_1", 0.9),
                           .beta_2 = number_or(c, "beta_2", 0.999),
                           .epsilon = number_or(c, "epsilon", 1e-7),
                           .amsgrad = flag(c, "amsgrad"),
                           .weight_decay = number_option(c, "weight_decay")},
        c));
  if (kind == "adamw")
    return std::make_unique<optim::AdamW>(with_shared_options(
        optim::AdamWOptions{.learning_rate = learning_rate_of(c, 0.001),
                            .weight_decay = number_or(c, "weight_decay", 0.004),
                            .beta_1 = number_or(c, "beta_1", 0.9),
                            .beta_2 = number_or(c, "beta_2", 0.999),
                            .epsilon = number_or(c, "epsilon", 1e-7),
                            .amsgrad = flag(c, "amsgrad")},
        c));
  if (kind == "adagrad")
    return std::make_unique<optim::Adagrad>(with_shared_options(
        optim::AdagradOptions{.learning_rate = learning_rate_of(c, 0.001),
                              .initial_accumulator_value = number_or(c, "initial_accumulator_value", 0.1),
                              .epsilon = number_or(c, "epsilon", 1e-7),
                              .weight_decay = number_option(c, "weight_decay")},
        c));
  if (kind == "adamax")
    return std::make_unique<optim::Adamax>(with_shared_options(
        optim::AdamaxOptions{.learning_rate = learning_rate_of(c, 0.001),
                             .beta_1 = number_or(c, "beta_1", 0.9),
                             .beta_2 = number_or(c, "beta_2", 0.999),
                             .epsilon = number_or(c, "epsilon", 1e-7),
                             .weight_decay = number_option(c, "weight_decay")},
        c));
  if (kind == "adadelta")
    return std::make_unique<optim::Adadelta>(with_shared_options(
        optim::AdadeltaOptions{.learning_rate = learning_rate_of(c, 0.001),
                               .rho = number_or(c, "rho", 0.95),
                               .epsilon = number_or(c, "epsilon", 1e-7),
                               .weight_decay = number_option(c, "weight_decay")},
        c));
  if (kind == "lion")
    return std::make_unique<optim::Lion>(with_shared_options(
        optim::LionOptions{.learning_rate = learning_rate_of(c, 0.001),
                           .beta_1 = number_or(c, "beta_1", 0.9),
                           .beta_2 = number_or(c, "beta_2", 0.99),
                           .weight_decay = number_option(c, "weight_decay")},
        c));
  if (kind == "nadam")
    return std::make_unique<optim::Nadam>(with_shared_options(
        optim::NadamOptions{.learning_rate = learning_rate_of(c, 0.001),
                            .beta_1 = number_or(c, "beta_1", 0.9),
                            .beta_2 = number_or(c, "beta_2", 0.999),
                            .epsilon = number_or(c, "epsilon", 1e-7),
                            .weight_decay = number_option(c, "weight_decay")},
        c));
  if (kind == "adafactor")
    return std::make_unique<optim::Adafactor>(with_shared_options(
        optim::AdafactorOptions{.learning_rate = learning_rate_of(c, 0.001),
                                .beta_2_decay = number_or(c, "beta_2_decay", -0.8),
                                .epsilon_1 = number_or(c, "epsilon_1", 1e-30),
                                .epsilon_2 = number_or(c, "epsilon_2", 1e-3),
                                .clip_threshold = number_or(c, "clip_threshold", 1.0),
                                .relative_step = c.option_or("relative_step", "1") == "1",
                                .weight_decay = number_option(c, "weight_decay")},
        c));
  REQUIRE(kind == "rmsprop");
  return std::make_unique<optim::RMSprop>(with_shared_options(
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

/// The two variables of the fixtures, W [3, 2] and b [2], at their initial values, and T [2, 3, 4] with_t.
std::vector<Variable> fixture_variables(const FixtureCase& inputs, bool with_t = false) {
  std::vector<Variable> vars{Variable(inputs.array("W0").tensor(), "W"), Variable(inputs.array("b0").tensor(), "b")};
  if (with_t) vars.emplace_back(inputs.array("T0").tensor(), "T");
  return vars;
}

/// The fixture's gradients for `step`, times `scale`; b has none before skip_b.
std::vector<Tensor> fixture_gradients(const FixtureCase& inputs, std::int64_t step, std::int64_t skip_b = 0,
                                      bool with_t = false, double scale = 1.0) {
  std::vector<Tensor> grads{step_tensor(inputs.array("gW"), step) * scale,
                            step < skip_b ? Tensor() : step_tensor(inputs.array("gb"), step) * scale};
  if (with_t) grads.push_back(step_tensor(inputs.array("gT"), step) * scale);
  return grads;
}

/// The shape and kind a keras_vars entry names: "f3x2" a float [3, 2], "f" a float scalar, "i" an integer one.
std::pair<bool, Shape> keras_variable_kind(const std::string& entry) {
  Shape shape;
  std::istringstream in(entry.substr(1));
  for (std::string dim; std::getline(in, dim, 'x');) shape.push_back(std::stoll(dim));
  return {entry[0] == 'f', shape};
}

/// The optimizer's state entries by name.
std::map<std::string, Tensor> state_map(const optim::Optimizer& opt, const std::vector<Variable>& vars) {
  const auto entries = opt.state(vars);
  return {entries.begin(), entries.end()};
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
    const bool with_t = flag(c, "with_t");
    std::vector<Variable> vars = fixture_variables(inputs, with_t);
    const auto skip_b = std::int64_t(number_or(c, "skip_b", 0.0));
    const double scale = number_or(c, "loss_scale_factor", 1.0);
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
      opt->apply_gradients(fixture_gradients(inputs, step, skip_b, with_t, scale), vars);
      const std::map<std::string, Tensor> state = state_map(*opt, vars);
      for (const Variable& var : vars) {
        check_close(values(var.value()), row(c.array(var.name()), step), kKerasTolerance);
        if (c.has("a" + var.name()))  // use_ema: the moving average after the step
          check_close(values(state.at(var.name() + "/average")), row(c.array("a" + var.name()), step),
                      kKerasTolerance);
      }
      if (c.has("it")) CHECK(double(opt->iterations()) == c.array("it").values[std::size_t(step)]);
    }
    CHECK(opt->apply_count() == lr.shape[0]);
    // mean_float64 (Adafactor): the rows are Keras's formula in float64; Keras's JAX ops.mean rounds to float32,
    // which Adafactor's root-mean-square normalisation amplifies to at most 4e-5 relative over the 20 steps.
    if (flag(c, "mean_float64"))
      for (const Variable& var : vars) check_close(values(var.value()), c.array("k" + var.name()).values, 1e-4, 1e-5);
    CHECK(opt->iterations() == lr.shape[0] / integer_option(c, "gradient_accumulation_steps").value_or(1));
    // Keras's optimizer.variables after iteration and learning_rate: the order .weights.h5 files hold them in.
    const std::vector<std::string> order = opt->keras_variable_order(vars);
    std::vector<std::string> kinds;
    std::istringstream listed(c.option_or("keras_vars", ""));
    for (std::string entry; std::getline(listed, entry, ',');) kinds.push_back(entry);
    REQUIRE(order.size() == kinds.size());
    const std::map<std::string, Tensor> state = state_map(*opt, vars);
    for (std::size_t i = 0; i < order.size(); ++i) {
      INFO("Keras optimizer variable " << i << " is " << kinds[i] << ", loom's " << order[i]);
      const auto [floating, shape] = keras_variable_kind(kinds[i]);
      CHECK(state.at(order[i]).shape() == shape);
      CHECK((state.at(order[i]).dtype() != DType::i64) == floating);
    }
    // use_ema: finalize_variable_values gives the variables their averages, as Model::fit does at its end.
    opt->finalize_variable_values(vars);
    for (const Variable& var : vars) {
      const std::string finalized = c.has("f" + var.name()) ? "f" + var.name() : var.name();
      const FixtureArray& want = c.array(finalized);
      check_close(values(var.value()), finalized[0] == 'f' ? want.values : row(want, lr.shape[0] - 1),
                  kKerasTolerance);
    }
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
  CHECK(dynamic_cast<optim::Nadam*>(optim::get("Nadam").get()) != nullptr);
  CHECK(dynamic_cast<optim::Adafactor*>(optim::get("adafactor").get()) != nullptr);
  CHECK(optim::get("nadam")->name() == "nadam");
  CHECK(optim::get("adafactor")->name() == "adafactor");
  REQUIRE_THROWS_WITH(optim::get("ftrl"), Catch::Contains("optim::get: unknown optimizer 'ftrl'") &&
                                              Catch::Contains("adadelta, adafactor, adagrad, adam, adamax, adamw"));
}

TEST_CASE("the shared options out of range are loom::Errors naming the optimizer and the option",
          "[optim][bad_input]") {
  REQUIRE_THROWS_WITH(optim::Adam({.use_ema = true, .ema_momentum = 1.5}),
                      Catch::Contains("adam: ema_momentum must be in [0, 1]") && Catch::Contains("1.5"));
  REQUIRE_THROWS_WITH(optim::SGD({.use_ema = true, .ema_momentum = -0.1}),
                      Catch::Contains("sgd: ema_momentum") && Catch::Contains("-0.1"));
  REQUIRE_THROWS_WITH(optim::Nadam({.use_ema = true, .ema_overwrite_frequency = 0}),
                      Catch::Contains("nadam: ema_overwrite_frequency must be >= 1") && Catch::Contains("got 0"));
  // As Keras, the moving-average options are checked only when use_ema is on.
  REQUIRE_NOTHROW(optim::Adam({.ema_momentum = 1.5, .ema_overwrite_frequency = -1}));
  REQUIRE_NOTHROW(optim::Adam({.use_ema = true, .ema_momentum = 1.0, .ema_overwrite_frequency = 1}));
  for (const std::int64_t steps : {1, 0, -3})
    REQUIRE_THROWS_WITH(optim::RMSprop({.gradient_accumulation_steps = steps}),
                        Catch::Contains("rmsprop: gradient_accumulation_steps must be >= 2") &&
                            Catch::Contains(fmt::format("got {}", steps)));
  for (const double factor : {0.0, -2.0, std::nan(""), double(INFINITY)})
    REQUIRE_THROWS_WITH(optim::Adafactor({.loss_scale_factor = factor}),
                        Catch::Contains("adafactor: loss_scale_factor must be a finite number > 0"));
  REQUIRE_THROWS_WITH(optim::Nadam({.beta_1 = 1.5}), Catch::Contains("Nadam: beta_1 must be in [0, 1], got 1.5"));
  REQUIRE_THROWS_WITH(optim::Nadam({.beta_2 = 1.0}), Catch::Contains("Nadam: beta_2 must be in [0, 1), got 1"));
  REQUIRE_THROWS_WITH(optim::Nadam({.epsilon = -1e-7}), Catch::Contains("Nadam: epsilon"));
  REQUIRE_THROWS_WITH(optim::Nadam({.weight_decay = -0.5}), Catch::Contains("nadam: weight_decay"));
  REQUIRE_THROWS_WITH(optim::Adafactor({.clip_threshold = 0.0}),
                      Catch::Contains("Adafactor: clip_threshold must be a finite number > 0, got 0"));
  REQUIRE_THROWS_WITH(optim::Adafactor({.epsilon_1 = -1.0}), Catch::Contains("Adafactor: epsilon_1"));
  REQUIRE_THROWS_WITH(optim::Adafactor({.epsilon_2 = std::nan("")}), Catch::Contains("Adafactor: epsilon_2"));
  REQUIRE_THROWS_WITH(optim::Adafactor({.beta_2_decay = double(INFINITY)}), Catch::Contains("Adafactor: beta_2_decay"));
  REQUIRE_THROWS_WITH(optim::Adafactor({.clipnorm = 1.0, .clipvalue = 1.0}),
                      Catch::Contains("adafactor: only one of clipnorm, clipvalue and global_clipnorm"));
  REQUIRE_THROWS_WITH(optim::get("lamb"), Catch::Contains("optim::get: unknown optimizer 'lamb'") &&
                                              Catch::Contains("nadam, rmsprop, sgd"));

  // finalize_variable_values knows only the variables of the first step.
  optim::SGD sgd({.use_ema = true});
  Variable w(vec({1.0}), "w"), other(vec({2.0}), "other");
  sgd.apply_gradients({vec({1.0})}, {w});
  REQUIRE_THROWS_WITH(sgd.finalize_variable_values({w, other}),
                      Catch::Contains("sgd.finalize_variable_values: variable 'other'") &&
                          Catch::Contains("moving averages"));
  CHECK(values(w.value()) == std::vector<double>{1.0 - 0.01});  // nothing changed
}

TEST_CASE("scale_loss multiplies by loss_scale_factor and the step divides the gradients by it", "[optim]") {
  optim::Adam scaled({.learning_rate = 0.1, .loss_scale_factor = 512.0});
  optim::Adam plain({.learning_rate = 0.1});
  CHECK(values(plain.scale_loss(vec({3.0}))) == std::vector<double>{3.0});
  CHECK(values(scaled.scale_loss(vec({3.0}))) == std::vector<double>{1536.0});
  // scale_loss is part of the loss: the tape differentiates through it.
  const Tensor x = Tensor::randn({3}, DType::f64, 11);
  require_gradcheck([&](const std::vector<Tensor>& in) { return scaled.scale_loss(ops::sum(ops::square(in[0]))); },
                    {x});
  Variable a(vec({1.0, -2.0}), "a"), b(vec({1.0, -2.0}), "b");
  for (int step = 0; step < 3; ++step) {
    {
      GradientTape tape;
      scaled.apply_gradients(tape.gradient(scaled.scale_loss(ops::sum(ops::square(a.value()))),
                                           std::vector<Variable>{a}),
                             {a});
    }
    GradientTape tape;
    plain.apply_gradients(tape.gradient(ops::sum(ops::square(b.value())), std::vector<Variable>{b}), {b});
  }
  check_close(values(a.value()), values(b.value()), 1e-15);
}

TEST_CASE("gradient accumulation changes the variables every N-th call with the mean gradient", "[optim]") {
  optim::SGD accumulating({.learning_rate = [](std::int64_t step) { return 0.1 * double(step + 1); },
                           .gradient_accumulation_steps = 3});
  Variable w(vec({1.0}), "w");
  const std::vector<double> grads{1.0, 2.0, 6.0, 3.0, 3.0, 0.0};
  const std::vector<double> after{1.0, 1.0, 1.0 - 0.3 * 3.0, 0.1, 0.1, 0.1 - 0.6 * 2.0};
  for (std::size_t k = 0; k < grads.size(); ++k) {
    // The schedule sees every call; iterations() counts the updates.
    CHECK(accumulating.learning_rate() == Approx(0.1 * double(k + 1)));
    accumulating.apply_gradients({vec({grads[k]})}, {w});
    CHECK(values(w.value())[0] == Approx(after[k]).epsilon(1e-14).margin(1e-15));
    CHECK(accumulating.apply_count() == std::int64_t(k + 1));
    CHECK(accumulating.iterations() == std::int64_t(k + 1) / 3);
  }
  CHECK(accumulating.count_params() == 1 + 1);  // iterations (a schedule is no variable), w's accumulator
}

TEST_CASE("state and load_state carry the averages and accumulators and factored slots and u_product", "[optim]") {
  const std::vector<FixtureCase> cases = read_fixture_cases("optimizer_fixtures.txt");
  const FixtureCase& inputs = cases[0];
  const auto nadam = [] {
    return std::make_unique<optim::Nadam>(optim::NadamOptions{
        .learning_rate = 0.01, .use_ema = true, .ema_overwrite_frequency = 3, .gradient_accumulation_steps = 2});
  };
  const auto adafactor = [] {
    return std::make_unique<optim::Adafactor>(optim::AdafactorOptions{.learning_rate = 0.3, .use_ema = true});
  };
  for (int which = 0; which < 2; ++which) {
    std::unique_ptr<optim::Optimizer> original =
        which == 0 ? std::unique_ptr<optim::Optimizer>(nadam()) : std::unique_ptr<optim::Optimizer>(adafactor());
    std::unique_ptr<optim::Optimizer> restored =
        which == 0 ? std::unique_ptr<optim::Optimizer>(nadam()) : std::unique_ptr<optim::Optimizer>(adafactor());
    INFO(original->name());
    std::vector<Variable> vars = fixture_variables(inputs, true);
    for (std::int64_t step = 0; step < 5; ++step)  // 5 calls: Nadam's accumulator holds the 5th gradient
      original->apply_gradients(fixture_gradients(inputs, step, 0, true), vars);
    const auto entries = original->state(vars);
    std::vector<std::string> keys;
    for (const auto& [key, value] : entries) keys.push_back(key);
    if (which == 0) {
      CHECK(keys == std::vector<std::string>{"iteration", "W/average", "W/gradient_accumulator", "W/momentum",
                                             "W/velocity", "b/average", "b/gradient_accumulator", "b/momentum",
                                             "b/velocity", "T/average", "T/gradient_accumulator", "T/momentum",
                                             "T/velocity", "u_product"});
      CHECK(original->keras_variable_order(vars) ==
            std::vector<std::string>{"W/average", "b/average", "T/average", "W/gradient_accumulator",
                                     "b/gradient_accumulator", "T/gradient_accumulator", "W/momentum", "W/velocity",
                                     "b/momentum", "b/velocity", "T/momentum", "T/velocity", "u_product"});
      CHECK(values(state_map(*original, vars).at("W/gradient_accumulator")) ==
            values(fixture_gradients(inputs, 4)[0]));
    } else {
      const auto state = state_map(*original, vars);
      CHECK(state.at("W/r").shape() == Shape{3});
      CHECK(state.at("W/c").shape() == Shape{2});
      CHECK(state.at("T/r").shape() == Shape{2, 3});
      CHECK(state.at("T/c").shape() == Shape{2, 4});
      CHECK(state.at("b/r").dtype() == DType::i64);
      CHECK(state.at("b/r").shape() == Shape{});
      // iterations, learning_rate; r, c and velocity of W, b (unused scalars r and c) and T; the averages
      CHECK(original->count_params() == 2 + (3 + 2 + 6) + (1 + 1 + 2) + (6 + 8 + 24) + (6 + 2 + 24));
    }
    std::vector<Variable> copies;
    for (const Variable& var : vars) copies.emplace_back(var.value(), var.name());
    restored->load_state({entries.begin(), entries.end()}, copies);
    CHECK(restored->count_params() == original->count_params());
    for (std::int64_t step = 5; step < 12; ++step) {
      original->apply_gradients(fixture_gradients(inputs, step, 0, true), vars);
      restored->apply_gradients(fixture_gradients(inputs, step, 0, true), copies);
      for (std::size_t i = 0; i < vars.size(); ++i) CHECK(values(copies[i].value()) == values(vars[i].value()));
    }
    original->finalize_variable_values(vars);
    restored->finalize_variable_values(copies);
    for (std::size_t i = 0; i < vars.size(); ++i) CHECK(values(copies[i].value()) == values(vars[i].value()));
  }
}

namespace {

/// A stand-in for DistributedOptimizer's hook: counts its calls and doubles every gradient.
class DoublingAggregator final : public optim::GradientAggregator {
 public:
  std::vector<Tensor> aggregate(const std::vector<Tensor>& grads, const std::vector<Variable>&) override {
    ++calls;
    std::vector<Tensor> out;
    for (const Tensor& g : grads) out.push_back(g.defined() ? g * 2.0 : g);
    return out;
  }
  void set_next_weight(double) override {}
  int calls = 0;
};

}  // namespace

TEST_CASE("with an aggregation hook every call aggregates: accumulation and averages see the combined gradients",
          "[optim]") {
  const std::vector<FixtureCase> cases = read_fixture_cases("optimizer_fixtures.txt");
  const FixtureCase& inputs = cases[0];
  const optim::AdamOptions options{.learning_rate = 0.01, .use_ema = true, .ema_overwrite_frequency = 2,
                                   .gradient_accumulation_steps = 3};
  optim::Adam hooked(options), reference(options);
  auto aggregator = std::make_shared<DoublingAggregator>();
  hooked.set_gradient_aggregator(aggregator);
  std::vector<Variable> a = fixture_variables(inputs), b = fixture_variables(inputs);
  for (std::int64_t step = 0; step < 10; ++step) {
    hooked.apply_gradients(fixture_gradients(inputs, step), a);
    reference.apply_gradients(fixture_gradients(inputs, step, 0, false, 2.0), b);
    CHECK(values(a[0].value()) == values(b[0].value()));
    CHECK(values(a[1].value()) == values(b[1].value()));
  }
  CHECK(aggregator->calls == 10);  // the calls that only accumulate aggregate too, so every process agrees
  CHECK(hooked.iterations() == 3);
}
