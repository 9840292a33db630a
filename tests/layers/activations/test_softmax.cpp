// The Softmax layer: values against Keras (tests/fixtures/make_merging_pooling_fixtures.py) over one axis and
// several, with boolean and numeric masks (broadcast, a fully masked row, the input's own mask); float64
// gradchecks; errors; use on symbolic tensors inside Functional models.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "loom.hpp"
#include "tests/bad_input_helpers.hpp"
#include "tests/layers/merging_pooling_fixtures.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

TEST_CASE("Softmax matches Keras: axes, masks, a fully masked row, the mask passed on", "[layers][softmax]") {
  for (const auto& c : merging_pooling_cases("Softmax"))
    for (DType dtype : {DType::f64, DType::f32}) {
      L::Softmax softmax({.axis = c.options.count("axis") ? Axes(int_list_option(c, "axis")) : Axes(-1)});
      const Tensor x = fixture_inputs(c, dtype)[0];
      check_fixture_output(c, c.has("mask") ? softmax(x, c.array("mask").tensor(dtype)) : softmax(x));
    }
}

TEST_CASE("Softmax has Keras's name, defaults and accessors", "[layers][softmax]") {
  L::reset_layer_names();
  L::Softmax softmax;
  CHECK(softmax.name() == "softmax");
  CHECK(softmax.class_name() == "Softmax");
  CHECK(softmax.axis() == Axes(-1));
  CHECK(L::Softmax({.axis = {1, 2}}).axis() == Axes({1, 2}));
  CHECK(softmax.supports_masking());
  const Tensor x = randn({2, 3}, 1);
  check_close(values(softmax(x)), values(ops::softmax(x, -1)));
  // A fully masked row gives zeros, not a uniform distribution.
  const Tensor y = softmax(x, bool_mask({0, 0, 0, 1, 0, 1}, {2, 3}));
  CHECK(values(y)[0] == 0.0);
  CHECK(values(y)[1] == 0.0);
  CHECK(values(y)[3] + values(y)[5] == Approx(1.0));
  CHECK(values(y.keras_mask()) == std::vector<double>{0, 0, 0, 1, 0, 1});
}

TEST_CASE("Softmax passes gradcheck in float64, with and without masks", "[layers][softmax]") {
  const Tensor x = randn({2, 3, 4}, 1);
  const Tensor mask = bool_mask({1, 0, 1, 1, 0, 0, 0, 0, 1, 1, 0, 1}, {1, 3, 4});
  for (const Axes& axis : {Axes(-1), Axes(1), Axes({1, 2})}) {
    L::Softmax softmax({.axis = axis});
    require_gradcheck([&](const std::vector<Tensor>& in) { return softmax(in[0]); }, {x});
    require_gradcheck([&](const std::vector<Tensor>& in) { return softmax(in[0], mask); }, {x});
    const Tensor full = ops::broadcast_to(mask, {2, 3, 4});
    require_gradcheck([&](const std::vector<Tensor>& in) { return softmax(in[0].with_keras_mask(full)); }, {x});
  }
}

TEST_CASE("Softmax rejects bad options, inputs and masks with errors naming the layer and shapes",
          "[layers][softmax]") {
  L::reset_layer_names();
  L::Softmax softmax({.name = "probs"});
  L::Softmax far({.axis = 2, .name = "far"});
  L::Softmax twice({.axis = {1, -1}, .name = "twice"});
  const Tensor x = randn({2, 3}, 1);
  run_bad_inputs("Softmax", {
      {"no axis", [] { L::Softmax({.axis = std::vector<std::int64_t>{}, .name = "none"}); }, {"none", "axis"}},
      {"a mask that does not broadcast", [&] { softmax(x, bool_mask({1, 0, 1, 1, 0, 1, 1, 1}, {2, 4})); },
       {"probs", "broadcast", "[2, 3]", "[2, 4]"}},
      {"a mask of higher rank", [&] { softmax(x, bool_mask({1, 0, 1, 1, 0, 1}, {1, 2, 3})); },
       {"probs", "[2, 3]", "[1, 2, 3]"}},
      {"an input's mask that does not broadcast", [&] { softmax(x.with_keras_mask(bool_mask({1, 0}, {2}))); },
       {"probs", "[2, 3]", "[2]"}},
      {"an integer input", [&] { softmax(i64({1, 2}, {1, 2})); }, {"probs", "i64", "[1, 2]"}},
      {"an undefined input with a mask", [&] { softmax(Tensor(), bool_mask({1}, {1})); }, {"probs", "undefined"}},
      {"an axis out of range", [&] { far(x); }, {"far", "2"}},
      {"an axis named twice", [&] { twice(x); }, {"twice"}},
  });
}

TEST_CASE("Softmax works on symbolic tensors inside Functional models", "[layers][softmax][functional]") {
  L::reset_layer_names();
  Tensor x = loom::Input({3, 4}, {.dtype = DType::f64});
  Tensor keep = loom::Input({3, 4}, {.dtype = DType::f64});
  Tensor plain = L::Softmax({.axis = {1, 2}})(x);
  Tensor masked = L::Softmax()(x, keep);
  CHECK(masked.keras_mask().defined());
  loom::Model m({x, keep}, {plain, masked});
  const Tensor xv = randn({2, 3, 4}, 1);
  const Tensor kv = f64({1, 0, 1, 1, 0, 0, 0, 0, 1, 1, 0, 1, 1, 1, 1, 1, 0, 1, 0, 1, 1, 1, 1, 0}, {2, 3, 4});
  const auto got = m.predict({xv, kv}, {.verbose = 0});
  REQUIRE(got.size() == 2);
  check_close(values(got[0]), values(L::Softmax({.axis = {1, 2}})(xv)));
  check_close(values(got[1]), values(L::Softmax()(xv, kv)));
}
