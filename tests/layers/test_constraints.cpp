// Constraints (layers/constraints/): Keras's projections on several axes, by name and as objects, applied by the
// optimizers after each update, and their bad inputs; against Keras 3 (tests/fixtures/make_regularizer_fixtures.py).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "loom.hpp"
#include "tests/bad_input_helpers.hpp"
#include "tests/fixture_reader.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;
namespace C = loom::layers::constraints;

namespace {

Axes axes_of(const std::string& text) {
  std::vector<std::int64_t> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    out.push_back(std::stoll(text.substr(start, comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return Axes(out);
}

L::Constraint constraint_of(const FixtureCase& c) {
  if (c.options.count("name")) return L::Constraint(c.option("name"));
  const auto number = [&](const std::string& key) { return std::stod(c.option(key)); };
  const std::string& k = c.option("class");
  if (k == "MaxNorm") return C::max_norm(number("max_value"), axes_of(c.option("axis")));
  if (k == "MinMaxNorm")
    return C::min_max_norm(number("min_value"), number("max_value"), number("rate"), axes_of(c.option("axis")));
  if (k == "NonNeg") return C::non_neg();
  REQUIRE(k == "UnitNorm");
  return C::unit_norm(axes_of(c.option("axis")));
}

}  // namespace

TEST_CASE("constraints project as Keras's on several axes in float64", "[constraints]") {
  static const auto cases = read_fixture_cases("regularizer_fixtures.txt");
  std::size_t n = 0;
  for (const auto& c : cases) {
    if (c.words.empty() || c.words.front() != "constraint") continue;
    ++n;
    INFO(c.name);
    const Tensor w = c.array("w").tensor();
    const Tensor out = constraint_of(c)(w);
    CHECK(out.shape() == w.shape());
    check_close(values(out), c.array("out").values, 1e-12);
  }
  CHECK(n == 15);
}

TEST_CASE("constraints by Keras name take Keras's defaults", "[constraints]") {
  CHECK(L::Constraint("max_norm").describe() == "MaxNorm(max_value=2, axis=0)");
  CHECK(L::Constraint("MaxNorm").describe() == "MaxNorm(max_value=2, axis=0)");
  CHECK(L::Constraint("min_max_norm").describe() == "MinMaxNorm(min_value=0, max_value=1, rate=1, axis=0)");
  CHECK(L::Constraint("non_neg").describe() == "NonNeg()");
  CHECK(L::Constraint("unit_norm").describe() == "UnitNorm(axis=0)");
  CHECK_FALSE(static_cast<bool>(L::Constraint()));
  // axis {} is Keras's None: the norm of the whole tensor.
  const Tensor w = f64({3, 4}, {2});
  check_close(values(C::unit_norm({})(w)), {3.0 / (5.0 + 1e-7), 4.0 / (5.0 + 1e-7)}, 1e-15);
}

TEST_CASE("optimizers apply each updated variable's constraint after the update", "[constraints]") {
  L::Dense dense(2, {.kernel_initializer = "ones", .bias_initializer = "ones", .kernel_constraint = "non_neg",
                     .bias_constraint = C::max_norm(0.5)});
  const Tensor x = f64({1, 2, 3}, {1, 3});
  dense.maybe_build(x.shape(), DType::f64);
  REQUIRE(dense.kernel().constraint());
  optim::SGD sgd({.learning_rate = 1.0});
  const std::vector<Variable> vars = dense.trainable_weights();
  // Kernel gradient 1.5 * x: the update makes row 0 -0.5, 1 - 3, 1 - 4.5; the constraint clips them to 0. The bias
  // becomes 1 - 1 = 0 per unit, then norm 0 is within 0.5.
  sgd.apply_gradients({f64({1.5, 1.5, 3, 3, 4.5, 4.5}, {3, 2}), f64({1, 1}, {2})}, vars);
  check_close(values(dense.kernel().value()), std::vector<double>(6, 0.0), 0.0);
  check_close(values(dense.bias().value()), {0.0, 0.0}, 0.0);
  // A variable without a gradient is not updated, and not projected.
  Variable(dense.bias()).assign(f64({3, 4}, {2}));  // a handle: the same variable
  sgd.apply_gradients({f64({-1, -1, -1, -1, -1, -1}, {3, 2}), Tensor()}, vars);
  check_close(values(dense.kernel().value()), std::vector<double>(6, 1.0), 0.0);
  check_close(values(dense.bias().value()), {3.0, 4.0}, 0.0);
  sgd.apply_gradients({Tensor(), f64({0, 0}, {2})}, vars);
  check_close(values(dense.bias().value()), {0.5 * 3.0 / (5.0 + 1e-7), 0.5 * 4.0 / (5.0 + 1e-7)}, 1e-15);
  // Every optimizer does it, after its own update (here Adam's).
  optim::Adam adam({.learning_rate = 0.1});
  L::Dense other(1, {.kernel_constraint = [](const Tensor& w) { return ops::clip(w, -0.01, 0.01); }});
  other.maybe_build({1, 4}, DType::f64);
  adam.apply_gradients({randn({4, 1}, 3), randn({1}, 4)}, other.trainable_weights());
  for (double v : values(other.kernel().value())) CHECK(std::abs(v) <= 0.01);
}

TEST_CASE("constraints reject bad input", "[constraints][bad_input]") {
  run_bad_inputs("constraints", {
      {"a negative max_value", [] { C::max_norm(-1.0); }, {"MaxNorm", "max_value", "-1", ">= 0"}},
      {"a NaN max_value", [] { C::max_norm(std::nan("")); }, {"MaxNorm", "max_value", "nan"}},
      {"min_value above max_value", [] { C::min_max_norm(2.0, 1.0); },
       {"MinMaxNorm", "min_value=2", "max_value=1"}},
      {"a rate above 1", [] { C::min_max_norm(0.0, 1.0, 1.5); }, {"MinMaxNorm", "rate", "1.5", "[0, 1]"}},
      {"an unknown name", [] { L::Constraint("max_norms"); }, {"Constraint", "unknown constraint 'max_norms'",
                                                               "max_norm", "unit_norm"}},
      {"an axis beyond the kernel's rank",
       [] {
         L::Dense layer(3, {.kernel_constraint = C::max_norm(2.0, 2), .name = "capped"});
         layer(randn({2, 4}, 1));
       },
       {"capped", "weight 'kernel'", "MaxNorm(max_value=2, axis=2)", "axis 2", "[4, 3]", "rank 2"}},
      {"a negative axis beyond the bias's rank",
       [] {
         L::Conv2D layer(2, {3, 3}, {.bias_constraint = C::unit_norm(-2), .name = "conv"});
         layer(randn({1, 5, 5, 1}, 1));
       },
       {"conv", "weight 'bias'", "UnitNorm(axis=-2)", "axis -2", "[2]", "rank 1"}},
      {"an axis given twice",
       [] {
         L::DepthwiseConv2D layer({2, 2}, {.depthwise_constraint = C::max_norm(1.0, {0, -4}), .name = "dw"});
         layer(randn({1, 4, 4, 2}, 1));
       },
       {"dw", "weight 'kernel'", "axis -4 is given twice", "[2, 2, 2, 1]"}},
      {"an axis out of range when applied directly", [] { C::unit_norm(3)(randn({2, 2}, 1)); },
       {"Constraint", "UnitNorm(axis=3)", "axis 3", "[2, 2]"}},
      {"a callable returning another shape",
       [] {
         L::Dense layer(2, {.kernel_constraint = [](const Tensor& w) { return ops::sum(w, {0}); },
                            .name = "summed"});
         layer.maybe_build({1, 3}, DType::f64);
         optim::SGD({.learning_rate = 0.1}).apply_gradients({randn({3, 2}, 1), randn({2}, 2)},
                                                            layer.trainable_weights());
       },
       {"summed/kernel", "constraint", "[2]", "[3, 2]"}},
  });
  // A constraint set on a Variable directly is checked by the Variable, which keeps its value.
  Variable v(f64({1, 2}, {2}), "v");
  v.set_constraint([](const Tensor& t) { return ops::reshape(t, {1, 2}); });
  run_bad_inputs("Variable::apply_constraint", {
      {"a constraint of another shape", [&] { v.apply_constraint(); }, {"Variable 'v'", "[1, 2]", "[2]"}},
  });
  check_close(values(v.value()), {1.0, 2.0}, 0.0);
}
