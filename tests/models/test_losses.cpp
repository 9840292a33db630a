#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <map>
#include <string>

#include "framework/autograd/gradcheck.hpp"
#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "loom.hpp"
#include "models/losses.hpp"
#include "tests/fixture_reader.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;

namespace {

/// One case of tests/fixtures/loss_fixtures.txt (see make_loss_fixtures.py for the format).
struct LossCase {
  std::string name, loss;
  bool from_logits = false;
  double label_smoothing = 0.0;
  std::int64_t axis = -1;
  double delta = 1.0;
  bool exact = false;  // computed with keras's mean reducing in float64 (the losses added later)
  std::map<std::string, FixtureArray> arrays;  // y_true, y_pred, loss, grad, loss32
};

std::vector<LossCase> read_cases() {
  std::vector<LossCase> cases;
  for (const FixtureCase& f : read_fixture_cases("loss_fixtures.txt")) {
    REQUIRE(f.words.size() == 1);  // the loss's name
    cases.push_back({f.name, f.words[0], f.option("from_logits") == "1", std::stod(f.option("label_smoothing")),
                     std::stoll(f.option("axis")), std::stod(f.option_or("delta", "1.0")),
                     f.option_or("exact", "0") == "1", f.arrays});
  }
  return cases;
}

Tensor call_loss(const LossCase& c, const Tensor& y_true, const Tensor& y_pred) {
  if (c.loss == "mean_squared_error") return losses::mean_squared_error(y_true, y_pred);
  if (c.loss == "mean_absolute_error") return losses::mean_absolute_error(y_true, y_pred);
  if (c.loss == "binary_crossentropy")
    return losses::binary_crossentropy(y_true, y_pred, {.from_logits = c.from_logits, .label_smoothing = c.label_smoothing, .axis = c.axis});
  if (c.loss == "categorical_crossentropy")
    return losses::categorical_crossentropy(y_true, y_pred, {.from_logits = c.from_logits, .label_smoothing = c.label_smoothing, .axis = c.axis});
  if (c.loss == "huber") return losses::huber(y_true, y_pred, {.delta = c.delta});
  if (c.loss == "kl_divergence") return losses::kl_divergence(y_true, y_pred);
  if (c.loss == "log_cosh") return losses::log_cosh(y_true, y_pred);
  if (c.loss == "cosine_similarity") return losses::cosine_similarity(y_true, y_pred, {.axis = c.axis});
  if (c.loss == "poisson") return losses::poisson(y_true, y_pred);
  if (c.loss == "hinge") return losses::hinge(y_true, y_pred);
  if (c.loss == "squared_hinge") return losses::squared_hinge(y_true, y_pred);
  if (c.loss == "categorical_hinge") return losses::categorical_hinge(y_true, y_pred);
  if (c.loss == "mean_squared_logarithmic_error") return losses::mean_squared_logarithmic_error(y_true, y_pred);
  if (c.loss == "mean_absolute_percentage_error") return losses::mean_absolute_percentage_error(y_true, y_pred);
  REQUIRE(c.loss == "sparse_categorical_crossentropy");
  return losses::sparse_categorical_crossentropy(y_true, y_pred, {.from_logits = c.from_logits, .axis = c.axis});
}

Tensor y_true_of(const LossCase& c, DType dtype) {
  const FixtureArray& a = c.arrays.at("y_true");
  if (c.loss != "sparse_categorical_crossentropy") return Tensor::from_vector(a.values, a.shape).to(dtype);
  std::vector<std::int64_t> labels(a.values.begin(), a.values.end());
  return Tensor::from_vector(labels, a.shape);
}

/// Probabilities in [0.05, 0.95]: away from the clipping bounds, where the loss is smooth.
Tensor probabilities(const Shape& shape, std::uint64_t seed) {
  return Tensor::uniform(shape, 0.05, 0.95, DType::f64, seed);
}

}  // namespace

TEST_CASE("losses match Keras on the reference fixtures (values and gradients)", "[losses]") {
  const auto cases = read_cases();
  REQUIRE(cases.size() >= 50);
  for (const LossCase& c : cases) {
    INFO("case " << c.name);
    const FixtureArray& pred = c.arrays.at("y_pred");
    const FixtureArray& want_loss = c.arrays.at("loss");
    const FixtureArray& want_grad = c.arrays.at("grad");
    // float64: Keras's mean reduces in float32 (see the script), hence 1e-6 rather than 1e-12, except for the
    // cases computed with an exact mean.
    const double tol = c.exact ? 1e-12 : 1e-6, atol = c.exact ? 1e-12 : 1e-9;
    const Tensor y_pred = Tensor::from_vector(pred.values, pred.shape);
    GradientTape tape;
    tape.watch(y_pred);
    const Tensor loss = call_loss(c, y_true_of(c, DType::f64), y_pred);
    CHECK(loss.shape() == want_loss.shape);
    check_close(values(loss), want_loss.values, tol, atol);
    const Tensor grad = tape.gradient(ops::sum(loss), {y_pred})[0];
    check_close(values(grad), want_grad.values, tol, atol);
    // float32 against Keras in float32 (clipping at 1 - 1e-7 rounds differently there)
    const Tensor loss32 = call_loss(c, y_true_of(c, DType::f32), y_pred.to(DType::f32));
    CHECK(loss32.dtype() == DType::f32);
    check_close(values(loss32), c.arrays.at("loss32").values, 1e-5, 1e-6);
  }
}

TEST_CASE("crossentropy from logits of +-1e4 is finite, with finite gradients", "[losses]") {
  for (DType dtype : {DType::f32, DType::f64}) {
    const Tensor logits = Tensor::from_vector(std::vector<double>{1e4, -1e4, 0, -1e4, 1e4, 0}, {2, 3}).to(dtype);
    const Tensor onehot = Tensor::from_vector(std::vector<double>{0, 1, 0, 0, 1, 0}, {2, 3}).to(dtype);
    const Tensor labels = Tensor::from_vector(std::vector<std::int64_t>{1, 1});
    GradientTape tape({.persistent = true});
    tape.watch(logits);
    const Tensor cce = losses::categorical_crossentropy(onehot, logits, {.from_logits = true});
    const Tensor scce = losses::sparse_categorical_crossentropy(labels, logits, {.from_logits = true});
    const Tensor bce = losses::binary_crossentropy(onehot, logits, {.from_logits = true});
    CHECK(values(cce) == std::vector<double>{2e4, 0});
    CHECK(values(scce) == std::vector<double>{2e4, 0});
    check_close(values(bce), {(2e4 + std::log(2.0)) / 3, std::log(2.0) / 3}, 1e-6, 1e-6);
    for (const Tensor& l : {cce, scce, bce})
      for (double g : values(tape.gradient(ops::sum(l), {logits})[0])) CHECK(std::isfinite(g));
  }
}

TEST_CASE("losses reduce over the last axis like keras.losses", "[losses]") {
  const Tensor t = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor p = Tensor::from_vector(std::vector<double>{1, 0, 3, 4, 5, 9}, {2, 3});
  CHECK(values(losses::mean_squared_error(t, p)) == std::vector<double>{4.0 / 3, 3});
  CHECK(values(losses::mean_absolute_error(t, p)) == std::vector<double>{2.0 / 3, 1});
  // Keras's squeeze_or_expand_to_same_rank: [N] targets with [N, 1] predictions compare elementwise
  const Tensor col = Tensor::from_vector(std::vector<double>{1, 2, 3}, {3, 1});
  const Tensor flat = Tensor::from_vector(std::vector<double>{1, 4, 0});
  CHECK(values(losses::mean_squared_error(flat, col)) == std::vector<double>{0, 4, 9});
  CHECK(values(losses::mean_absolute_error(col, flat)) == std::vector<double>{0, 2, 3});
  // [2, 3, 1] with [2, 3]: the trailing 1 is squeezed
  const Tensor p3 = Tensor::randn({2, 3}, DType::f64, 3);
  CHECK(losses::mean_squared_error(p3.reshape({2, 3, 1}), p3).shape() == Shape{2});
  // categorical along axis 0 equals the transposed problem along the last axis
  const Tensor q = probabilities({3, 4}, 4);
  const Tensor y = ops::one_hot(Tensor::from_vector(std::vector<std::int64_t>{0, 2, 1, 2}), 3, DType::f64);
  check_close(values(losses::categorical_crossentropy(y.transpose(), q, {.from_logits = false, .label_smoothing = 0.1, .axis = 0})),
              values(losses::categorical_crossentropy(y, q.transpose(), {.from_logits = false, .label_smoothing = 0.1, .axis = -1})), 1e-12, 1e-12);
  check_close(values(losses::sparse_categorical_crossentropy(Tensor::from_vector(std::vector<std::int64_t>{0, 2, 1, 2}), q, {.from_logits = true, .axis = 0})),
              values(losses::categorical_crossentropy(y, q.transpose(), {.from_logits = true})), 1e-12, 1e-12);
}

TEST_CASE("y_true is cast to y_pred's dtype, as Keras does", "[losses]") {
  const Tensor t32 = Tensor::from_vector(std::vector<float>{0, 1, 1, 0}, {2, 2});
  const Tensor p64 = Tensor::from_vector(std::vector<double>{0.2, 0.7, 0.9, 0.4}, {2, 2});
  const Tensor l = losses::binary_crossentropy(t32, p64);
  CHECK(l.dtype() == DType::f64);
  CHECK(values(l) == values(losses::binary_crossentropy(t32.to(DType::f64), p64)));
  CHECK(losses::mean_squared_error(p64, p64.to(DType::f32)).dtype() == DType::f32);
}

TEST_CASE("sparse categorical crossentropy equals categorical on one-hot targets", "[losses]") {
  const Tensor logits = Tensor::randn({2, 3, 5}, DType::f64, 8) * 2.0;
  const Tensor labels = Tensor::from_vector(std::vector<std::int64_t>{0, 4, 2, 1, 1, 3}, {2, 3});
  const Tensor onehot = ops::one_hot(labels, 5, DType::f64);
  for (bool from_logits : {true, false}) {
    const Tensor pred = from_logits ? logits : ops::softmax(logits);
    check_close(values(losses::sparse_categorical_crossentropy(labels, pred, {.from_logits = from_logits})),
                values(losses::categorical_crossentropy(onehot, pred, {.from_logits = from_logits})), 1e-12, 1e-12);
  }
  // labels with a trailing class axis of 1 are accepted, as in Keras
  CHECK(losses::sparse_categorical_crossentropy(labels.reshape({2, 3, 1}), logits, {.from_logits = true}).shape() == Shape{2, 3});
}

TEST_CASE("every loss passes gradcheck in float64", "[losses][gradcheck]") {
  const Tensor x = Tensor::randn({3, 4}, DType::f64, 10);
  const Tensor xt = Tensor::randn({4, 3}, DType::f64, 11).transpose();  // non-contiguous y_pred
  const Tensor target = Tensor::randn({3, 4}, DType::f64, 12);
  const Tensor bits = Tensor::uniform({3, 4}, 0.0, 1.0, DType::f64, 13);  // soft binary targets
  const Tensor onehot = ops::one_hot(Tensor::from_vector(std::vector<std::int64_t>{3, 0, 2}), 4, DType::f64);
  const Tensor labels = Tensor::from_vector(std::vector<std::int64_t>{3, 0, 2});
  const Tensor p = probabilities({3, 4}, 14);
  const Tensor pt = probabilities({4, 3}, 15).transpose();

  for (const Tensor& pred : {x, xt}) {
    require_gradcheck([&](const auto& in) { return losses::mean_squared_error(target, in[0]); }, {pred});
    require_gradcheck([&](const auto& in) { return losses::mean_absolute_error(target, in[0]); }, {pred});
    // gradients with respect to the targets too
    require_gradcheck([&](const auto& in) { return losses::mean_squared_error(in[0], pred); }, {target});
  }
  for (double smoothing : {0.0, 0.2}) {
    INFO("label_smoothing " << smoothing);
    for (const Tensor& logits : {x, xt}) {
      require_gradcheck([&](const auto& in) { return losses::binary_crossentropy(bits, in[0], {.from_logits = true, .label_smoothing = smoothing}); },
                        {logits});
      require_gradcheck(
          [&](const auto& in) { return losses::categorical_crossentropy(onehot, in[0], {.from_logits = true, .label_smoothing = smoothing}); }, {logits});
    }
    for (const Tensor& probs : {p, pt}) {
      require_gradcheck([&](const auto& in) { return losses::binary_crossentropy(bits, in[0], {.from_logits = false, .label_smoothing = smoothing}); },
                        {probs});
      require_gradcheck(
          [&](const auto& in) { return losses::categorical_crossentropy(onehot, in[0], {.from_logits = false, .label_smoothing = smoothing}); }, {probs});
    }
    require_gradcheck([&](const auto& in) { return losses::binary_crossentropy(bits, in[0], {.from_logits = true, .label_smoothing = smoothing, .axis = 0}); },
                      {x});
    const Tensor onehot_t = onehot.transpose();  // classes along axis 0
    require_gradcheck(
        [&](const auto& in) { return losses::categorical_crossentropy(onehot_t, in[0], {.from_logits = false, .label_smoothing = smoothing, .axis = 0}); },
        {pt.transpose()});
    require_gradcheck([&](const auto& in) { return losses::binary_crossentropy(in[0], p, {.from_logits = false, .label_smoothing = smoothing}); },
                      {bits});
  }
  for (bool from_logits : {true, false}) {
    require_gradcheck(
        [&](const auto& in) { return losses::sparse_categorical_crossentropy(labels, in[0], {.from_logits = from_logits}); },
        {from_logits ? xt : pt});
    require_gradcheck(
        [&](const auto& in) { return losses::sparse_categorical_crossentropy(labels, in[0], {.from_logits = from_logits, .axis = 0}); },
        {from_logits ? xt.transpose() : pt.transpose()});
  }
}

TEST_CASE("crossentropy losses have second derivatives", "[losses][gradcheck]") {
  const Tensor x = Tensor::randn({2, 3}, DType::f64, 20);
  const Tensor bits = Tensor::uniform({2, 3}, 0.0, 1.0, DType::f64, 21);
  const Tensor onehot = ops::one_hot(Tensor::from_vector(std::vector<std::int64_t>{2, 0}), 3, DType::f64);
  const Tensor labels = Tensor::from_vector(std::vector<std::int64_t>{2, 0});
  require_gradgradcheck([&](const auto& in) { return losses::binary_crossentropy(bits, in[0], {.from_logits = true}); }, {x});
  require_gradgradcheck([&](const auto& in) { return losses::categorical_crossentropy(onehot, in[0], {.from_logits = true}); }, {x});
  require_gradgradcheck([&](const auto& in) { return losses::sparse_categorical_crossentropy(labels, in[0], {.from_logits = true}); },
                        {x});
  require_gradgradcheck([&](const auto& in) { return losses::mean_squared_error(bits, in[0]); }, {x});
}

TEST_CASE("losses reject mismatched shapes, naming both", "[losses][errors]") {
  const Tensor a = Tensor::zeros({2, 3}, DType::f64);
  const Tensor b = Tensor::zeros({2, 4}, DType::f64);
  for (const auto& [name, loss] : std::vector<std::pair<std::string, std::function<Tensor()>>>{
           {"mean_squared_error", [&] { return losses::mean_squared_error(a, b); }},
           {"mean_absolute_error", [&] { return losses::mean_absolute_error(a, b); }},
           {"binary_crossentropy", [&] { return losses::binary_crossentropy(a, b); }},
           {"categorical_crossentropy", [&] { return losses::categorical_crossentropy(a, b, {.from_logits = true}); }}}) {
    REQUIRE_THROWS_WITH(loss(), Catch::Contains(name) && Catch::Contains("[2, 3]") && Catch::Contains("[2, 4]"));
  }
}

TEST_CASE("sparse categorical crossentropy rejects bad labels", "[losses][errors]") {
  const Tensor logits = Tensor::zeros({2, 3}, DType::f64);
  const std::string op = "sparse_categorical_crossentropy";
  REQUIRE_THROWS_WITH(losses::sparse_categorical_crossentropy(f64({1, 0.25}, {2}), logits, {.from_logits = true}),
                      Catch::Contains(op) && Catch::Contains("class ids") && Catch::Contains("0.25") &&
                          Catch::Contains("f64"));
  REQUIRE_THROWS_WITH(
      losses::sparse_categorical_crossentropy(Tensor::from_vector(std::vector<std::int64_t>{0, 1, 2}), logits, {.from_logits = true}),
      Catch::Contains(op) && Catch::Contains("[3]") && Catch::Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(
      losses::sparse_categorical_crossentropy(Tensor::from_vector(std::vector<std::int64_t>{0, 3}), logits, {.from_logits = true}),
      Catch::Contains(op) && Catch::Contains("label 3") && Catch::Contains("[1]") && Catch::Contains("< 3"));
  REQUIRE_THROWS_WITH(
      losses::sparse_categorical_crossentropy(Tensor::from_vector(std::vector<std::int64_t>{0, 1}), logits, {.from_logits = true, .axis = 2}),
      Catch::Contains(op) && Catch::Contains("rank 2"));
}

TEST_CASE("losses reject non-float predictions and bad options", "[losses][errors]") {
  const Tensor ints = Tensor::arange(4).reshape({2, 2});
  const Tensor f = Tensor::zeros({2, 2}, DType::f64);
  REQUIRE_THROWS_WITH(losses::mean_squared_error(f, ints), Catch::Contains("mean_squared_error") &&
                                                               Catch::Contains("float"));
  REQUIRE_THROWS_WITH(losses::sparse_categorical_crossentropy(ints, ints), Catch::Contains("float"));
  REQUIRE_THROWS_WITH(losses::binary_crossentropy(f, f, {.from_logits = false, .label_smoothing = 1.5}), Catch::Contains("binary_crossentropy") &&
                                                                         Catch::Contains("label_smoothing"));
  REQUIRE_THROWS_WITH(losses::categorical_crossentropy(f, f, {.from_logits = false, .label_smoothing = 0.0, .axis = 2}),
                      Catch::Contains("categorical_crossentropy") && Catch::Contains("rank 2"));
  REQUIRE_THROWS_WITH(losses::mean_absolute_error(Tensor::scalar(1.0), Tensor::scalar(1.0)),
                      Catch::Contains("mean_absolute_error") && Catch::Contains("rank"));
  REQUIRE_THROWS_WITH(losses::mean_squared_error(Tensor(), f), Catch::Contains("mean_squared_error") &&
                                                                   Catch::Contains("undefined"));
}

namespace {

using LossFn = std::function<Tensor(const Tensor&, const Tensor&)>;

/// The losses beyond mse, mae and the crossentropies, by Keras function name.
const std::vector<std::pair<std::string, LossFn>> kOtherLosses = {
    {"huber", [](const Tensor& t, const Tensor& p) { return losses::huber(t, p); }},
    {"kl_divergence", losses::kl_divergence},
    {"log_cosh", losses::log_cosh},
    {"cosine_similarity", [](const Tensor& t, const Tensor& p) { return losses::cosine_similarity(t, p); }},
    {"poisson", losses::poisson},
    {"hinge", losses::hinge},
    {"squared_hinge", losses::squared_hinge},
    {"categorical_hinge", losses::categorical_hinge},
    {"mean_squared_logarithmic_error", losses::mean_squared_logarithmic_error},
    {"mean_absolute_percentage_error", losses::mean_absolute_percentage_error}};

}  // namespace

TEST_CASE("the other Keras losses pass gradcheck in float64", "[losses][gradcheck]") {
  // Inputs keep away from the kinks: |error| vs delta, hinge margins at 0, the clipping bounds, MAPE's |t - p|.
  const Tensor t = f64({0.3, -1.2, 0.8, 2.0, -0.5, 1.1}, {2, 3});
  const Tensor e = f64({0.4, -1.6, 0.7, -2.5, 0.2, 1.3}, {2, 3});  // |e| not near 1 (huber's delta)
  const Tensor probs_t = f64({0.2, 0.3, 0.5, 0.6, 0.1, 0.3}, {2, 3});
  const Tensor probs_p = f64({0.25, 0.45, 0.3, 0.2, 0.5, 0.3}, {2, 3});
  const Tensor counts = f64({0, 2, 1, 3, 1, 0}, {2, 3});
  const Tensor bits = f64({0, 1, 1, 1, 0, 0}, {2, 3});
  const Tensor margins = f64({0.4, 0.3, 1.6, -0.2, -0.7, 0.5}, {2, 3});  // 1 - (2 bits - 1) p: never 0
  const Tensor onehot = f64({0, 1, 0, 1, 0, 0}, {2, 3});
  const Tensor scores = f64({0.2, 0.6, 0.1, 0.3, 0.9, -0.4}, {2, 3});  // a unique max off the label
  const Tensor positive = f64({0.5, 2.0, 0.0, 1.5, 0.2, 3.0}, {2, 3});
  require_gradcheck([&](const auto& in) { return losses::huber(t, in[0]); }, {t + e});
  require_gradcheck([&](const auto& in) { return losses::huber(t, in[0], {.delta = 2.0}); }, {t + e});
  require_gradcheck([&](const auto& in) { return losses::kl_divergence(probs_t, in[0]); }, {probs_p});
  require_gradcheck([&](const auto& in) { return losses::kl_divergence(in[0], probs_p); }, {probs_t});
  require_gradcheck([&](const auto& in) { return losses::log_cosh(t, in[0]); }, {t + e * 3.0});
  require_gradcheck([&](const auto& in) { return losses::cosine_similarity(t, in[0]); }, {t + e});
  require_gradcheck([&](const auto& in) { return losses::cosine_similarity(t, in[0], {.axis = 0}); }, {t + e});
  require_gradcheck([&](const auto& in) { return losses::poisson(counts, in[0]); }, {probs_p * 4.0});
  require_gradcheck([&](const auto& in) { return losses::hinge(bits, in[0]); }, {margins});
  require_gradcheck([&](const auto& in) { return losses::hinge(2.0 * bits - 1.0, in[0]); }, {margins});
  require_gradcheck([&](const auto& in) { return losses::squared_hinge(bits, in[0]); }, {margins});
  require_gradcheck([&](const auto& in) { return losses::categorical_hinge(onehot, in[0]); }, {scores});
  require_gradcheck([&](const auto& in) { return losses::mean_squared_logarithmic_error(positive, in[0]); },
                    {probs_p * 3.0});
  require_gradcheck([&](const auto& in) { return losses::mean_absolute_percentage_error(t, in[0]); }, {t + e});
  // non-contiguous y_pred
  const Tensor pt = f64({0.4, -2.5, -1.6, 0.2, 0.7, 1.3}, {3, 2}).transpose();
  require_gradcheck([&](const auto& in) { return losses::log_cosh(t, in[0]); }, {pt});
  require_gradcheck([&](const auto& in) { return losses::cosine_similarity(t, in[0]); }, {pt});
}

TEST_CASE("hinge converts 0/1 labels to -1/1 and keeps other labels", "[losses]") {
  const Tensor p = f64({0.5, -0.25, 2.0, 0.0}, {1, 4});
  CHECK(values(losses::hinge(f64({0, 1, 1, 0}, {1, 4}), p)) == values(losses::hinge(f64({-1, 1, 1, -1}, {1, 4}), p)));
  // 0.5 is neither 0 nor 1, so nothing is converted: margins 1 - t p with t as given
  check_close(values(losses::hinge(f64({0, 1, 0.5, 0}, {1, 4}), p)), {(1 + 1.25 + 0 + 1) / 4.0});
  CHECK(values(losses::cosine_similarity(f64({0, 0, 0}, {1, 3}), f64({1, 2, 3}, {1, 3}))) == std::vector<double>{0});
}

TEST_CASE("the other losses reject mismatched shapes, naming the loss and both shapes", "[losses][errors]") {
  const Tensor a = Tensor::zeros({2, 3}, DType::f64);
  const Tensor b = Tensor::ones({2, 4}, DType::f64);
  for (const auto& [name, loss] : kOtherLosses) {
    INFO(name);
    REQUIRE_THROWS_WITH(loss(a, b), Catch::Contains(name) && Catch::Contains("[2, 3]") && Catch::Contains("[2, 4]"));
  }
  REQUIRE_THROWS_WITH(losses::huber(a, a, {.delta = -1.0}), Catch::Contains("huber") && Catch::Contains("delta"));
  REQUIRE_THROWS_WITH(losses::cosine_similarity(a, a, {.axis = 2}),
                      Catch::Contains("cosine_similarity") && Catch::Contains("rank 2"));
}

TEST_CASE("compile reaches the other losses by Keras name, alias and class name", "[losses][model]") {
  const std::vector<std::pair<std::vector<std::string>, LossFn>> names = {
      {{"huber", "Huber"}, kOtherLosses[0].second},
      {{"kl_divergence", "kld", "KLD", "kullback_leibler_divergence", "KLDivergence"}, losses::kl_divergence},
      {{"log_cosh", "logcosh", "LogCosh"}, losses::log_cosh},
      {{"cosine_similarity", "CosineSimilarity"}, kOtherLosses[3].second},
      {{"poisson", "Poisson"}, losses::poisson},
      {{"hinge", "Hinge"}, losses::hinge},
      {{"squared_hinge", "SquaredHinge"}, losses::squared_hinge},
      {{"categorical_hinge", "CategoricalHinge"}, losses::categorical_hinge},
      {{"mean_squared_logarithmic_error", "msle", "MSLE", "MeanSquaredLogarithmicError"},
       losses::mean_squared_logarithmic_error},
      {{"mean_absolute_percentage_error", "mape", "MAPE", "MeanAbsolutePercentageError"},
       losses::mean_absolute_percentage_error}};
  const Tensor x = Tensor::randn({6, 3}, DType::f64, 30);
  const Tensor y = ops::softmax(Tensor::randn({6, 4}, DType::f64, 31));
  for (const auto& [aliases, fn] : names) {
    for (const std::string& name : aliases) {
      INFO(name);
      auto model = layers::Sequential({layers::Input({3}, {.dtype = DType::f64}), layers::Dense(4, {.activation = "softmax"})});
      model.compile({.optimizer = "sgd", .loss = name});
      const double want = values(ops::mean(fn(y, model.predict(x, {.verbose = 0}))))[0];
      CHECK(model.evaluate(x, y, {.verbose = 0}).at("loss") == Approx(want).epsilon(1e-12));
    }
  }
}

TEST_CASE("the loss classes with options compile, and a fit step lowers the loss", "[losses][model]") {
  const Tensor x = Tensor::randn({16, 3}, DType::f64, 40);
  const Tensor y = ops::matmul(x, f64({1.0, -2.0, 0.5, 0.3, 0.2, -1.0}, {3, 2})) * 3.0;
  for (const layers::LossArg& loss : {layers::LossArg("huber"), layers::LossArg(losses::Huber({.delta = 2.0})),
                                      layers::LossArg("log_cosh"), layers::LossArg(losses::CosineSimilarity({.axis = -1}))}) {
    auto model = layers::Sequential({layers::Input({3}, {.dtype = DType::f64}), layers::Dense(2)});
    model.compile({.optimizer = "sgd", .loss = loss});
    const double before = model.evaluate(x, y, {.verbose = 0}).at("loss");
    model.fit(x, y, {.batch_size = 16, .epochs = 1, .verbose = 0});
    CHECK(model.evaluate(x, y, {.verbose = 0}).at("loss") < before);
  }
  // the class form computes the function with its options, reduced over the batch
  const Tensor t = f64({0, 0}, {1, 2}), p = f64({1.5, -3}, {1, 2});
  CHECK(values(losses::Huber({.delta = 2.0}).call(t, p)) == values(losses::huber(t, p, {.delta = 2.0})));
  CHECK(values(losses::Huber()(t, p)) == std::vector<double>{(1.5 - 0.5 + 3.0 - 0.5) / 2});
}
