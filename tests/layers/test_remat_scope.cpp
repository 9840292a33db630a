#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loom.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
using Tensors = std::vector<Tensor>;
namespace L = loom::layers;

namespace {

/// tanh, counting its calls: a rematerialized layer runs its activation once more, in the backward pass.
L::activations::Activation counted_tanh(int& calls) {
  return [&calls](const Tensor& x) {
    ++calls;
    return ops::tanh(x);
  };
}

/// x w + (its call counted), with an add_loss of its output's mean square.
class CountingLayer : public L::Layer {
 public:
  CountingLayer(int& calls, std::int64_t units) : Layer("counting_layer"), calls_(&calls), units_(units) {}
  Shape compute_output_shape(const Shape& input_shape) const override {
    Shape out = input_shape;
    out.back() = units_;
    return out;
  }

 protected:
  void build(const Shape& input_shape) override { w_ = add_weight("kernel", {input_shape.back(), units_}, "glorot_uniform"); }
  Tensor call(const Tensor& x, bool) override {
    ++*calls_;
    const Tensor y = ops::matmul(x, w_.value());
    add_loss(ops::mean(ops::square(y)) * 0.5);
    return y;
  }

 private:
  int* calls_;
  std::int64_t units_;
  Variable w_;
};

/// The gradients of sum(y^2) + the model's losses with respect to x and every trainable weight, after a
/// training call; the losses' sum is appended last.
Tensors step(L::Layer& model, const Tensor& x) {
  random::set_seed(11);  // the same dropout masks in every run
  GradientTape tape;
  tape.watch(x);
  const Tensor y = model(x, /*training=*/true);
  Tensor loss = ops::sum(ops::square(y));
  Tensor penalties = Tensor::scalar(0.0, DType::f64);
  for (const Tensor& l : model.losses()) penalties = penalties + ops::sum(l);
  Tensors sources{x};
  for (const Variable& w : model.trainable_weights()) sources.push_back(w.value());
  Tensors grads = tape.gradient(loss + penalties, sources);
  grads.push_back(penalties);
  return grads;
}

const Tensor inputs = Tensor::randn({8, 5}, DType::f64, 21);

/// A small stack made the same way each time (same names, same initial values): Dense with a counted
/// activation, LayerNormalization, Dropout, a counting layer, Dense.
struct Stack {
  int dense_activations = 0;
  int counting_calls = 0;
  std::unique_ptr<L::Sequential> model;

  explicit Stack(std::optional<RematMode> mode, std::int64_t wide = 32) {
    random::set_seed(3);
    L::reset_layer_names();
    std::optional<RematScope> scope;
    if (mode) scope.emplace(*mode);
    model = std::make_unique<L::Sequential>();
    model->add(L::Dense(wide, {.activation = counted_tanh(dense_activations)}));
    model->add(L::LayerNormalization());
    model->add(L::Dropout(0.25));
    model->add(CountingLayer(counting_calls, 4));
    model->add(L::Dense(3, {.name = "head"}));
    (*model)(inputs);  // built now, from the generator seeded above
  }
  Tensors run(const Tensor& x) {
    dense_activations = counting_calls = 0;
    return step(*model, x);
  }
};

}  // namespace

TEST_CASE("RematScope full: every layer made inside recomputes its call, gradients bit for bit", "[remat][scope]") {
  Stack plain(std::nullopt), full(RematMode{});
  const Tensors want = plain.run(inputs);
  CHECK(plain.dense_activations == 1);
  CHECK(plain.counting_calls == 1);
  const Tensors got = full.run(inputs);
  check_same_tensors(got, want);
  // The forward pass, the Sequential's recomputation, and inside it each layer's own: 3 runs of each call.
  CHECK(full.dense_activations == 3);
  CHECK(full.counting_calls == 3);
  CHECK(full.model->losses().size() == plain.model->losses().size());
}

TEST_CASE("RematScope larger_than: only calls whose output exceeds the threshold", "[remat][scope]") {
  // Outputs: Dense 8 x 32 = 256 and LayerNormalization 256 elements, the counting layer 8 x 4 = 32.
  Stack plain(std::nullopt), scoped(RematMode{.mode = "larger_than", .output_size_threshold = 100});
  const Tensors want = plain.run(inputs);
  const Tensors got = scoped.run(inputs);
  check_same_tensors(got, want);
  CHECK(scoped.dense_activations == 2);  // the Dense (256 > 100), not the Sequential (8 x 3 = 24)
  CHECK(scoped.counting_calls == 1);     // 32 <= 100
  Stack wide(RematMode{.mode = "larger_than", .output_size_threshold = 256});
  wide.run(inputs);
  CHECK(wide.dense_activations == 1);  // exactly the threshold is not larger
}

TEST_CASE("RematScope activations: only the activation function is recomputed", "[remat][scope]") {
  Stack plain(std::nullopt), scoped(RematMode{.mode = "activations"});
  const Tensors want = plain.run(inputs);
  const Tensors got = scoped.run(inputs);
  check_same_tensors(got, want);
  CHECK(scoped.dense_activations == 2);
  CHECK(scoped.counting_calls == 1);
}

TEST_CASE("RematScope list_of_layers: the named layers only", "[remat][scope]") {
  Stack plain(std::nullopt), scoped(RematMode{.mode = "list_of_layers", .layer_names = {"counting_layer", "head"}});
  const Tensors want = plain.run(inputs);
  const Tensors got = scoped.run(inputs);
  check_same_tensors(got, want);
  CHECK(scoped.dense_activations == 1);
  CHECK(scoped.counting_calls == 2);
}

TEST_CASE("RematScope is taken when a layer is made, not when it is called, and none switches it off",
          "[remat][scope]") {
  int outside_calls = 0, inside_calls = 0, off_calls = 0;
  std::optional<CountingLayer> outside, inside, off;
  outside.emplace(outside_calls, 3);
  {
    const RematScope scope;
    inside.emplace(inside_calls, 3);
    {
      const RematScope none({.mode = std::nullopt});
      off.emplace(off_calls, 3);
      CHECK_FALSE(current_remat_mode()->mode.has_value());
    }
    CHECK(current_remat_mode()->mode == "full");
  }
  CHECK_FALSE(current_remat_mode().has_value());
  CHECK_FALSE(outside->remat_mode().has_value());
  CHECK(inside->remat_mode()->mode == "full");
  const Tensor x = Tensor::randn({2, 3}, DType::f64, 5);
  {
    const RematScope scope;  // at call time: no effect
    for (L::Layer* layer : std::vector<L::Layer*>{&*outside, &*inside, &*off}) step(*layer, x);
  }
  CHECK(outside_calls == 1);
  CHECK(inside_calls == 2);
  CHECK(off_calls == 1);
}

TEST_CASE("RematScope: a TransformerEncoder with dropout, first and second order", "[remat][scope]") {
  const Tensor x = Tensor::randn({2, 6, 8}, DType::f64, 31);
  const auto make = [&](std::optional<RematMode> mode) {
    random::set_seed(5);
    L::reset_layer_names();
    std::optional<RematScope> scope;
    if (mode) scope.emplace(*mode);
    auto block = std::make_unique<L::TransformerEncoder>(
        L::TransformerEncoderOptions{.num_heads = 2, .ff_dim = 16, .dropout = 0.2, .norm_first = true});
    (*block)(x);
    return block;
  };
  auto plain = make(std::nullopt), full = make(RematMode{}), large = make(RematMode{.mode = "larger_than"});
  const Tensors want = step(*plain, x);
  check_same_tensors(step(*full, x), want);
  check_same_tensors(step(*large, x), want);  // the intermediate Dense (2 x 6 x 16 = 192 elements) is not, at 1024

}

TEST_CASE("RematScope: second order under nested tapes", "[remat][scope]") {
  const Tensor x = Tensor::randn({4, 5}, DType::f64, 33);
  const auto make = [&](std::optional<RematMode> mode) {
    random::set_seed(7);
    L::reset_layer_names();
    std::optional<RematScope> scope;
    if (mode) scope.emplace(*mode);
    auto model = std::make_unique<L::Sequential>();
    model->add(L::Dense(6, {.activation = "tanh"}));
    model->add(L::Dropout(0.3));
    model->add(L::Dense(2, {.activation = "sigmoid"}));
    (*model)(x);
    return model;
  };
  // d/dx of |d sum(y^2)/dx|^2.
  const auto second = [&](L::Layer& model) {
    random::set_seed(13);
    GradientTape outer;
    outer.watch(x);
    Tensor g;
    {
      GradientTape inner;
      inner.watch(x);
      g = inner.gradient(ops::sum(ops::square(model(x, /*training=*/true))), {x})[0];
    }
    return outer.gradient(ops::sum(ops::square(g)), {x})[0];
  };
  auto plain = make(std::nullopt), full = make(RematMode{});
  // The outer tape adds the same terms in another order (see test_remat.cpp): equal to rounding.
  check_same_tensors({second(*full)}, {second(*plain)}, 1e-13);
}

TEST_CASE("RematScope: BatchNormalization updates its moving statistics once per step", "[remat][scope]") {
  const Tensor x = Tensor::randn({6, 4}, DType::f64, 41);
  const auto make = [&](std::optional<RematMode> mode) {
    random::set_seed(9);
    L::reset_layer_names();
    std::optional<RematScope> scope;
    if (mode) scope.emplace(*mode);
    auto model = std::make_unique<L::Sequential>();
    model->add(L::Dense(5));
    model->add(L::BatchNormalization({.momentum = 0.5}));
    model->add(L::Dense(2));
    (*model)(x);
    return model;
  };
  auto plain = make(std::nullopt), full = make(RematMode{});
  for (int i = 0; i < 2; ++i) check_same_tensors(step(*full, x), step(*plain, x));
  const auto a = full->non_trainable_weights(), b = plain->non_trainable_weights();
  REQUIRE(a.size() == 2);
  REQUIRE(b.size() == 2);
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(values(a[i].value()) == values(b[i].value()));
}

TEST_CASE("RematScope: training a model made inside one gives the same weights", "[remat][scope]") {
  const Tensor x = Tensor::randn({16, 5}, DType::f64, 51), y = Tensor::randn({16, 3}, DType::f64, 52);
  const auto train = [&](std::optional<RematMode> mode) {
    Stack stack(mode);
    stack.model->compile({.optimizer = optim::Adam({.learning_rate = 1e-2}), .loss = "mse"});
    random::set_seed(17);
    stack.model->fit(x, y, {.batch_size = 4, .epochs = 2, .verbose = 0, .shuffle = false});
    Tensors weights;
    for (const Variable& w : stack.model->weights()) weights.push_back(w.value());
    return weights;
  };
  check_same_tensors(train(RematMode{}), train(std::nullopt));
}

TEST_CASE("RematScope: a Functional model and multi-input layers made inside one", "[remat][scope]") {
  const auto make = [](std::optional<RematMode> mode) {
    random::set_seed(23);
    L::reset_layer_names();
    std::optional<RematScope> scope;
    if (mode) scope.emplace(*mode);
    const Tensor a = L::Input({4, 6}, {.dtype = DType::f64}), b = L::Input({4, 6}, {.dtype = DType::f64});
    const Tensor att = L::MultiHeadAttention({.num_heads = 2, .key_dim = 3})(a, b);
    const Tensor sum = L::Add()({att, b});
    return std::make_unique<L::Model>(Tensors{a, b}, Tensors{L::Dense(2)(sum)});
  };
  const Tensor a = Tensor::randn({3, 4, 6}, DType::f64, 61), b = Tensor::randn({3, 4, 6}, DType::f64, 62);
  const auto grads = [&](L::Model& model) {
    GradientTape tape;
    tape.watch(a);
    tape.watch(b);
    const Tensor y = model({a, b}, true)[0];
    Tensors sources{a, b};
    for (const Variable& w : model.trainable_weights()) sources.push_back(w.value());
    return tape.gradient(ops::sum(ops::square(y)), sources);
  };
  auto plain = make(std::nullopt), full = make(RematMode{});
  (*plain)({a, b});
  (*full)({a, b});
  for (std::size_t i = 0; i < plain->weights().size(); ++i) full->weights()[i].assign(plain->weights()[i].value());
  // b feeds the attention's key and value projections inside the rematerialized attention and the Add
  // outside it: its gradient is (add + (key + value)) instead of ((add + key) + value), equal to rounding.
  // The other gradients are bit for bit.
  const Tensors got = grads(*full), want = grads(*plain);
  check_same_tensors(got, want, 1e-15);
  check_same_tensors({got[0]}, {want[0]});
  check_same_tensors(Tensors(got.begin() + 2, got.end()), Tensors(want.begin() + 2, want.end()));
}

TEST_CASE("RematScope: a layer whose call returns its input passes it through", "[remat][scope]") {
  const RematScope scope;
  L::Dropout dropout(0.5);
  L::Identity identity;
  const Tensor x = Tensor::randn({3, 2}, DType::f64, 71);
  GradientTape tape;
  tape.watch(x);
  const Tensor y = identity(dropout(x, /*training=*/false));
  CHECK(y.id() == x.id());
  CHECK(values(tape.gradient(ops::sum(y * 2.0), {x})[0]) == std::vector<double>(6, 2.0));
}

TEST_CASE("RematScope refuses unknown modes and negative thresholds", "[remat][scope][bad_input]") {
  REQUIRE_THROWS_WITH(RematScope({.mode = "everything"}),
                      Catch::Contains("RematScope") && Catch::Contains("unknown mode 'everything'"));
  REQUIRE_THROWS_WITH(RematScope({.mode = "larger_than", .output_size_threshold = -1}),
                      Catch::Contains("output_size_threshold must be >= 0, got -1"));
  CHECK_FALSE(current_remat_mode().has_value());
}
