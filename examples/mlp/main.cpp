// The smallest complete training program: a multilayer perceptron that learns to tell three interleaved
// spirals apart, written the way it is written in Keras (docs/training.md shows the Python next to it).
//
//   ./build/examples/mlp            trains, prints the progress bar, the summary and the test accuracy
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "loom.hpp"

using namespace loom;
namespace L = loom::layers;

namespace {

// Three spiral arms of `per_class` points each, with a little noise: points (x, y) and labels 0, 1, 2.
// Shuffled, so that validation_split (which takes the last samples) sees every class.
std::pair<Tensor, Tensor> spirals(std::int64_t per_class, std::uint64_t seed) {
  random::Generator rng(seed);
  std::vector<float> points;
  std::vector<std::int64_t> labels;
  for (std::int64_t arm = 0; arm < 3; ++arm) {
    for (std::int64_t i = 0; i < per_class; ++i) {
      const double radius = double(i) / double(per_class);
      const double angle = 4.0 * radius + 2.0 * M_PI * double(arm) / 3.0 + 0.2 * rng.normal();
      points.insert(points.end(), {float(radius * std::cos(angle)), float(radius * std::sin(angle))});
      labels.push_back(arm);
    }
  }
  const std::int64_t n = 3 * per_class;
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) order[std::size_t(i)] = i;
  for (std::int64_t i = n - 1; i > 0; --i) std::swap(order[std::size_t(i)], order[rng.next() % std::uint64_t(i + 1)]);
  const Tensor ids = Tensor::from_vector(order, Shape{n});
  return {ops::take(Tensor::from_vector(points, Shape{n, 2}), ids, 0),
          ops::take(Tensor::from_vector(labels, Shape{n}), ids, 0)};
}

}  // namespace

int main() {
  random::set_seed(42);  // weights, shuffling: the same run every time
  auto [x, y] = spirals(/*per_class=*/500, /*seed=*/1);
  auto [x_test, y_test] = spirals(/*per_class=*/200, /*seed=*/2);

  auto model = L::Sequential({
      L::Input({2}),
      L::Dense(64, {.activation = "relu"}),
      L::Dense(64, {.activation = "relu"}),
      L::Dense(3),
  });
  model.compile({.optimizer = optim::Adam({.learning_rate = 1e-2}),
                 .loss = [](const Tensor& labels, const Tensor& logits) {
                   return losses::sparse_categorical_crossentropy(labels, logits, {.from_logits = true});
                 },
                 .metrics = {"accuracy"}});
  model.summary();

  History history = model.fit(x, y, {.batch_size = 32, .epochs = 30,
                                     .callbacks = {L::EarlyStopping({.monitor = "val_loss", .patience = 5,
                                                                     .restore_best_weights = true})},
                                     .validation_split = 0.2});

  const L::Logs test = model.evaluate(x_test, y_test, {.verbose = 0});
  fmt::print("\ntrained {} epochs; best val_accuracy {:.4f}; test accuracy {:.4f}, test loss {:.4f}\n",
             history.epoch.size(), *std::max_element(history.history["val_accuracy"].begin(),
                                                     history.history["val_accuracy"].end()),
             test.at("accuracy"), test.at("loss"));
  model.save_weights("mlp.safetensors");
  fmt::print("weights written to mlp.safetensors\n");
  return test.at("accuracy") > 0.9 ? 0 : 1;
}
