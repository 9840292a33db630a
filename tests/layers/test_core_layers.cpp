// Input, Flatten, Reshape and Add: the weightless shape layers.
#include <catch2/catch.hpp>

#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "layers/core/input.hpp"
#include "layers/merging/add.hpp"
#include "layers/reshaping/flatten.hpp"
#include "layers/reshaping/reshape.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

TEST_CASE("Input declares a shape without the batch axis and checks inputs against it", "[layers][input]") {
  L::reset_layer_names();
  L::Input input({16, 64});
  CHECK(input.name() == "input_layer");
  CHECK(L::Input({3}).name() == "input_layer_1");
  CHECK(input.shape() == Shape{16, 64});
  CHECK(input.batch_shape() == Shape{-1, 16, 64});
  CHECK_FALSE(input.batch_size().has_value());
  CHECK_FALSE(input.input_dtype().has_value());
  const Tensor x = Tensor::ones({2, 16, 64});
  const Tensor y = input(x);
  CHECK(y.id() == x.id());
  CHECK(input.compute_output_shape({5, 16, 64}) == Shape{5, 16, 64});
  CHECK(input.weights().empty());

  L::Input ids({-1}, {.batch_size = 4, .dtype = DType::i64, .name = "ids"});
  CHECK(ids.batch_shape() == Shape{4, -1});
  CHECK(ids(Tensor::zeros({4, 7}, DType::i64)).shape() == Shape{4, 7});
}

TEST_CASE("Input rejects inputs of another shape or dtype", "[layers][input][errors]") {
  using Catch::Contains;
  L::Input input({3, -1}, {.dtype = DType::f64, .name = "in"});
  REQUIRE_THROWS_WITH(input(Tensor::ones({2, 4, 5}, DType::f64)),
                      Contains("in") && Contains("[-1, 3, -1]") && Contains("[2, 4, 5]"));
  REQUIRE_THROWS_WITH(input(Tensor::ones({2, 3}, DType::f64)), Contains("in") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(input(Tensor::ones({2, 3, 5})), Contains("in") && Contains("f64") && Contains("f32"));
  REQUIRE_THROWS_WITH(input.compute_output_shape({2, 2, 5}), Contains("in"));
  L::Input batched({2}, {.batch_size = 8, .name = "b8"});
  REQUIRE_THROWS_WITH(batched(Tensor::ones({4, 2})), Contains("b8") && Contains("[8, 2]"));
  REQUIRE_THROWS_WITH(L::Input({2, -3}, {.name = "neg"}), Contains("neg") && Contains("[2, -3]"));
  REQUIRE_THROWS_WITH(L::Input({2}, {.batch_size = 0, .name = "zero"}), Contains("zero") && Contains("batch_size"));
}

TEST_CASE("Flatten keeps the batch axis", "[layers][flatten]") {
  L::reset_layer_names();
  L::Flatten flatten;
  CHECK(flatten.name() == "flatten");
  const Tensor x = iota({2, 3, 4});
  const Tensor y = flatten(x);
  CHECK(y.shape() == Shape{2, 12});
  check_close(values(y), values(x), 0.0);
  CHECK(flatten.compute_output_shape({2, 3, 4}) == Shape{2, 12});
  CHECK(flatten(iota({5})).shape() == Shape{5, 1});
  CHECK(flatten(iota({5, 0, 2})).shape() == Shape{5, 0});
  // a non-contiguous input
  check_close(values(flatten(x.transpose(1, 2))), values(ops::contiguous(x.transpose(1, 2))), 0.0);
  require_gradcheck([&](const std::vector<Tensor>& in) { return flatten(in[0]); }, {randn({2, 2, 3}, 1)});
}

TEST_CASE("Flatten with channels_first moves the channels last first", "[layers][flatten]") {
  L::Flatten flatten({.data_format = "channels_first"});
  const Tensor x = iota({2, 3, 2, 2});  // [batch, channels, h, w]
  const Tensor y = flatten(x);
  CHECK(y.shape() == Shape{2, 12});
  check_close(values(y), values(ops::contiguous(ops::permute(x, {0, 2, 3, 1})).reshape({2, 12})), 0.0);
  CHECK(values(flatten(iota({2, 3}))) == values(iota({2, 3})));  // rank 2: nothing to move
  require_gradcheck([&](const std::vector<Tensor>& in) { return flatten(in[0]); }, {randn({2, 2, 3}, 2)});
}

TEST_CASE("Flatten rejects scalars and unknown data formats", "[layers][flatten][errors]") {
  using Catch::Contains;
  REQUIRE_THROWS_WITH(L::Flatten({.data_format = "NHWC", .name = "f"}), Contains("f") && Contains("NHWC"));
  L::Flatten flatten({.name = "flat"});
  REQUIRE_THROWS_WITH(flatten(Tensor::scalar(1.0)), Contains("flat") && Contains("scalar"));
}

TEST_CASE("Reshape reshapes every sample, inferring one -1", "[layers][reshape]") {
  L::reset_layer_names();
  L::Reshape reshape({-1, 2, 3});
  CHECK(reshape.name() == "reshape");
  CHECK(reshape.target_shape() == Shape{-1, 2, 3});
  const Tensor x = iota({4, 12});
  CHECK(reshape.compute_output_shape({4, 12}) == Shape{4, 2, 2, 3});
  const Tensor y = reshape(x);
  CHECK(y.shape() == Shape{4, 2, 2, 3});
  check_close(values(y), values(x), 0.0);
  CHECK(L::Reshape({3, 4})(iota({2, 2, 6})).shape() == Shape{2, 3, 4});
  CHECK(L::Reshape({-1})(iota({0, 6})).shape() == Shape{0, 6});
  require_gradcheck([&](const std::vector<Tensor>& in) { return reshape(in[0]); }, {randn({6, 4}, 1).transpose()});
}

TEST_CASE("Reshape rejects bad target shapes and inputs that do not fit", "[layers][reshape][errors]") {
  using Catch::Contains;
  REQUIRE_THROWS_WITH(L::Reshape({-1, -1}, {.name = "r1"}), Contains("r1") && Contains("more than one -1"));
  REQUIRE_THROWS_WITH(L::Reshape({0, 2}, {.name = "r2"}), Contains("r2") && Contains("[0, 2]"));
  L::Reshape reshape({5}, {.name = "r3"});
  REQUIRE_THROWS_WITH(reshape(Tensor::ones({2, 6})), Contains("r3") && Contains("[2, 6]") && Contains("[5]"));
  L::Reshape inferred({-1, 4}, {.name = "r4"});
  REQUIRE_THROWS_WITH(inferred(Tensor::ones({2, 6})), Contains("r4") && Contains("[-1, 4]"));
  REQUIRE_THROWS_WITH(inferred(Tensor::scalar(1.0)), Contains("r4") && Contains("scalar"));
}

TEST_CASE("Add sums a list of tensors, broadcasting as Keras's merge layers", "[layers][add]") {
  L::reset_layer_names();
  L::Add add;
  CHECK(add.name() == "add");
  const Tensor a = randn({2, 3, 4}, 1), b = randn({2, 3, 4}, 2), c = randn({2, 1, 4}, 3);
  const Tensor y = add({a, b, c});
  CHECK(y.shape() == Shape{2, 3, 4});
  check_close(values(y), values(a + b + c), 1e-15);
  CHECK(add.compute_output_shape({{2, 3, 4}, {2, 1, 4}}) == Shape{2, 3, 4});
  // a lower-rank input gets axes after its batch axis: [2, 4] acts as [2, 1, 4]
  const Tensor d = randn({2, 4}, 4);
  check_close(values(add({a, d})), values(a + ops::expand_dims(d, 1)), 1e-15);
  CHECK(add.compute_output_shape({{2, 3, 4}, {2, 4}}) == Shape{2, 3, 4});
  CHECK(add.weights().empty());
  require_gradcheck([&](const std::vector<Tensor>& in) { return add({in[0], in[1], in[2]}); },
                    {a, c.transpose(1, 2).transpose(1, 2), d});
}

TEST_CASE("Add rejects mismatched batches, shapes and dtypes", "[layers][add][errors]") {
  using Catch::Contains;
  L::Add add({.name = "residual"});
  REQUIRE_THROWS_WITH(add({}), Contains("residual") && Contains("at least one"));
  REQUIRE_THROWS_WITH(add({Tensor::ones({2, 3}), Tensor::ones({3, 3})}),
                      Contains("residual") && Contains("batch") && Contains("[2, 3]") && Contains("[3, 3]"));
  REQUIRE_THROWS_WITH(add({Tensor::ones({2, 3}), Tensor::ones({2, 4})}),
                      Contains("residual") && Contains("incompatible") && Contains("[2, 4]"));
  REQUIRE_THROWS_WITH(add({Tensor::ones({2, 3}), Tensor::ones({2, 3}, DType::f64)}),
                      Contains("residual") && Contains("f64"));
  REQUIRE_THROWS_WITH(add({Tensor::ones({2, 3}), Tensor()}), Contains("residual") && Contains("undefined"));
  REQUIRE_THROWS_WITH(add({Tensor::scalar(1.0)}), Contains("residual") && Contains("batch axis"));
}
