// loom::distributed under mpiexec (tests/CMakeLists.txt runs it on 2 and on 3 ranks). Catch's runner would
// let ranks disagree about which checks run and leave some waiting in a collective call, so this is a plain
// program: every rank runs every check in the same order, and it fails on every rank if a check failed on any.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <unistd.h>

#include "loom.hpp"

using namespace loom;
namespace L = loom::layers;

namespace {

int failures = 0;

void expect(bool condition, const std::string& what) {
  if (condition) return;
  ++failures;
  fmt::print(stderr, "rank {}: FAILED: {}\n", distributed::rank(), what);
}

// A misuse every rank makes must raise the same loom::Error on every rank, not leave one waiting.
void expect_error(const std::function<void()>& misuse, const std::string& fragment) {
  try {
    misuse();
    expect(false, fmt::format("expected an error containing '{}', got none", fragment));
  } catch (const Error& e) {
    expect(std::string(e.what()).find(fragment) != std::string::npos,
           fmt::format("expected an error containing '{}', got '{}'", fragment, e.what()));
  }
}

// A value that differs between ranks, elements and tensors, exactly representable in float.
double rank_value(int rank, std::int64_t element, int tensor) { return 0.5 * (rank + 1) - 0.25 * element + tensor; }

template <class T>
Tensor rank_tensor(int rank, const Shape& shape, int tensor) {
  std::vector<T> values(std::size_t(loom::numel(shape)));
  for (std::size_t k = 0; k < values.size(); ++k) values[k] = T(rank_value(rank, std::int64_t(k), tensor));
  return Tensor::from_vector(values, shape);
}

// Each rank weighs in with its rank number: rank 0 gives weight 0, and its (large) gradients must not count.
template <class T>
void check_weighted_average(const char* type) {
  const int ranks = distributed::world_size(), rank = distributed::rank();
  const std::vector<Shape> shapes = {{2, 3}, {4}};
  std::vector<Tensor> grads = {rank_tensor<T>(rank, shapes[0], 0), Tensor(), rank_tensor<T>(rank, shapes[1], 2)};
  if (rank == 0) grads[0] = grads[0] * 1e6;
  const std::vector<Tensor> averaged = distributed::allreduce_gradients(grads, double(rank));

  expect(!averaged[1].defined(), fmt::format("allreduce_gradients<{}>: an undefined gradient stays undefined", type));
  const double tolerance = std::is_same_v<T, float> ? 1e-6 : 1e-12;
  for (int tensor : {0, 2}) {
    const Shape& shape = shapes[std::size_t(tensor / 2)];
    expect(averaged[std::size_t(tensor)].shape() == shape && averaged[std::size_t(tensor)].dtype() == grads[0].dtype(),
           fmt::format("allreduce_gradients<{}>: tensor {} keeps its shape and dtype", type, tensor));
    const std::vector<double> got = averaged[std::size_t(tensor)].to_vector<double>();
    for (std::size_t k = 0; k < got.size(); ++k) {
      double weighted = 0.0, weights = 0.0;
      for (int r = 1; r < ranks; ++r) {
        weighted += r * rank_value(r, std::int64_t(k), tensor);
        weights += r;
      }
      expect(std::abs(got[k] - weighted / weights) <= tolerance * std::max(1.0, std::abs(weighted / weights)),
             fmt::format("allreduce_gradients<{}>: tensor {} element {} is {}, expected {}", type, tensor, k, got[k],
                         weighted / weights));
    }
  }
}

void check_weighted_average_by_dtype() {
  check_weighted_average<float>("float");
  check_weighted_average<double>("double");
  expect_error([] { distributed::allreduce_gradients({Tensor::ones({3})}, 0.0); },
               "distributed::allreduce_gradients: the weights of the");
}

void check_broadcast_variables() {
  const int ranks = distributed::world_size(), rank = distributed::rank(), root = ranks - 1;
  std::vector<Variable> vars = {Variable(rank_tensor<float>(rank, {2, 3}, 0), "a"),
                                Variable(rank_tensor<double>(rank, {5}, 1), "b")};
  distributed::broadcast_variables(vars, root);
  expect(vars[0].value().to_vector<float>() == rank_tensor<float>(root, {2, 3}, 0).to_vector<float>() &&
             vars[1].value().to_vector<double>() == rank_tensor<double>(root, {5}, 1).to_vector<double>(),
         fmt::format("broadcast_variables: every rank holds root {}'s values", root));
  expect(distributed::broadcast(std::uint64_t(1000 + rank), root) == std::uint64_t(1000 + root),
         "broadcast: every rank gets root's value");
  const std::vector<Variable> uneven = {Variable(Tensor::zeros({rank + 1}), "uneven")};
  expect_error([&] { distributed::broadcast_variables(uneven); },
               "distributed::broadcast_variables: the ranks pass variables of different total sizes");
}

// ---- data-parallel fit against one process ------------------------------------------------------------------

L::Sequential make_model() {
  return L::Sequential({L::Input({4}, {.dtype = DType::f64}), L::Dense(6, {.activation = "tanh"}), L::Dense(2)});
}

std::vector<Tensor> values_of(const std::vector<Variable>& vars) {
  std::vector<Tensor> out;
  for (const Variable& var : vars) out.push_back(var.value().clone());
  return out;
}

// Whether every rank holds exactly rank 0's values.
bool identical_on_every_rank(const std::vector<Variable>& vars) {
  std::vector<Variable> root_copy;
  for (const Variable& var : vars) root_copy.emplace_back(var.value().clone(), var.name());
  distributed::broadcast_variables(root_copy);
  bool same = true;
  for (std::size_t i = 0; i < vars.size(); ++i)
    same = same && vars[i].value().to_vector<double>() == root_copy[i].value().to_vector<double>();
  return distributed::allreduce_sum(same ? 0.0 : 1.0) == 0.0;
}

double max_difference(const std::vector<Variable>& a, const std::vector<Variable>& b) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const std::vector<double> x = a[i].value().to_vector<double>(), y = b[i].value().to_vector<double>();
    for (std::size_t k = 0; k < x.size(); ++k) worst = std::max(worst, std::abs(x[k] - y[k]));
  }
  return worst;
}

double max_relative_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = a.size() == b.size() ? 0.0 : std::numeric_limits<double>::infinity();
  for (std::size_t k = 0; k < std::min(a.size(), b.size()); ++k)
    worst = std::max(worst, std::abs(a[k] - b[k]) / std::max(1.0, std::abs(b[k])));
  return worst;
}

// A mean-type metric and metrics whose state is a vector (counts per threshold, per class): logged over every
// rank, each must read as one process's over the whole data.
L::MetricsArg fit_metrics() {
  namespace M = loom::layers::metrics;
  return {"mae", M::AUC({.from_logits = true}), M::Precision({.thresholds = {0.3, 0.6}}),
          M::F1Score({.average = "macro", .threshold = 0.5})};
}

// 21 samples in global batches of 5 (the last batch has one row, so some ranks idle through that step), split
// 3/2 on 2 ranks and 2/2/1 on 3, over 3 shuffled epochs. Ranks start from different weights and draw different
// shuffling seeds; fit must take rank 0's of both and then every step of one process on the whole batch.
void check_fit_matches_one_process() {
  const int rank = distributed::rank();
  const std::uint64_t shuffle_seed = 900;
  const Tensor x = Tensor::randn({21, 4}, DType::f64, 1);
  const Tensor y = ops::cast(ops::greater(Tensor::randn({21, 2}, DType::f64, 2), Tensor::scalar(0.0, DType::f64)),
                             DType::f64);  // 0/1 labels, regressed with mse

  random::set_seed(100 + std::uint64_t(rank));
  auto model = make_model();
  model.compile({.optimizer = distributed::DistributedOptimizer(optim::Adam({.learning_rate = 0.05})),
                 .loss = "mse",
                 .metrics = fit_metrics()});
  const std::vector<Tensor> rank0_initial = [&] {
    std::vector<Variable> copy;
    for (const Variable& var : model.weights()) copy.emplace_back(var.value().clone(), var.name());
    distributed::broadcast_variables(copy);
    return values_of(copy);
  }();
  expect(!identical_on_every_rank(model.weights()), "fit: the ranks start from different weights");

  random::set_seed(shuffle_seed + std::uint64_t(rank));  // fit draws its shuffling seed from here
  std::ostringstream progress;
  const History history = model.fit(x, y, {.batch_size = 5, .epochs = 3, .verbose = 2, .out = &progress});
  const L::Logs evaluated = model.evaluate(x, y, {.batch_size = 4, .verbose = 0});

  expect(model.optimizer()->iterations() == 15, fmt::format("fit: 15 steps on every rank, took {}",
                                                            model.optimizer()->iterations()));
  expect(identical_on_every_rank(model.weights()), "fit: every rank holds the same weights after fit");
  expect((rank == 0) == !progress.str().empty(), "fit: rank 0 alone prints progress");
  const auto last_loss = std::bit_cast<std::uint64_t>(history.history.at("loss").back());
  expect(distributed::allreduce_sum(distributed::broadcast(last_loss) == last_loss ? 0.0 : 1.0) == 0.0,
         "fit: every rank logs the same global loss");

  if (rank != 0) return;
  auto reference = make_model();
  for (std::size_t i = 0; i < rank0_initial.size(); ++i) reference.weights()[i].assign(rank0_initial[i]);
  reference.compile({.optimizer = optim::Adam({.learning_rate = 0.05}), .loss = "mse", .metrics = fit_metrics()});
  random::set_seed(shuffle_seed);
  const History expected = reference.fit(x, y, {.batch_size = 5, .epochs = 3, .verbose = 0});
  const L::Logs expected_evaluation = reference.evaluate(x, y, {.batch_size = 4, .verbose = 0});

  const double weights_error = max_difference(model.weights(), reference.weights());
  fmt::print("fit on {} ranks: the weights differ from one process's by {:.3g}\n", distributed::world_size(),
             weights_error);
  expect(weights_error <= 1e-12, fmt::format("fit: the weights differ from one process's by {}", weights_error));
  for (const char* key : {"loss", "mae", "auc", "precision", "f1_score"}) {
    const double error = max_relative_difference(history.history.at(key), expected.history.at(key));
    expect(error <= 1e-12, fmt::format("fit: the logged {} differs from one process's by {}", key, error));
  }
  for (const auto& [key, value] : expected_evaluation)
    expect(std::abs(evaluated.at(key) - value) <= 1e-12,
           fmt::format("evaluate: {} is {}, one process gets {}", key, evaluated.at(key), value));
}

// A custom loop, each rank on its own batch: the hook averages with equal weights, and its first step
// broadcasts rank 0's weights, so replicas that started apart agree from then on.
void check_custom_loop() {
  const int rank = distributed::rank();
  random::set_seed(300 + std::uint64_t(rank));
  auto model = make_model();
  const auto optimizer = distributed::DistributedOptimizer(optim::SGD({.learning_rate = 0.1}));
  const Tensor x = Tensor::randn({3, 4}, DType::f64, 10 + std::uint64_t(rank));
  const Tensor y = Tensor::randn({3, 2}, DType::f64, 20 + std::uint64_t(rank));
  for (int step = 0; step < 2; ++step) {
    GradientTape tape;
    const Tensor loss = ops::mean(losses::mean_squared_error(y, model(x, /*training=*/true)));
    optimizer->apply_gradients(tape.gradient(loss, model.trainable_weights()), model.trainable_weights());
  }
  expect(identical_on_every_rank(model.weights()), "custom loop: every rank holds the same weights");
}

void check_rank_zero_writes_files() {
  auto model = make_model();
  model.compile({.optimizer = distributed::DistributedOptimizer(optim::SGD()), .loss = "mse"});
  // Every rank asks for files of its own; the replicas are identical, so only rank 0's are written.
  const std::filesystem::path folder =
      std::filesystem::temp_directory_path() /
      fmt::format("loom-distributed-test-{}", distributed::broadcast(std::uint64_t(::getpid())));
  const std::filesystem::path mine = folder / fmt::format("rank{}", distributed::rank());
  std::filesystem::create_directories(mine);
  model.save_weights((mine / "weights.safetensors").string());
  model.fit(Tensor::randn({6, 4}, DType::f64, 3), Tensor::randn({6, 2}, DType::f64, 4),
            {.batch_size = 4,
             .verbose = 0,
             .callbacks = {L::ModelCheckpoint({.filepath = (mine / "checkpoint/epoch{epoch}.safetensors").string()}),
                           L::CSVLogger((mine / "log.csv").string())}});
  const bool writes = distributed::rank() == 0;
  expect(std::filesystem::exists(mine / "weights.safetensors") == writes, "save_weights: rank 0 alone writes");
  expect(std::filesystem::exists(mine / "checkpoint/epoch1.safetensors") == writes &&
             std::filesystem::exists(mine / "checkpoint") == writes,
         "ModelCheckpoint: rank 0 alone makes the folder and writes");
  expect(std::filesystem::exists(mine / "log.csv") == writes, "CSVLogger: rank 0 alone writes");
  distributed::allreduce_sum(0.0);  // every rank has looked before rank 0 removes the folder
  if (writes) std::filesystem::remove_all(folder);
}

void run(const char* name, const std::function<void()>& check) {
  try {
    check();
  } catch (const std::exception& e) {
    expect(false, fmt::format("{}: threw {}", name, e.what()));
  }
}

}  // namespace

int main(int argc, char** argv) {
  auto session = distributed::init(&argc, &argv);
  run("allreduce_gradients", check_weighted_average_by_dtype);
  run("broadcast_variables", check_broadcast_variables);
  run("fit", check_fit_matches_one_process);
  run("custom loop", check_custom_loop);
  run("files", check_rank_zero_writes_files);
  const double total = distributed::allreduce_sum(double(failures));
  if (distributed::rank() == 0)
    fmt::print("{} ranks: {}\n", distributed::world_size(), total == 0 ? "all checks passed" :
                                                             fmt::format("{} checks failed", total));
  return total == 0 ? 0 : 1;
}
