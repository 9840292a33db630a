// Permute and RepeatVector: values against Keras (tests/fixtures/make_merging_pooling_fixtures.py), float64
// gradchecks, errors, and use on symbolic tensors inside Functional models.
#include <catch2/catch.hpp>

#include <vector>

#include "loom.hpp"
#include "tests/bad_input_helpers.hpp"
#include "tests/layers/merging_pooling_fixtures.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

TEST_CASE("Permute matches Keras and drops masks as Keras does", "[layers][permute]") {
  for (const auto& c : merging_pooling_cases("Permute"))
    for (DType dtype : {DType::f64, DType::f32})
      check_fixture_output(c, L::Permute(int_list_option(c, "dims"))(fixture_inputs(c, dtype)[0]));
  L::reset_layer_names();
  L::Permute permute({2, 1});
  CHECK(permute.name() == "permute");
  CHECK(permute.class_name() == "Permute");
  CHECK(permute.dims() == std::vector<std::int64_t>{2, 1});
  CHECK(permute.compute_output_shape({-1, 3, 5}) == Shape{-1, 5, 3});
  CHECK(L::Permute({3, 1, 2}).compute_output_shape({2, 3, 4, 5}) == Shape{2, 5, 3, 4});
}

TEST_CASE("RepeatVector matches Keras", "[layers][repeat_vector]") {
  for (const auto& c : merging_pooling_cases("RepeatVector"))
    for (DType dtype : {DType::f64, DType::f32})
      check_fixture_output(c, L::RepeatVector(std::stoll(c.option("n")))(fixture_inputs(c, dtype)[0]));
  L::reset_layer_names();
  L::RepeatVector repeat(3);
  CHECK(repeat.name() == "repeat_vector");
  CHECK(repeat.class_name() == "RepeatVector");
  CHECK(repeat.n() == 3);
  CHECK(repeat.compute_output_shape({-1, 4}) == Shape{-1, 3, 4});
  const Tensor y = repeat(randn({2, 4}, 1));
  CHECK(y.shape() == Shape{2, 3, 4});
  CHECK(y.is_contiguous());
}

TEST_CASE("Permute and RepeatVector pass gradcheck in float64", "[layers][permute][repeat_vector]") {
  L::Permute permute({3, 1, 2});
  require_gradcheck([&](const std::vector<Tensor>& in) { return permute(in[0]); }, {randn({2, 3, 4, 2}, 1)});
  L::RepeatVector repeat(3);
  require_gradcheck([&](const std::vector<Tensor>& in) { return repeat(in[0]); }, {randn({2, 4}, 2)});
}

TEST_CASE("Permute and RepeatVector reject bad options and inputs", "[layers][permute][repeat_vector]") {
  L::reset_layer_names();
  L::Permute permute({2, 1}, {.name = "swap"});
  L::RepeatVector repeat(2, {.name = "rep"});
  run_bad_inputs("Permute and RepeatVector", {
      {"Permute: dims naming the batch axis", [] { L::Permute({0, 1}); }, {"permute", "permutation", "[0, 1]"}},
      {"Permute: an axis twice", [] { L::Permute({1, 1}, {.name = "p"}); }, {"p", "[1, 1]"}},
      {"Permute: an axis missing", [] { L::Permute({1, 3}, {.name = "p"}); }, {"p", "[1, 3]"}},
      {"Permute: an input of another rank", [&] { permute(randn({2, 3}, 1)); }, {"swap", "rank 3", "[2, 3]"}},
      {"Permute: an undefined input", [&] { permute(Tensor()); }, {"swap", "undefined"}},
      {"RepeatVector: n = 0", [] { L::RepeatVector(0, {.name = "r"}); }, {"r", "positive", "0"}},
      {"RepeatVector: a negative n", [] { L::RepeatVector(-2, {.name = "r"}); }, {"r", "-2"}},
      {"RepeatVector: a rank-3 input", [&] { repeat(randn({2, 3, 4}, 1)); }, {"rep", "rank-2", "[2, 3, 4]"}},
  });
  // Empty dims, as Keras allows: a rank-1 input, unchanged.
  const Tensor v = randn({3}, 2);
  CHECK(values(L::Permute(std::vector<std::int64_t>{})(v)) == values(v));
}

TEST_CASE("Permute and RepeatVector work on symbolic tensors", "[layers][permute][repeat_vector][functional]") {
  L::reset_layer_names();
  Tensor v = loom::Input({4}, {.dtype = DType::f64});
  Tensor r = L::RepeatVector(3)(v);
  CHECK(r.shape() == Shape{-1, 3, 4});
  Tensor p = L::Permute({2, 1})(r);
  CHECK(p.shape() == Shape{-1, 4, 3});
  loom::Model m(v, p);
  const Tensor x = randn({2, 4}, 1);
  check_close(values(m.predict(x, {.verbose = 0})), values(ops::permute(L::RepeatVector(3)(x), {0, 2, 1})));
}

TEST_CASE("Permute and RepeatVector chain their shapes with Softmax and Identity in a Sequential model",
          "[layers][permute][repeat_vector]") {
  auto model = L::Sequential({L::Input({4}), L::RepeatVector(3), L::Permute({2, 1}), L::Softmax(), L::Identity()});
  CHECK(model.compute_output_shape({-1, 4}) == Shape{-1, 4, 3});
  const Tensor x = Tensor::randn({2, 4}, DType::f32, 1);
  check_close(values(model.predict(x, {.verbose = 0})),
              values(ops::softmax(ops::permute(L::RepeatVector(3)(x), {0, 2, 1}), -1)), 1e-6);
}
