// The merge layers (Add, Subtract, Multiply, Average, Maximum, Minimum, Concatenate): values and masks against
// Keras (tests/fixtures/make_merging_pooling_fixtures.py), float64 gradchecks with and without masks, shape
// rules and errors, and use on symbolic tensors inside Functional models.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "loom.hpp"
#include "tests/bad_input_helpers.hpp"
#include "tests/layers/merging_pooling_fixtures.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

namespace {

/// A fresh merge layer of Keras class `name` (Concatenate with the case's axis).
std::shared_ptr<L::Merge> make_merge(const std::string& name, std::int64_t axis = -1) {
  if (name == "Add") return std::make_shared<L::Add>();
  if (name == "Subtract") return std::make_shared<L::Subtract>();
  if (name == "Multiply") return std::make_shared<L::Multiply>();
  if (name == "Average") return std::make_shared<L::Average>();
  if (name == "Maximum") return std::make_shared<L::Maximum>();
  if (name == "Minimum") return std::make_shared<L::Minimum>();
  if (name == "Concatenate") return std::make_shared<L::Concatenate>(L::ConcatenateOptions{.axis = axis});
  FAIL("unknown merge layer " << name);
  return nullptr;
}

const std::vector<std::string> kMerges = {"Add", "Subtract", "Multiply", "Average", "Maximum", "Minimum",
                                          "Concatenate"};

}  // namespace

TEST_CASE("Merge layers match Keras: values and output masks, f64 and f32", "[layers][merging]") {
  for (const auto& name : kMerges)
    for (const auto& c : merging_pooling_cases(name))
      for (DType dtype : {DType::f64, DType::f32}) {
        auto layer = make_merge(name, std::stoll(c.option_or("axis", "-1")));
        check_fixture_output(c, (*layer)(fixture_inputs(c, dtype)));
      }
}

TEST_CASE("Merge layers have Keras's class names, auto-names and options", "[layers][merging]") {
  L::reset_layer_names();
  for (const auto& name : kMerges) CHECK(make_merge(name)->class_name() == name);
  CHECK(L::Add().name() == "add_1");  // make_merge made "add" above
  CHECK(L::Concatenate().axis() == -1);
  CHECK(L::Concatenate({.axis = 1, .name = "cat"}).axis() == 1);
  CHECK(L::Concatenate({.axis = 1, .name = "cat"}).name() == "cat");
  CHECK(L::GlobalAveragePooling1D().supports_masking());
  CHECK(L::Maximum().supports_masking());
}

TEST_CASE("Merge layers pass gradcheck in float64, with and without masks", "[layers][merging]") {
  const Tensor a = randn({2, 3, 4}, 1), b = randn({2, 3, 4}, 2), c = randn({2, 3, 4}, 3);
  const Tensor ma = bool_mask({1, 0, 1, 1, 1, 0}, {2, 3}), mb = bool_mask({0, 0, 1, 1, 0, 1}, {2, 3});
  for (const auto& name : kMerges) {
    INFO(name);
    auto layer = make_merge(name);
    const bool two = name == "Subtract";
    require_gradcheck([&](const std::vector<Tensor>& in) { return (*layer)(in); },
                      two ? std::vector<Tensor>{a, b} : std::vector<Tensor>{a, b, c});
    // Masks on every input, and on the first one only.
    require_gradcheck(
        [&](const std::vector<Tensor>& in) { return (*layer)({in[0].with_keras_mask(ma), in[1].with_keras_mask(mb)}); },
        {a, b});
    require_gradcheck([&](const std::vector<Tensor>& in) { return (*layer)({in[0].with_keras_mask(ma), in[1]}); },
                      {a, b});
  }
  // Broadcasting and rank expansion.
  require_gradcheck([](const std::vector<Tensor>& in) { return L::Multiply()(in); },
                    {randn({2, 3, 4}, 4), randn({2, 1, 4}, 5), randn({2, 4}, 6)});
  require_gradcheck([](const std::vector<Tensor>& in) { return L::Concatenate({.axis = 1})(in); },
                    {randn({2, 3, 4}, 7), randn({2, 2, 4}, 8)});
}

TEST_CASE("Merge layers follow Keras's shape rules", "[layers][merging]") {
  L::Add add;
  CHECK(add.compute_output_shape(std::vector<Shape>{{-1, 3, 4}, {-1, 1, 4}}) == Shape{-1, 3, 4});
  CHECK(add.compute_output_shape(std::vector<Shape>{{2, 3, 4}, {2, 4}}) == Shape{2, 3, 4});
  CHECK(add.compute_output_shape(std::vector<Shape>{{-1, 3, -1}, {2, 3, 5}}) == Shape{2, 3, -1});
  // A lower-rank input gets its new axes after the batch axis, as Keras: [2, 3] meets [2, 3, 4] as [2, 1, 3], a
  // shape error where NumPy would broadcast (the bad-input battery below), and [2, 1] meets [2, 3] as is.
  CHECK(values(add({f64({1, 2}, {2, 1}), f64({10, 20, 30, 40, 50, 60}, {2, 3})})) ==
        std::vector<double>{11, 21, 31, 42, 52, 62});
  L::Concatenate cat({.axis = 1});
  CHECK(cat.compute_output_shape(std::vector<Shape>{{-1, 3, 4}, {-1, 2, 4}}) == Shape{-1, 5, 4});
  CHECK(cat.compute_output_shape(std::vector<Shape>{{-1, -1, 4}, {-1, 2, 4}}) == Shape{-1, -1, 4});
  const Tensor y = cat({randn({2, 3, 4}, 1), randn({2, 2, 4}, 2)});
  CHECK(y.shape() == Shape{2, 5, 4});
  CHECK(cat.last_output_shape() == Shape{2, 5, 4});
}

TEST_CASE("Merge layers reject bad inputs with errors naming the layer and the shapes", "[layers][merging]") {
  L::reset_layer_names();
  const Tensor a = randn({2, 3, 4}, 1);
  const Tensor bad = a.with_keras_mask(bool_mask({1, 0, 1, 1, 0}, {5}));  // not [2, 3]
  auto sub = std::make_shared<L::Subtract>(L::SubtractOptions{.name = "sub"});
  auto add = std::make_shared<L::Add>(L::AddOptions{.name = "plus"});
  auto mul = std::make_shared<L::Multiply>(L::MultiplyOptions{.name = "times"});
  auto max = std::make_shared<L::Maximum>(L::MaximumOptions{.name = "most"});
  auto min = std::make_shared<L::Minimum>(L::MinimumOptions{.name = "least"});
  auto cat = std::make_shared<L::Concatenate>(L::ConcatenateOptions{.axis = 1, .name = "cat"});
  auto far = std::make_shared<L::Concatenate>(L::ConcatenateOptions{.axis = 3, .name = "far"});
  run_bad_inputs("merge layers", {
      {"Subtract of three inputs", [&] { (*sub)({a, a, a}); }, {"sub", "exactly 2 inputs", "got 3"}},
      {"Subtract of one input", [&] { (*sub)({a}); }, {"sub", "exactly 2 inputs", "got 1"}},
      {"no inputs", [&] { (*add)(std::vector<Tensor>{}); }, {"plus", "at least one input", "got 0"}},
      {"incompatible shapes", [&] { (*add)({a, randn({2, 5, 4}, 2)}); },
       {"plus", "incompatible", "[2, 3, 4]", "[2, 5, 4]"}},
      {"a lower-rank input meets the other axes after the batch axis", [&] { (*add)({a, randn({2, 3}, 2)}); },
       {"plus", "incompatible", "[2, 3, 4]", "[2, 3]"}},
      {"batch sizes differ", [&] { (*add)({a, randn({3, 3, 4}, 2)}); }, {"plus", "batch sizes", "[3, 3, 4]"}},
      {"dtypes differ", [&] { (*add)({a, randn({2, 3, 4}, 2, DType::f32)}); }, {"plus", "f32", "f64"}},
      {"an undefined input", [&] { (*add)({a, Tensor()}); }, {"plus", "input 1 is undefined"}},
      {"an integer input", [&] { (*add)({i64({1, 2}, {2, 1})}); }, {"plus", "i64"}},
      {"a scalar input", [&] { (*add)({Tensor::scalar(1.0, DType::f64)}); }, {"plus", "batch axis"}},
      {"compute_mask with a mask too few", [&] { add->compute_mask({a, a}, {Tensor()}); },
       {"plus", "1 masks", "2 inputs"}},
      {"masks that do not broadcast",
       [&] { add->compute_mask({a, a}, {bool_mask({1, 0, 1, 1, 0, 1}, {2, 3}), bool_mask({1, 0, 1, 0}, {1, 4})}); },
       {"plus", "[2, 3]", "[1, 4]"}},
      {"Multiply: a mask that does not fit its input", [&] { (*mul)({bad, a}); }, {"times", "[5]", "[2, 3, 4]"}},
      {"Maximum: a mask that does not fit its input", [&] { (*max)({a, bad}); },
       {"most", "input 1", "[5]", "[2, 3, 4]"}},
      {"Minimum: a mask that does not fit its input", [&] { (*min)({bad, bad}); }, {"least", "[5]", "[2, 3, 4]"}},
      {"Concatenate: sizes differ off the axis", [&] { (*cat)({a, randn({2, 3, 5}, 2)}); },
       {"cat", "concatenation axis", "[2, 3, 4]", "[2, 3, 5]"}},
      {"Concatenate: ranks differ", [&] { (*cat)({a, randn({2, 3}, 2)}); }, {"cat", "one rank", "[2, 3]"}},
      {"Concatenate: axis out of range", [&] { (*far)({a, a}); }, {"far", "3"}},
      {"Concatenate: a mask that does not fit its input", [&] { (*cat)({bad, a}); }, {"cat", "[5]", "[2, 3, 4]"}},
      {"Concatenate: a full-rank mask of another shape",
       [&] { (*cat)({a.with_keras_mask(Tensor::ones({2, 3, 5}, DType::boolean)), a}); },
       {"cat", "[2, 3, 5]", "[2, 3, 4]"}},
  });
}

TEST_CASE("Merge layers work on symbolic tensors inside Functional models", "[layers][merging][functional]") {
  L::reset_layer_names();
  const Tensor x = randn({5, 4, 3}, 1), y = randn({5, 4, 3}, 2);
  for (const auto& name : kMerges) {
    INFO(name);
    Tensor a = loom::Input({4, 3}, {.dtype = DType::f64});
    Tensor b = loom::Input({4, 3}, {.dtype = DType::f64});
    auto layer = make_merge(name);
    Tensor out = (*layer)({a, b});
    CHECK(out.shape() == (name == "Concatenate" ? Shape{-1, 4, 6} : Shape{-1, 4, 3}));
    loom::Model m({a, b}, out);
    const auto got = m.predict({x, y}, {.verbose = 0});
    REQUIRE(got.size() == 1);
    check_close(values(got[0]), values((*layer)({x, y})));
  }
  // Temporaries move into the graph; a shape error shows when the graph is built.
  Tensor a = loom::Input({4, 3}, {.dtype = DType::f64});
  Tensor b = loom::Input({4, 3}, {.dtype = DType::f64});
  Tensor out = L::Concatenate()({a, b});
  out = L::Add()({out, L::Concatenate()({b, a})});
  loom::Model m({a, b}, out);
  check_close(values(m.predict({x, y}, {.verbose = 0})[0]), values(ops::concat({x, y}, -1) + ops::concat({y, x}, -1)));
  CHECK_THROWS_WITH(L::Add()({a, loom::Input({5, 3}, {.dtype = DType::f64})}),
                    Catch::Contains("add") && Catch::Contains("[-1, 5, 3]"));
}

TEST_CASE("Masks flow through merge layers in a Functional graph", "[layers][merging][functional]") {
  L::reset_layer_names();
  Tensor ta = loom::Input({4}, {.dtype = DType::i64});
  Tensor tb = loom::Input({4}, {.dtype = DType::i64});
  L::Embedding ea(10, 3, {.mask_zero = true}), eb(10, 3, {.mask_zero = true});
  Tensor ha = ea(ta), hb = eb(tb);
  REQUIRE(ha.keras_mask().defined());
  Tensor cat = L::Concatenate()({ha, hb});
  REQUIRE(cat.keras_mask().defined());
  CHECK(cat.keras_mask().shape() == Shape{-1, 4});
  Tensor steps = L::Concatenate({.axis = 1})({ha, hb});
  CHECK(steps.keras_mask().shape() == Shape{-1, 8});
  Tensor pooled = L::GlobalAveragePooling1D()(L::Maximum()({ha, hb}));
  loom::Model m({ta, tb}, {L::GlobalAveragePooling1D()(cat), L::GlobalAveragePooling1D()(steps), pooled});
  const Tensor ia = i64({1, 2, 0, 0, 3, 0, 4, 0}, {2, 4}), ib = i64({5, 0, 0, 0, 6, 7, 8, 9}, {2, 4});
  const auto got = m.predict({ia, ib}, {.verbose = 0});
  REQUIRE(got.size() == 3);
  const Tensor da = ea(ia), db = eb(ib);
  check_close(values(got[0]), values(L::GlobalAveragePooling1D()(L::Concatenate()({da, db}))), 1e-6);
  check_close(values(got[1]), values(L::GlobalAveragePooling1D()(L::Concatenate({.axis = 1})({da, db}))), 1e-6);
  check_close(values(got[2]), values(L::GlobalAveragePooling1D()(L::Maximum()({da, db}))), 1e-6);
  // The step-concatenated mask keeps each input's steps: the pooled mean is over 2 + 1 and 2 + 4 steps.
  const Tensor joined = L::Concatenate({.axis = 1})({da, db});
  CHECK(values(joined.keras_mask()) == std::vector<double>{1, 1, 0, 0, 1, 0, 0, 0, 1, 0, 1, 0, 1, 1, 1, 1});
}
