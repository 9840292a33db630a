// Determinism: on one machine, the same seed gives bit-identical losses and weights, on every SIMD path
// (simd::available_isas()). Kernels cut their work by the problem's size, never by timing, and sum in a
// fixed order, so nothing depends on which thread ran which piece. Paths differ from one another in the
// last bits (FMA, vector widths), so results are compared within one path only.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "loom.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

namespace {

/// Self-attention on the flash path, a residual with dropout, layer normalization and a dense head.
class AttentionRegressor : public L::Model {
 public:
  AttentionRegressor() : Model("attention_regressor") {}

 protected:
  Tensor call(const Tensor& x, bool training) override {
    const Tensor attended = attention_(x, x, {.training = training});
    const Tensor h = norm_(x + dropout_(attended, training), training);
    return head_(hidden_(h, training), training);
  }

 private:
  L::MultiHeadAttention& attention_ =
      add_layer(L::MultiHeadAttention({.num_heads = 2, .key_dim = 8, .flash_attention = true}));
  L::Dropout& dropout_ = add_layer(L::Dropout(0.2, {.seed = 9}));
  L::LayerNormalization& norm_ = add_layer(L::LayerNormalization());
  L::Dense& hidden_ = add_layer(L::Dense(32, {.activation = "gelu"}));
  L::Dense& head_ = add_layer(L::Dense(1));
};

struct Run {
  std::vector<double> losses;
  std::vector<std::vector<double>> weights;
  bool operator==(const Run&) const = default;
};

std::pair<Tensor, Tensor> data() {
  const Tensor x = Tensor::randn({32, 24, 16}, DType::f32, 1);
  const Tensor y = ops::tanh(ops::sum(x, {-1}, /*keepdims=*/true));
  return {x, y};
}

std::vector<std::vector<double>> weight_values(const L::Model& model) {
  std::vector<std::vector<double>> out;
  for (const Variable& w : model.weights()) out.push_back(values(w.value()));
  return out;
}

/// Builds a fresh model from the seed and takes `steps` Adam steps with train_on_batch, batch by batch.
Run train_steps(std::uint64_t seed, int steps) {
  L::reset_layer_names();
  random::set_seed(seed);
  const auto [x, y] = data();
  AttentionRegressor model;
  model.compile({.optimizer = optim::Adam({.learning_rate = 1e-2}), .loss = "mse"});
  Run run;
  for (int step = 0; step < steps; ++step) {
    const std::int64_t begin = (step * 8) % 32;
    run.losses.push_back(
        model.train_on_batch(ops::slice(x, 0, begin, begin + 8), ops::slice(y, 0, begin, begin + 8)).at("loss"));
  }
  run.weights = weight_values(model);
  L::reset_layer_names();  // as the tests that follow expect to find them
  return run;
}

/// The same with Model.fit: shuffling seeded too.
Run fit(std::uint64_t seed) {
  L::reset_layer_names();
  random::set_seed(seed);
  const auto [x, y] = data();
  AttentionRegressor model;
  model.compile({.optimizer = optim::Adam({.learning_rate = 1e-2}), .loss = "mse"});
  const History history = model.fit(x, y, {.batch_size = 8, .epochs = 3, .verbose = 0, .seed = seed});
  Run run{history.history.at("loss"), weight_values(model)};
  L::reset_layer_names();  // as the tests that follow expect to find them
  return run;
}

/// Switches the SIMD path for one scope and restores the one that was active.
class ActiveIsa {
 public:
  explicit ActiveIsa(const std::string& isa) : previous_(simd::active_isa()) { simd::set_active_isa(isa); }
  ~ActiveIsa() { simd::set_active_isa(previous_); }
  ActiveIsa(const ActiveIsa&) = delete;
  ActiveIsa& operator=(const ActiveIsa&) = delete;

 private:
  std::string previous_;
};

}  // namespace

TEST_CASE("the same seed gives bit-identical losses and weights on every SIMD path", "[determinism]") {
  for (const std::string& isa : simd::available_isas()) {
    INFO("isa " << isa);
    const ActiveIsa active(isa);
    const Run first = train_steps(7, 6);
    const Run second = train_steps(7, 6);
    CHECK(first.losses == second.losses);
    CHECK(first.weights == second.weights);
    CHECK(train_steps(8, 6).losses != first.losses);  // the seed does matter
  }
}

TEST_CASE("Model.fit with a seed repeats bit for bit", "[determinism]") {
  const Run first = fit(3);
  const Run second = fit(3);
  CHECK(first.losses == second.losses);
  CHECK(first.weights == second.weights);
  CHECK(fit(4).losses != first.losses);
}
