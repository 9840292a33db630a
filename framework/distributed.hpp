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
//
// Built without MPI, available() is false, rank() is 0, world_size() is 1, and every other function throws
// loom::Error. Before init (or after finalize) a program is one process: rank() 0, world_size() 1.
#include <concepts>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "framework/tensor.hpp"
#include "framework/variable.hpp"
#include "optim/optimizer.hpp"

namespace loom::distributed {

/// Whether loom was built with MPI support.
bool available();

/// Holds MPI initialised while alive: finalizes it on destruction if this session initialised it. A session
/// left by an exception aborts every rank instead, so that no rank waits forever in a collective call.
class Session {
 public:
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

 private:
  friend Session init(int* argc, char*** argv);
  Session(int* argc, char*** argv);
  bool owns_mpi_ = false;
};

/// Initialises MPI (once; later calls return a session that owns nothing). argc and argv may be null.
[[nodiscard]] Session init(int* argc = nullptr, char*** argv = nullptr);
/// Finalizes MPI if it is initialised; does nothing otherwise.
void finalize();

/// This process's index among the world_size() processes.
int rank();
int world_size();

/// Assigns root's values to `vars` on every rank (one broadcast for all of them). Every rank passes the
/// same variables, in the same order.
void broadcast_variables(const std::vector<Variable>& vars, int root = 0);

/// For each tensor, sum_r(weight_r * grads_r) / sum_r(weight_r) over the ranks, with one allreduce per dtype
/// (the weights travel in the same buffer). Undefined gradients stay undefined; every rank must pass the
/// same shapes, dtypes and undefined entries. A rank with nothing to contribute passes weight 0.
std::vector<Tensor> allreduce_gradients(const std::vector<Tensor>& grads, double weight = 1.0);

/// The sum over the ranks, for metrics and counts; the vector form reduces all its values in one call.
double allreduce_sum(double value);
std::vector<double> allreduce_sum(std::vector<double> values);

/// root's value on every rank (a shuffling seed every rank must share).
std::uint64_t broadcast(std::uint64_t value, int root = 0);

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
