// Threads: tapes, random generators and layer names are per thread, and the shared pieces (the kernel
// thread pool, OpenBLAS, the flash attention workers) give each caller the same bits whatever runs beside
// it. Two models trained at once in two threads must end exactly where the same two trainings end when run
// one after the other. Small on purpose: this file also runs under ThreadSanitizer.
#include <catch2/catch.hpp>

#include <cstdint>
#include <exception>
#include <functional>
#include <latch>
#include <thread>
#include <utility>
#include <vector>

#include "loom.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

namespace {

/// What a training run leaves: the loss of every epoch and every weight's values.
struct Trained {
  std::vector<double> losses;
  std::vector<std::vector<double>> weights;
  bool operator==(const Trained&) const = default;
};

/// Builds, compiles and fits a small encoder (flash attention, layer norm, dropout, dense) from `seed`
/// alone: the weights from this thread's generator, the data, the dropout masks and the shuffling.
Trained train_encoder(std::uint64_t seed) {
  L::reset_layer_names();
  random::set_seed(seed);
  const Tensor x = Tensor::randn({16, 8, 8}, DType::f32, seed + 1);
  const Tensor y = Tensor::randn({16, 8, 1}, DType::f32, seed + 2);
  auto model = L::Sequential(
      {L::Input({8, 8}),
       L::TransformerEncoder({.num_heads = 2, .ff_dim = 16, .dropout = 0.1, .flash_attention = true}),
       L::Dense(1)});
  model.compile({.optimizer = optim::Adam({.learning_rate = 1e-2}), .loss = "mse"});
  const History history = model.fit(x, y, {.batch_size = 8, .epochs = 2, .verbose = 0, .seed = seed + 3});
  Trained out{history.history.at("loss"), {}};
  for (const Variable& w : model.weights()) out.weights.push_back(values(w.value()));
  return out;
}

/// A custom loop on a float64 MLP with its own tape and an explicit optimizer.
Trained train_mlp(std::uint64_t seed) {
  L::reset_layer_names();
  random::set_seed(seed);
  const Tensor x = Tensor::randn({32, 4}, DType::f64, seed + 1);
  const Tensor y = ops::tanh(ops::sum(x, {-1}, /*keepdims=*/true));
  auto model = L::Sequential({L::Input({4}, {.dtype = DType::f64}), L::Dense(16, {.activation = "gelu"}),
                              L::Dropout(0.2), L::Dense(1)});
  optim::SGD optimizer({.learning_rate = 0.1, .momentum = 0.9});
  Trained out;
  for (int step = 0; step < 6; ++step) {
    GradientTape tape;
    const Tensor loss = ops::mean(losses::mean_squared_error(y, model(x, /*training=*/true)));
    optimizer.apply_gradients(tape.gradient(loss, model.trainable_weights()), model.trainable_weights());
    out.losses.push_back(loss.item<double>());
  }
  for (const Variable& w : model.weights()) out.weights.push_back(values(w.value()));
  return out;
}

using Training = std::function<Trained(std::uint64_t)>;

/// Runs `body` on a new thread and rethrows what it threw. Every training here runs on a thread of its own,
/// so the test thread's layer names (per thread) stay as the tests that follow expect them.
std::thread start_thread(std::function<void()> body, std::exception_ptr& error) {
  return std::thread([body = std::move(body), &error] {
    try {
      body();
    } catch (...) {
      error = std::current_exception();
    }
  });
}

void rethrow_any(const std::vector<std::exception_ptr>& errors) {
  for (const std::exception_ptr& error : errors)
    if (error) std::rethrow_exception(error);
}

/// train(seed_a), then train(seed_b), on one thread.
std::pair<Trained, Trained> one_after_the_other(const Training& train, std::uint64_t seed_a, std::uint64_t seed_b) {
  std::pair<Trained, Trained> out;
  std::vector<std::exception_ptr> errors(1);
  start_thread([&] { out = {train(seed_a), train(seed_b)}; }, errors[0]).join();
  rethrow_any(errors);
  return out;
}

/// train(seed_a) and train(seed_b) in two threads that start together.
std::pair<Trained, Trained> at_once(const Training& train, std::uint64_t seed_a, std::uint64_t seed_b) {
  std::pair<Trained, Trained> out;
  std::vector<std::exception_ptr> errors(2);
  std::latch start(2);
  std::thread a = start_thread([&] { start.arrive_and_wait(); out.first = train(seed_a); }, errors[0]);
  std::thread b = start_thread([&] { start.arrive_and_wait(); out.second = train(seed_b); }, errors[1]);
  a.join();
  b.join();
  rethrow_any(errors);
  return out;
}

}  // namespace

TEST_CASE("two models trained at once in two threads end bitwise where sequential training ends", "[threads]") {
  const auto [first, second] = one_after_the_other(train_encoder, 11, 22);
  REQUIRE(first != second);  // different seeds, so a mix-up between the threads would show

  const auto [in_thread_a, in_thread_b] = at_once(train_encoder, 11, 22);
  CHECK(in_thread_a == first);
  CHECK(in_thread_b == second);
}

TEST_CASE("custom training loops with tapes in two threads at once match sequential ones", "[threads]") {
  const auto [first, second] = one_after_the_other(train_mlp, 5, 6);
  const auto [in_thread_a, in_thread_b] = at_once(train_mlp, 5, 6);
  CHECK(in_thread_a == first);
  CHECK(in_thread_b == second);
}

TEST_CASE("a tape destroyed on another thread leaves its creating thread safe", "[threads]") {
  const Tensor x = f64({1.0, 2.0}, {2});
  // Created here, destroyed on a second thread while this one goes on recording with a new tape.
  auto handed_over = std::make_unique<GradientTape>();
  handed_over->watch(x);
  std::thread destroyer([tape = std::move(handed_over)]() mutable { tape.reset(); });
  destroyer.join();
  {
    GradientTape tape;
    tape.watch(x);
    const std::vector<Tensor> g = tape.gradient(ops::sum(ops::square(x)), {x});
    CHECK(values(g[0]) == std::vector<double>{2.0, 4.0});
  }
  // Created on a thread that has ended, destroyed here.
  std::unique_ptr<GradientTape> orphan;
  std::thread creator([&] {
    orphan = std::make_unique<GradientTape>(GradientTapeOptions{.persistent = true});
    orphan->watch(x);
    const Tensor z = ops::sum(x * 3.0);
    CHECK(values(orphan->gradient(z, {x})[0]) == std::vector<double>{3.0, 3.0});
  });
  creator.join();
  orphan.reset();
  CHECK(values(ops::sum(x * 2.0)) == std::vector<double>{6.0});
}

TEST_CASE("a tape records only its own thread: the optimizer says so, as TensorFlow's does", "[threads]") {
  Variable w(f64({1.0, 2.0}, {2}), "w");
  GradientTape tape;
  Tensor loss;
  std::thread other([&] { loss = ops::sum(ops::square(w.value())); });  // not recorded: another thread
  other.join();
  CHECK(tape.recorded_ops().empty());
  const std::vector<Tensor> grads = tape.gradient(loss, std::vector<Variable>{w}, {}, UnconnectedGradients::none);
  CHECK_FALSE(grads[0].defined());
  optim::SGD sgd;
  CHECK_THROWS_WITH(sgd.apply_gradients(grads, {w}),
                    Catch::Contains("no gradient provided for any of the 1 variables"));
}
