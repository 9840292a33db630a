#pragma once
// The MPI collectives on tensors that data-parallel training is made of (docs/distributed.md): a session
// that holds MPI initialised, rank and world size, broadcasts, and the weighted gradient allreduce. The
// optimizer wrapper that uses them is optim/distributed_optimizer.hpp.
//
//   auto session = distributed::init(&argc, &argv);   // mpirun -np 2 ./program
//   auto averaged = distributed::allreduce_gradients(grads, /*weight=*/rows_on_this_rank);
//
// Built without MPI, available() is false, rank() is 0, world_size() is 1, and every other function throws
// loom::Error. Before init (or after finalize) a program is one process: rank() 0, world_size() 1.
#include <cstdint>
#include <memory>
#include <vector>

#include "framework/tensor/tensor.hpp"
#include "framework/tensor/variable.hpp"

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

/// Throws loom::Error naming `function` unless MPI is initialised (between init and finalize); built without
/// MPI, it always throws, saying so. For code above the framework that needs the collectives to work.
void require_initialized(const char* function);

}  // namespace loom::distributed
