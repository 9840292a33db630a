#include "framework/distributed/collectives.hpp"

#include "framework/tensor/error.hpp"

#if LOOM_WITH_MPI

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <map>
#include <utility>

#include "framework/kernels/dispatch.hpp"

namespace loom::distributed {

namespace {

bool mpi_running() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized != 0 && finalized == 0;
}

void require_running(const char* function) {
  check(mpi_running(), "distributed::{}: MPI is not initialised; call distributed::init(&argc, &argv) first",
        function);
}

// MPI errors return codes on the communicators loom initialises (MPI_ERRORS_RETURN); they become loom::Error.
void check_mpi(int code, const char* function, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw Error(fmt::format("distributed::{}: {} failed: {}", function, call, std::string(text, std::size_t(length))));
}

void check_root(int root, const char* function) {
  check(root >= 0 && root < world_size(), "distributed::{}: root must be a rank in [0, {}), got {}", function,
        world_size(), root);
}

// MPI counts elements in an int.
int mpi_count(std::size_t count, const char* function) {
  check(count <= std::size_t(std::numeric_limits<int>::max()),
        "distributed::{}: {} elements in one message exceed MPI's limit of {}", function, count,
        std::numeric_limits<int>::max());
  return int(count);
}

// A contiguous tensor's elements as bytes, whatever its dtype.
std::byte* bytes_of(const Tensor& t) {
  return visit_dtype(t.dtype(), [&]<class T>() { return reinterpret_cast<std::byte*>(t.data<T>()); });
}

std::size_t byte_size(const Tensor& t) { return std::size_t(t.numel()) * dtype_size(t.dtype()); }

template <class T>
MPI_Datatype mpi_type() {
  return std::is_same_v<T, float> ? MPI_FLOAT : MPI_DOUBLE;
}

// The gradients of one dtype: sum_r(weight_r * g_r) and sum_r(weight_r) through one buffer (the weighted
// gradients, then the weight), then divided back into tensors shaped like the given ones.
template <class T>
void allreduce_weighted(const std::vector<Tensor>& grads, const std::vector<std::size_t>& members, double weight,
                        std::vector<Tensor>& out) {
  std::size_t size = 1;
  for (std::size_t i : members) size += std::size_t(grads[i].numel());
  std::vector<T> buffer(size);
  T* cursor = buffer.data();
  for (std::size_t i : members) {
    const Tensor g = grads[i].contiguous();
    cursor = std::transform(g.data<T>(), g.data<T>() + g.numel(), cursor, [&](T v) { return T(weight) * v; });
  }
  buffer.back() = T(weight);
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, buffer.data(), mpi_count(size, "allreduce_gradients"), mpi_type<T>(),
                          MPI_SUM, MPI_COMM_WORLD),
            "allreduce_gradients", "MPI_Allreduce");

  const T total_weight = buffer.back();
  check(total_weight > T(0),
        "distributed::allreduce_gradients: the weights of the {} ranks sum to {}; at least one rank must give a "
        "positive weight",
        world_size(), total_weight);
  cursor = buffer.data();
  for (std::size_t i : members) {
    Tensor mean = Tensor::empty(grads[i].shape(), grads[i].dtype());
    T* const end = cursor + mean.numel();
    std::transform(cursor, end, mean.data<T>(), [&](T sum) { return sum / total_weight; });
    cursor = end;
    out[i] = mean;
  }
}


}  // namespace

bool available() { return true; }

Session::Session(int* argc, char*** argv) {
  if (mpi_running()) return;
  int provided = 0;
  // loom's kernels run threads of their own, but only the main thread calls MPI.
  check_mpi(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "init", "MPI_Init_thread");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  owns_mpi_ = true;
}

Session::~Session() {
  if (!owns_mpi_ || !mpi_running()) return;
  // Unwinding past the session means this rank stops early; the others would wait for it in their next
  // collective call forever.
  if (std::uncaught_exceptions() > 0) MPI_Abort(MPI_COMM_WORLD, 1);
  MPI_Finalize();
}

Session init(int* argc, char*** argv) { return Session(argc, argv); }

void finalize() {
  if (mpi_running()) MPI_Finalize();
}

int rank() {
  if (!mpi_running()) return 0;
  int value = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &value);
  return value;
}

int world_size() {
  if (!mpi_running()) return 1;
  int value = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &value);
  return value;
}

void broadcast_variables(const std::vector<Variable>& vars, int root) {
  require_running("broadcast_variables");
  check_root(root, "broadcast_variables");
  // Values travel as bytes, all dtypes in one buffer; their sizes must agree, which one small reduction
  // checks first so that a mismatch is an error on every rank rather than a truncated message.
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < vars.size(); ++i) {
    check(vars[i].defined(), "distributed::broadcast_variables: variable {} of {} is undefined", i, vars.size());
    bytes += byte_size(vars[i].value());
  }
  long long extremes[2] = {(long long)bytes, -(long long)bytes};  // {min, -max} in one MPI_MIN
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, extremes, 2, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD), "broadcast_variables",
            "MPI_Allreduce");
  check(extremes[0] == -extremes[1],
        "distributed::broadcast_variables: the ranks pass variables of different total sizes ({} to {} bytes; "
        "this rank: {} variables, {} bytes); every rank must pass the same variables",
        extremes[0], -extremes[1], vars.size(), bytes);

  std::vector<std::byte> buffer(bytes);
  std::byte* cursor = buffer.data();
  for (const Variable& var : vars) {
    const Tensor value = var.value().contiguous();
    std::memcpy(cursor, bytes_of(value), byte_size(value));
    cursor += byte_size(value);
  }
  check_mpi(MPI_Bcast(buffer.data(), mpi_count(bytes, "broadcast_variables"), MPI_BYTE, root, MPI_COMM_WORLD),
            "broadcast_variables", "MPI_Bcast");
  if (rank() == root) return;
  cursor = buffer.data();
  for (Variable var : vars) {  // a Variable is a handle: the copy assigns the caller's variable
    Tensor value = Tensor::empty(var.shape(), var.dtype());
    std::memcpy(bytes_of(value), cursor, byte_size(value));
    cursor += byte_size(value);
    var.assign(value);
  }
}

std::vector<Tensor> allreduce_gradients(const std::vector<Tensor>& grads, double weight) {
  require_running("allreduce_gradients");
  check(std::isfinite(weight) && weight >= 0.0,
        "distributed::allreduce_gradients: weight must be a finite number >= 0, got {}", weight);
  std::map<DType, std::vector<std::size_t>> by_dtype;  // f32 before f64, the same order on every rank
  for (std::size_t i = 0; i < grads.size(); ++i)
    if (grads[i].defined()) by_dtype[grads[i].dtype()].push_back(i);
  std::vector<Tensor> out(grads.size());
  for (const auto& group : by_dtype) {
    visit_floating(group.first, "distributed::allreduce_gradients", [&]<class T>() {
      allreduce_weighted<T>(grads, group.second, weight, out);
    });
  }
  return out;
}

double allreduce_sum(double value) { return allreduce_sum(std::vector<double>{value}).front(); }

std::vector<double> allreduce_sum(std::vector<double> values) {
  require_running("allreduce_sum");
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, values.data(), mpi_count(values.size(), "allreduce_sum"), MPI_DOUBLE, MPI_SUM,
                          MPI_COMM_WORLD),
            "allreduce_sum", "MPI_Allreduce");
  return values;
}

std::uint64_t broadcast(std::uint64_t value, int root) {
  require_running("broadcast");
  check_root(root, "broadcast");
  check_mpi(MPI_Bcast(&value, 1, MPI_UINT64_T, root, MPI_COMM_WORLD), "broadcast", "MPI_Bcast");
  return value;
}

void require_initialized(const char* function) { require_running(function); }

}  // namespace loom::distributed

#else  // without MPI: one process, and a clear error for everything that needs several

namespace loom::distributed {

namespace {

[[noreturn]] void not_built(const char* function) {
  throw Error(fmt::format("distributed::{}: loom was built without MPI support (configure with MPI installed: "
                          "libopenmpi-dev, or -DLOOM_WITH_MPI=ON)",
                          function));
}

}  // namespace

bool available() { return false; }
Session::Session(int*, char***) { not_built("init"); }
Session::~Session() = default;
Session init(int* argc, char*** argv) { return Session(argc, argv); }
void finalize() { not_built("finalize"); }
int rank() { return 0; }
int world_size() { return 1; }
void broadcast_variables(const std::vector<Variable>&, int) { not_built("broadcast_variables"); }
std::vector<Tensor> allreduce_gradients(const std::vector<Tensor>&, double) { not_built("allreduce_gradients"); }
double allreduce_sum(double) { not_built("allreduce_sum"); }
std::vector<double> allreduce_sum(std::vector<double>) { not_built("allreduce_sum"); }
std::uint64_t broadcast(std::uint64_t, int) { not_built("broadcast"); }
void require_initialized(const char* function) { not_built(function); }

}  // namespace loom::distributed

#endif
