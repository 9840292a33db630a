#pragma once
// Data-parallel training over MPI, in Horovod's manner: every process (rank) holds a whole replica of the
// model, trains on its part of each global batch, and the ranks average their gradients with one allreduce
// per step, so every replica takes the same step. Launch the program with mpirun (docs/distributed.md):
//
//   int main(int argc, char** argv) {
//     auto session = distributed::init(&argc, &argv);
//     model.compile({.optimizer = distributed::DistributedOptimizer(optim::Adam({.learning_rate = 1e-3})),
//                    .loss = "mse"});
//     model.fit(x, y, {.batch_size = 64});   // mpirun -np 2 ./program: each rank trains on 32 rows per step
//   }
#include <concepts>
#include <memory>
#include <type_traits>
#include <utility>

#include "framework/distributed/collectives.hpp"
#include "optim/optimizer.hpp"

namespace loom::distributed {

/// Installs the aggregation hook on `optimizer` and returns it: its apply_gradients averages the gradients
/// over the ranks (weighted by each rank's share of the batch when Model::fit sets it) and, on its first
/// step, broadcasts the variables from rank 0 so that differently initialised replicas agree.
std::shared_ptr<optim::Optimizer> DistributedOptimizer(std::shared_ptr<optim::Optimizer> optimizer);

/// The same for an optimizer object, copied or moved in, as Horovod's hvd.DistributedOptimizer(opt):
///   model.compile({.optimizer = distributed::DistributedOptimizer(optim::SGD({.learning_rate = 0.1}))});
template <class OptimizerLike>
  requires std::derived_from<std::decay_t<OptimizerLike>, optim::Optimizer>
std::shared_ptr<optim::Optimizer> DistributedOptimizer(OptimizerLike&& optimizer) {
  return DistributedOptimizer(std::shared_ptr<optim::Optimizer>(
      std::make_shared<std::decay_t<OptimizerLike>>(std::forward<OptimizerLike>(optimizer))));
}

}  // namespace loom::distributed
