// GlobalAveragePooling1D and GlobalMaxPooling1D: values against Keras (tests/fixtures/
// make_merging_pooling_fixtures.py) with masks, keepdims and channels_first; float64 gradchecks; errors; use
// on symbolic tensors with masks flowing from Embedding(mask_zero) inside Functional models.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "loom.hpp"
#include "tests/bad_input_helpers.hpp"
#include "tests/layers/merging_pooling_fixtures.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

TEST_CASE("GlobalAveragePooling1D matches Keras: masks, keepdims, channels_first", "[layers][pooling]") {
  for (const auto& c : merging_pooling_cases("GlobalAveragePooling1D"))
    for (DType dtype : {DType::f64, DType::f32}) {
      L::GlobalAveragePooling1D gap({.data_format = c.option_or("data_format", "channels_last"),
                                     .keepdims = c.option_or("keepdims", "0") == "1"});
      const Tensor x = fixture_inputs(c, dtype)[0];
      check_fixture_output(c, c.has("mask") ? gap(x, c.array("mask").tensor(dtype)) : gap(x));
    }
}

TEST_CASE("GlobalMaxPooling1D matches Keras and ignores masks as Keras does", "[layers][pooling]") {
  for (const auto& c : merging_pooling_cases("GlobalMaxPooling1D"))
    for (DType dtype : {DType::f64, DType::f32}) {
      L::GlobalMaxPooling1D gmp({.data_format = c.option_or("data_format", "channels_last"),
                                 .keepdims = c.option_or("keepdims", "0") == "1"});
      check_fixture_output(c, gmp(fixture_inputs(c, dtype)[0]));
    }
}

TEST_CASE("Global pooling layers have Keras's names, defaults and shapes", "[layers][pooling]") {
  L::reset_layer_names();
  L::GlobalAveragePooling1D gap;
  L::GlobalMaxPooling1D gmp({.data_format = "Channels_First", .keepdims = true});
  CHECK(gap.name() == "global_average_pooling1d");
  CHECK(gap.class_name() == "GlobalAveragePooling1D");
  CHECK(gmp.class_name() == "GlobalMaxPooling1D");
  CHECK(gap.data_format() == "channels_last");
  CHECK_FALSE(gap.keepdims());
  CHECK(gmp.data_format() == "channels_first");  // Keras lower-cases it
  CHECK(gmp.keepdims());
  CHECK(gap.supports_masking());
  CHECK_FALSE(gmp.supports_masking());
  CHECK(gap.compute_output_shape({-1, 7, 3}) == Shape{-1, 3});
  CHECK(gmp.compute_output_shape({-1, 3, 7}) == Shape{-1, 3, 1});
  CHECK(L::GlobalAveragePooling1D({.keepdims = true}).compute_output_shape({2, 7, 3}) == Shape{2, 1, 3});
  CHECK(gap(randn({2, 5, 3}, 1)).shape() == Shape{2, 3});
  CHECK(gap.last_output_shape() == Shape{2, 3});
}

TEST_CASE("GlobalAveragePooling1D masks: none on the output, NaN for a fully masked sample", "[layers][pooling]") {
  const Tensor x = randn({2, 4, 3}, 1);
  const Tensor mask = bool_mask({1, 1, 0, 1, 0, 0, 0, 0}, {2, 4});
  L::GlobalAveragePooling1D gap;
  const Tensor y = gap(x.with_keras_mask(mask));
  CHECK_FALSE(y.keras_mask().defined());
  const auto v = values(y);
  const auto xv = values(x);
  for (int f = 0; f < 3; ++f) CHECK(v[std::size_t(f)] == Approx((xv[std::size_t(f)] + xv[std::size_t(3 + f)] +
                                                                 xv[std::size_t(9 + f)]) / 3.0));
  for (int f = 3; f < 6; ++f) CHECK(std::isnan(v[std::size_t(f)]));
  // A numeric mask given to the call counts nonzero as kept, and wins over the input's own mask.
  const Tensor numeric = f64({1, 1, 0, 1, 1, 1, 1, 1}, {2, 4});
  const Tensor kept = x.with_keras_mask(numeric.to(DType::boolean));
  check_close(values(gap(x.with_keras_mask(mask), numeric)), values(gap(kept)));
  check_close(values(gap(x, Tensor())), values(ops::mean(x, {1})));
}

TEST_CASE("Global pooling layers pass gradcheck in float64, with and without masks", "[layers][pooling]") {
  const Tensor x = randn({2, 4, 3}, 1);
  const Tensor mask = bool_mask({1, 1, 0, 1, 0, 1, 1, 0}, {2, 4});
  const Tensor mask_cf = bool_mask({1, 0, 1, 0, 1, 1}, {2, 3});  // [batch, steps] for [2, 4, 3]
  for (bool keepdims : {false, true}) {
    L::GlobalAveragePooling1D gap({.keepdims = keepdims});
    L::GlobalAveragePooling1D gap_cf({.data_format = "channels_first", .keepdims = keepdims});
    L::GlobalMaxPooling1D gmp({.keepdims = keepdims});
    L::GlobalMaxPooling1D gmp_cf({.data_format = "channels_first", .keepdims = keepdims});
    require_gradcheck([&](const std::vector<Tensor>& in) { return gap(in[0]); }, {x});
    require_gradcheck([&](const std::vector<Tensor>& in) { return gap(in[0].with_keras_mask(mask)); }, {x});
    require_gradcheck([&](const std::vector<Tensor>& in) { return gap(in[0], mask); }, {x});
    require_gradcheck([&](const std::vector<Tensor>& in) { return gap_cf(in[0].with_keras_mask(mask_cf)); }, {x});
    require_gradcheck([&](const std::vector<Tensor>& in) { return gmp(in[0]); }, {x});
    require_gradcheck([&](const std::vector<Tensor>& in) { return gmp_cf(in[0]); }, {x});
  }
}

TEST_CASE("Global pooling layers reject bad inputs with errors naming the layer and the shapes",
          "[layers][pooling]") {
  L::reset_layer_names();
  L::GlobalAveragePooling1D gap({.name = "gap"});
  L::GlobalAveragePooling1D gap_cf({.data_format = "channels_first", .name = "gap_cf"});
  L::GlobalMaxPooling1D gmp({.name = "gmp"});
  const Tensor x = randn({2, 3, 4}, 1);
  run_bad_inputs("global pooling layers", {
      {"an unknown data_format", [] { L::GlobalAveragePooling1D({.data_format = "nhwc", .name = "g"}); },
       {"g", "channels_last or channels_first", "nhwc"}},
      {"GlobalMaxPooling1D: an unknown data_format", [] { L::GlobalMaxPooling1D({.data_format = "channels_middle"}); },
       {"global_max_pooling1d", "channels_middle"}},
      {"a rank-2 input", [&] { gap(randn({2, 3}, 1)); }, {"gap", "rank-3", "[2, 3]"}},
      {"a rank-4 input", [&] { gap(randn({2, 3, 4, 5}, 1)); }, {"gap", "rank-3", "[2, 3, 4, 5]"}},
      {"an integer input", [&] { gap(i64({1, 2, 3, 4}, {1, 2, 2})); }, {"gap", "i64", "[1, 2, 2]"}},
      {"a call mask of the wrong steps", [&] { gap(x, bool_mask({1, 0, 1, 1}, {2, 2})); },
       {"gap", "[2, 3]", "[2, 2]", "[2, 3, 4]"}},
      {"an input's mask of the wrong steps",
       [&] { gap(x.with_keras_mask(bool_mask({1, 0, 1, 1, 1, 1, 1, 1}, {2, 4}))); }, {"gap", "[2, 3]", "[2, 4]"}},
      {"channels_first: a mask over the features", [&] { gap_cf(x, bool_mask({1, 0, 1, 1, 1, 0}, {2, 3})); },
       {"gap_cf", "[2, 4]", "[2, 3]"}},
      {"an undefined input with a mask", [&] { gap(Tensor(), bool_mask({1}, {1})); }, {"gap", "undefined"}},
      {"GlobalMaxPooling1D: a rank-2 input", [&] { gmp(randn({2, 3}, 1)); }, {"gmp", "rank-3", "[2, 3]"}},
      {"GlobalMaxPooling1D: an integer input", [&] { gmp(i64({1, 2, 3, 4}, {1, 2, 2})); }, {"gmp", "i64"}},
  });
}

TEST_CASE("Global pooling layers work on symbolic tensors, with Embedding's mask", "[layers][pooling][functional]") {
  L::reset_layer_names();
  Tensor tokens = loom::Input({5}, {.dtype = DType::i64});
  L::Embedding embedding(20, 4, {.mask_zero = true});
  Tensor e = embedding(tokens);
  Tensor avg = L::GlobalAveragePooling1D()(e);
  CHECK(avg.shape() == Shape{-1, 4});
  CHECK_FALSE(avg.keras_mask().defined());
  Tensor mx = L::GlobalMaxPooling1D({.keepdims = true})(e);
  CHECK(mx.shape() == Shape{-1, 1, 4});
  loom::Model m(tokens, {avg, mx});
  const Tensor ids = i64({3, 4, 0, 0, 0, 1, 2, 3, 4, 5}, {2, 5});
  const auto got = m.predict(std::vector<Tensor>{ids}, {.verbose = 0});
  REQUIRE(got.size() == 2);
  const Tensor table = embedding.embeddings().value();
  const auto row = [&](std::int64_t i) { return ops::take(table, i64({i}, {1}), 0); };
  const Tensor first = (row(3) + row(4)) / 2.0, second = (row(1) + row(2) + row(3) + row(4) + row(5)) / 5.0;
  check_close(values(got[0]), values(ops::concat({first, second}, 0)), 1e-6);
  check_close(values(got[1]), values(L::GlobalMaxPooling1D({.keepdims = true})(embedding(ids))), 1e-6);

  // An explicit mask given as a second (symbolic) input.
  Tensor x = loom::Input({5, 3}, {.dtype = DType::f64});
  Tensor keep = loom::Input({5}, {.dtype = DType::f64});
  loom::Model masked({x, keep}, L::GlobalAveragePooling1D()(x, keep));
  const Tensor xv = randn({2, 5, 3}, 3), kv = f64({1, 0, 1, 0, 1, 1, 1, 0, 0, 0}, {2, 5});
  check_close(values(masked.predict({xv, kv}, {.verbose = 0})[0]), values(L::GlobalAveragePooling1D()(xv, kv)));
}

TEST_CASE("Global pooling layers chain their shapes in a Sequential model", "[layers][pooling]") {
  auto model = L::Sequential({L::Input({6, 4}), L::GlobalAveragePooling1D({.keepdims = true}),
                              L::GlobalMaxPooling1D(), L::Dense(2)});
  CHECK(model.compute_output_shape({-1, 6, 4}) == Shape{-1, 2});
  CHECK(model.predict(Tensor::randn({3, 6, 4}, DType::f32, 1), {.verbose = 0}).shape() == Shape{3, 2});
}
