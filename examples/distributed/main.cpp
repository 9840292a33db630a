// Data-parallel training of a small Transformer encoder on the reversal task, one process per rank
// (docs/distributed.md). Every rank builds the same data; fit gives each rank its part of every global batch.
//
//   mpirun -np 2 ./build/examples/distributed [--epochs N] [--batch GLOBAL_BATCH] [--lr X] [--save FILE]
//
// Run without mpirun it trains as one process.
#include <cstdint>
#include <string>

#include "examples/distributed/reversal_encoder.hpp"
#include "loom.hpp"

using namespace loom;

namespace {

struct Options {
  int epochs = 4;
  std::int64_t batch = 64;  // global: each of the N ranks trains on about batch / N rows per step
  double learning_rate = 3e-3;
  std::string save;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    check(i + 1 < argc, "distributed: {} needs a value", arg);
    const std::string value = argv[++i];
    if (arg == "--epochs") o.epochs = std::stoi(value);
    else if (arg == "--batch") o.batch = std::stoll(value);
    else if (arg == "--lr") o.learning_rate = std::stod(value);
    else if (arg == "--save") o.save = value;
    else throw Error(fmt::format("distributed: unknown option '{}' (see examples/distributed/main.cpp)", arg));
  }
  return o;
}

}  // namespace

// An error on one rank leaves its session by the exception, which aborts every rank rather than leaving the
// others waiting in fit.
int main(int argc, char** argv) try {
  auto session = distributed::init(&argc, &argv);
  const Options options = parse(argc, argv);
  const examples::ReversalConfig config;
  const auto [x, y] = examples::reversal_data(4096, config, 100);
  const auto [x_test, y_test] = examples::reversal_data(512, config, 200);

  // Each rank may start from its own weights: fit starts every rank from rank 0's.
  random::set_seed(1 + std::uint64_t(distributed::rank()));
  examples::ReversalEncoder model(config);
  model.compile({.optimizer = distributed::DistributedOptimizer(optim::Adam({.learning_rate = options.learning_rate})),
                 .loss = examples::reversal_loss,
                 .metrics = {"accuracy"}});
  if (distributed::rank() == 0)
    fmt::print("{} rank(s), global batch {} ({} rows per rank per step at most)\n", distributed::world_size(),
               options.batch, (options.batch + distributed::world_size() - 1) / distributed::world_size());
  model.fit(x, y, {.batch_size = options.batch, .epochs = options.epochs, .seed = 1});

  const double accuracy = model.evaluate(x_test, y_test, {.verbose = 0}).at("accuracy");  // every rank joins
  if (distributed::rank() == 0) fmt::print("token accuracy on unseen sequences: {:.2f}%\n", 100.0 * accuracy);
  if (!options.save.empty()) {
    model.save_weights(options.save);  // rank 0 writes; the replicas are identical
    if (distributed::rank() == 0) fmt::print("weights written to {}\n", options.save);
  }
  return 0;
} catch (const Error& e) {
  fmt::print(stderr, "{}\n", e.what());
  return 2;
}
