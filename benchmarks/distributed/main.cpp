// Data-parallel training throughput of the reversal encoder (examples/distributed): samples per second of
// fit at this run's number of ranks, with a fixed global batch, and the time one allreduce_gradients of the
// model's gradients takes (the communication each step adds). Run it once per world size:
//
//   mpirun -np 1 ./build/benchmarks/bench_distributed
//   mpirun -np 2 ./build/benchmarks/bench_distributed
#include <algorithm>
#include <chrono>
#include <vector>

#include "examples/distributed/reversal_encoder.hpp"
#include "loom.hpp"

using namespace loom;

namespace {

constexpr std::int64_t kSamples = 2048, kGlobalBatch = 64;
constexpr int kTimedEpochs = 2, kAllreduceRepeats = 50;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The median over the repeats of one allreduce of tensors shaped like the model's gradients, each repeat
// starting together on every rank (after a small reduction), so that it times the exchange, not the wait.
double allreduce_ms(const std::vector<Variable>& weights) {
  std::vector<Tensor> grads;
  for (const Variable& w : weights) grads.push_back(Tensor::ones(w.shape(), w.dtype()));
  std::vector<double> ms;
  for (int repeat = 0; repeat < kAllreduceRepeats; ++repeat) {
    distributed::allreduce_sum(0.0);
    const auto start = std::chrono::steady_clock::now();
    distributed::allreduce_gradients(grads);
    ms.push_back(1e3 * seconds_since(start));
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) try {
  auto session = distributed::init(&argc, &argv);
  const examples::ReversalConfig config;
  const auto [x, y] = examples::reversal_data(kSamples, config, 100);
  random::set_seed(1);
  examples::ReversalEncoder model(config);
  model.compile({.optimizer = distributed::DistributedOptimizer(optim::Adam({.learning_rate = 1e-3})),
                 .loss = examples::reversal_loss});

  model.fit(x, y, {.batch_size = kGlobalBatch, .epochs = 1, .verbose = 0, .seed = 1});  // warm-up
  distributed::allreduce_sum(0.0);
  const auto start = std::chrono::steady_clock::now();
  model.fit(x, y, {.batch_size = kGlobalBatch, .epochs = kTimedEpochs, .verbose = 0, .seed = 2});
  const double elapsed = seconds_since(start);
  const double steps = double(kTimedEpochs * ((kSamples + kGlobalBatch - 1) / kGlobalBatch));
  const double exchange_ms = allreduce_ms(model.trainable_weights());

  std::int64_t parameters = 0;
  for (const Variable& w : model.trainable_weights()) parameters += w.value().numel();
  if (distributed::rank() == 0) {
    const BlasInfo blas = blas_info();
    fmt::print("loom data-parallel reversal encoder ({} blocks, d_model {}, seq {}, global batch {}, {} float32 "
               "parameters), {} rank(s): {:.0f} samples/s, {:.1f} ms per step, allreduce {:.3f} ms per step; "
               "OpenBLAS {} on {} threads per rank\n",
               config.blocks, config.d_model, config.seq_len, kGlobalBatch, parameters, distributed::world_size(),
               double(kTimedEpochs * kSamples) / elapsed, 1e3 * elapsed / steps, exchange_ms, blas.core,
               blas.threads);
  }
  return 0;
} catch (const Error& e) {  // leaving the session by the exception aborts every rank
  fmt::print(stderr, "{}\n", e.what());
  return 2;
}
