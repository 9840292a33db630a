// The C++ examples of docs/tutorial.md and docs/gradcheck.md, copied verbatim. Each block between
// "// ---- docs/<page>.md, <section>" markers mirrors the named section of that page: when you change one,
// change the other, so that every example in the docs keeps compiling and doing what the page says.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

// ---- docs/tutorial.md, the includes every snippet assumes
#include <filesystem>  // for the file name in "Save and load the weights"

#include "loom.hpp"
using namespace loom;
namespace L = loom::layers;

namespace {

// ---- docs/tutorial.md, "A custom layer"
// y = x + sigmoid(gate) * tanh(x W): a residual branch whose weight in the sum is learned. The gate starts
// at 0, so the branch starts half open.
class GatedResidual : public L::Layer {
 public:
  GatedResidual() : Layer("gated_residual") {}

 protected:
  void build(const Shape& input_shape) override {
    const std::int64_t features = input_shape.back();
    kernel_ = add_weight("kernel", {features, features}, "glorot_uniform");
    gate_ = add_weight("gate", {features}, "zeros");
  }
  Tensor call(const Tensor& x, bool /*training*/) override {
    return x + ops::sigmoid(gate_) * ops::tanh(ops::matmul(x, kernel_));
  }

 private:
  Variable kernel_;
  Variable gate_;
};

// ---- docs/tutorial.md, "A model that uses it"
class Regressor : public L::Model {
 public:
  Regressor() : Model("regressor") {}

 protected:
  Tensor call(const Tensor& x, bool training) override {
    return out_(block_(hidden_(x, training), training), training);
  }

 private:
  L::Dense& hidden_ = add_layer(L::Dense(16, {.activation = "tanh"}));
  GatedResidual& block_ = add_layer(GatedResidual());
  L::Dense& out_ = add_layer(L::Dense(1));
};

// ---- docs/tutorial.md, "Data"
// 256 samples of 4 features; the target is a smooth function of them.
struct Data {
  Tensor x, y;
};
Data make_data(std::uint64_t seed) {
  Tensor x = Tensor::randn({256, 4}, DType::f32, seed);
  Tensor w = Tensor::randn({4, 1}, DType::f32, /*seed=*/100);
  return {x, ops::tanh(ops::matmul(x, w))};
}

// ---- docs/gradcheck.md, "A custom op written with loom ops"
// swish(x) = x * sigmoid(x): made of differentiable ops, so the tape differentiates it by itself.
Tensor swish(const Tensor& x) { return x * ops::sigmoid(x); }

// ---- docs/gradcheck.md, "A custom op with its own backward rule"
// smooth_abs(x) = sqrt(x^2 + 1), a |x| without a kink; d/dx = x / smooth_abs(x).
Tensor smooth_abs(const Tensor& x) {
  Tensor y;
  {
    NoGradGuard no_grad;  // the forward ops are not recorded one by one...
    y = ops::sqrt(x * x + 1.0);
  }
  if (autograd::needs_recording({&x}))  // ...but as one node with this rule
    autograd::record("smooth_abs", {x}, {y}, [x, y](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{g[0] * x / y};  // one gradient per input
    });
  return y;
}

// ---- docs/gradcheck.md, "What a failure looks like"
// The same op with a wrong rule: it forgets to divide by y.
Tensor smooth_abs_wrong(const Tensor& x) {
  Tensor y;
  {
    NoGradGuard no_grad;
    y = ops::sqrt(x * x + 1.0);
  }
  if (autograd::needs_recording({&x}))
    autograd::record("smooth_abs_wrong", {x}, {y}, [x](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{g[0] * x};
    });
  return y;
}

}  // namespace

TEST_CASE("tutorial: the custom layer builds its weights from the first input", "[docs]") {
  // ---- docs/tutorial.md, "A custom layer" (usage)
  GatedResidual layer;
  Tensor out = layer(Tensor::randn({8, 3}, DType::f32, 1));
  // out has shape [8, 3]; layer.weights() are "gated_residual/kernel" [3, 3] and "gated_residual/gate" [3]
  // ----
  CHECK(out.shape() == Shape{8, 3});
  REQUIRE(layer.weights().size() == 2);
  CHECK(layer.weights()[0].shape() == Shape{3, 3});
  CHECK(layer.weights()[1].shape() == Shape{3});
  CHECK(layer.count_params() == 12);
}

TEST_CASE("tutorial: compile, fit, evaluate and predict", "[docs]") {
  // ---- docs/tutorial.md, "Train it the Keras way"
  random::set_seed(0);
  auto [x, y] = make_data(/*seed=*/1);
  auto [x_test, y_test] = make_data(/*seed=*/2);

  Regressor model;
  model.compile({.optimizer = optim::Adam({.learning_rate = 1e-2}), .loss = "mse", .metrics = {"mae"}});
  History history = model.fit(x, y, {.batch_size = 32, .epochs = 5, .verbose = 0, .validation_split = 0.25});
  L::Logs test = model.evaluate(x_test, y_test, {.verbose = 0});
  Tensor predictions = model.predict(x_test, {.verbose = 0});  // [256, 1]
  // ----
  const auto& loss = history.history.at("loss");
  REQUIRE(loss.size() == 5);
  CHECK(loss.back() < 0.5 * loss.front());
  CHECK(history.history.count("val_mae") == 1);
  CHECK(test.at("loss") < loss.front());
  CHECK(predictions.shape() == Shape{256, 1});
  CHECK(model.trainable_weights().size() == 6);  // Dense 2 + GatedResidual 2 + Dense 2
}

TEST_CASE("tutorial: save and load the weights", "[docs]") {
  random::set_seed(0);
  auto [x, y] = make_data(/*seed=*/1);
  Regressor model;
  model.compile({.optimizer = "adam", .loss = "mse"});
  model.fit(x, y, {.epochs = 1, .verbose = 0});

  // ---- docs/tutorial.md, "Save and load the weights"
  const std::string path = (std::filesystem::temp_directory_path() / "regressor.safetensors").string();
  model.save_weights(path);

  Regressor restored;
  restored(x);                // builds the weights, so that there is something to load into
  restored.load_weights(path);  // names, shapes and dtypes must match, or nothing is loaded
  // ----
  const auto a = model.predict(x, {.verbose = 0}).to_vector<float>();
  const auto b = restored.predict(x, {.verbose = 0}).to_vector<float>();
  CHECK(a == b);
  std::vector<std::string> names;
  for (const auto& [name, weight] : restored.named_weights()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"dense/kernel", "dense/bias", "gated_residual/kernel", "gated_residual/gate",
                                          "dense_1/kernel", "dense_1/bias"});
  std::filesystem::remove(path);
}

TEST_CASE("tutorial: a custom training loop with GradientTape and Adam", "[docs]") {
  random::set_seed(0);
  auto [x, y] = make_data(/*seed=*/1);

  // ---- docs/tutorial.md, "The same training, written by hand"
  Regressor model;
  optim::Adam optimizer({.learning_rate = 1e-2});
  std::vector<double> losses_per_epoch;
  for (int epoch = 0; epoch < 5; ++epoch) {
    double total = 0.0;
    for (std::int64_t start = 0; start < 256; start += 32) {
      Tensor xb = ops::slice(x, 0, start, start + 32);
      Tensor yb = ops::slice(y, 0, start, start + 32);
      GradientTape tape;  // trainable weights are watched as they are read
      Tensor loss = ops::mean(losses::mean_squared_error(yb, model(xb, /*training=*/true)));
      std::vector<Variable> weights = model.trainable_weights();
      optimizer.apply_gradients(tape.gradient(loss, weights), weights);
      total += loss.item<double>();
    }
    losses_per_epoch.push_back(total / 8);
  }
  // ----
  REQUIRE(losses_per_epoch.size() == 5);
  CHECK(losses_per_epoch.back() < 0.5 * losses_per_epoch.front());
  CHECK(optimizer.iterations() == 40);
}

TEST_CASE("tutorial: gradcheck of the custom layer in float64", "[docs]") {
  // ---- docs/tutorial.md, "Check the layer's gradient"
  GatedResidual layer;
  Tensor x = Tensor::randn({3, 4}, DType::f64, /*seed=*/1);  // float64 input: float64 weights
  layer(x);                                                    // build
  std::vector<Variable> w = layer.weights();                   // kernel, gate
  // x, the kernel and the gate are all checked: gradcheck perturbs the weights' own storage in place.
  GradcheckResult r = gradcheck([&](const std::vector<Tensor>& in) { return layer(in[0]); },
                                {x, w[0].value(), w[1].value()});
  // r.ok is true; otherwise r.message names the input and element that disagree
  // ----
  CHECK(r.ok);
  CHECK(r.message.empty());
  CHECK(layer.dtype() == DType::f64);
}

TEST_CASE("gradcheck guide: a custom op written with loom ops", "[docs]") {
  // ---- docs/gradcheck.md, "A custom op written with loom ops" (check)
  Tensor x = Tensor::randn({2, 3}, DType::f64, /*seed=*/1);
  GradcheckResult first = gradcheck([](const std::vector<Tensor>& in) { return swish(in[0]); }, {x});
  GradcheckResult second = gradgradcheck([](const std::vector<Tensor>& in) { return swish(in[0]); }, {x});
  // ----
  CHECK(first.ok);
  CHECK(second.ok);
}

TEST_CASE("gradcheck guide: a custom op with its own backward rule", "[docs]") {
  // ---- docs/gradcheck.md, "A custom op with its own backward rule" (check)
  Tensor x = Tensor::randn({2, 3}, DType::f64, /*seed=*/1);
  auto fn = [](const std::vector<Tensor>& in) { return smooth_abs(in[0]); };
  CHECK(gradcheck(fn, {x}).ok);
  CHECK(gradgradcheck(fn, {x}).ok);  // the rule is made of loom ops, so it has a derivative too
  // ----
}

TEST_CASE("gradcheck guide: a wrong backward rule fails with a message", "[docs]") {
  // ---- docs/gradcheck.md, "What a failure looks like" (check)
  Tensor x = Tensor::randn({2, 3}, DType::f64, /*seed=*/1);
  GradcheckResult r = gradcheck([](const std::vector<Tensor>& in) { return smooth_abs_wrong(in[0]); }, {x});
  if (!r.ok) fmt::print("{}\n", r.message);
  // ----
  CHECK_FALSE(r.ok);
  CHECK(r.message ==
        "gradcheck: Jacobian mismatch for input 0 element (0, 2) and output element (0, 2): analytic 1.085944911 "
        "vs numeric 0.735616804 (allowed difference 0.000746)");
}
