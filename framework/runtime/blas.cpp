#include "framework/runtime/blas.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <type_traits>

#include <cblas.h>

#include "framework/runtime/cpu_features.hpp"
#include "framework/runtime/detail/gemm.hpp"
#include "framework/runtime/detail/parallel.hpp"
#include "framework/runtime/detail/scoped_environment.hpp"
#include "framework/tensor/error.hpp"

#ifndef LOOM_OPENBLAS_PATH
#define LOOM_OPENBLAS_PATH "libopenblas.so.0"
#endif

namespace loom {

namespace {

constexpr const char* kSystemName = "libopenblas.so.0";  // found through the dynamic linker's search path

struct Library {
  void* handle = nullptr;
  std::string path;
  std::string core_set;  // what loom put in OPENBLAS_CORETYPE; empty when it set nothing
  // decltype of the CBLAS declarations keeps the signatures exact without linking to them.
  decltype(&cblas_sgemm) sgemm = nullptr;
  decltype(&cblas_dgemm) dgemm = nullptr;
  // Declared by hand: the OpenBLAS extensions are missing from some cblas.h headers.
  char* (*get_corename)() = nullptr;
  char* (*get_config)() = nullptr;
  int (*get_num_threads)() = nullptr;
  void (*set_num_threads)(int) = nullptr;
};

/// How many of loom's threads one gemm is split over (set_blas_threads). OpenBLAS itself runs on one thread.
std::atomic<int> gemm_threads{1};

/// The core OpenBLAS should use on this CPU, or nullptr to let it detect one itself.
const char* core_for_this_cpu() {
  const CpuFeatures& cpu = cpu_features();
  if (cpu.has_avx512()) return "SKYLAKEX";
  if (cpu.has_avx2_fma()) return "HASWELL";
  return nullptr;
}

/// Opens OpenBLAS: LOOM_OPENBLAS when the user names a file, else the file found at build time, else the
/// system's libopenblas.so.0 (a binary moved to another machine).
void* open_library(std::string& path) {
  std::string errors;
  auto try_open = [&](const char* candidate) -> void* {
    void* handle = dlopen(candidate, RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) path = candidate;
    else errors += fmt::format("\n  {}", dlerror());
    return handle;
  };
  const char* user_path = std::getenv("LOOM_OPENBLAS");
  if (user_path != nullptr && *user_path != '\0') {
    if (void* handle = try_open(user_path)) return handle;
  } else {
    if (void* handle = try_open(LOOM_OPENBLAS_PATH)) return handle;
    if (void* handle = try_open(kSystemName)) return handle;
  }
  throw Error(fmt::format("blas: cannot load OpenBLAS (install libopenblas0, or name the file in LOOM_OPENBLAS):{}",
                          errors));
}

template <class Fn>
void resolve(const Library& lib, Fn& fn, const char* name) {
  dlerror();  // clear a stale error so the check below reports this lookup
  fn = reinterpret_cast<Fn>(dlsym(lib.handle, name));
  check(fn != nullptr, "blas: OpenBLAS library '{}' has no symbol '{}' (is it OpenBLAS?)", lib.path, name);
}

/// The threads OpenBLAS would take by default, as it counts them: OPENBLAS_NUM_THREADS, else GOTO_NUM_THREADS,
/// else OMP_NUM_THREADS (the first positive one), else every core; at most loom's pool.
int default_gemm_threads() {
  for (const char* name : {"OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"})
    if (const char* value = std::getenv(name); value != nullptr && std::atoi(value) > 0)
      return std::min(std::atoi(value), parallel::thread_count());
  return parallel::thread_count();
}

Library load() {
  Library lib;
  // OpenBLAS reads its environment once, in its constructor, which dlopen runs. If the process already has
  // the library loaded (linked by someone else), it is initialised and the variables would change nothing,
  // so loom then only reports what runs.
  const bool preloaded = dlopen(LOOM_OPENBLAS_PATH, RTLD_NOW | RTLD_NOLOAD) != nullptr;
  const char* core = core_for_this_cpu();
  std::optional<ScopedEnvironment> core_type;
  if (!preloaded && core != nullptr && std::getenv("OPENBLAS_CORETYPE") == nullptr) {
    core_type.emplace("OPENBLAS_CORETYPE", core);
    lib.core_set = core;
  }
  // loom splits each gemm over its own pool, so that one set of threads serves every kernel, and runs
  // OpenBLAS on one thread: OpenBLAS's own threads would spin on the cores loom's kernels need
  // (docs/architecture.md, "BLAS"). OpenBLAS's default count (all cores, or OPENBLAS_NUM_THREADS /
  // OMP_NUM_THREADS when the user set one) becomes loom's split instead.
  std::optional<ScopedEnvironment> one_thread;
  if (!preloaded) one_thread.emplace("OPENBLAS_NUM_THREADS", "1");
  lib.handle = open_library(lib.path);
  core_type.reset();
  one_thread.reset();

  resolve(lib, lib.sgemm, "cblas_sgemm");
  resolve(lib, lib.dgemm, "cblas_dgemm");
  resolve(lib, lib.get_corename, "openblas_get_corename");
  resolve(lib, lib.get_config, "openblas_get_config");
  resolve(lib, lib.get_num_threads, "openblas_get_num_threads");
  resolve(lib, lib.set_num_threads, "openblas_set_num_threads");
  gemm_threads = preloaded ? std::clamp(lib.get_num_threads(), 1, parallel::thread_count()) : default_gemm_threads();
  lib.set_num_threads(1);  // a preloaded OpenBLAS too: its pool would spin between calls on loom's cores
  return lib;
}

/// Loaded once per process; a failed load throws and is retried by the next call.
const Library& library() {
  static std::once_flag once;
  static Library lib;
  std::call_once(once, [] { lib = load(); });
  return lib;
}

/// Below this many multiply-adds per thread a gemm runs on the calling thread: waking a worker would cost more.
constexpr double kMinMultiplyAddsPerPiece = 1 << 18;

int to_blas_int(std::int64_t value, const char* what) {
  check(value >= 0 && value <= INT_MAX, "blas::gemm: {} = {} does not fit OpenBLAS's 32-bit integers", what, value);
  return int(value);
}

}  // namespace

BlasInfo blas_info() {
  const Library& lib = library();
  BlasInfo info;
  info.core = lib.get_corename();
  info.threads = gemm_threads;
  info.config = lib.get_config();
  info.library = lib.path;
  info.core_chosen_by_loom = !lib.core_set.empty();
  return info;
}

void set_blas_threads(int threads) {
  check(threads >= 1, "set_blas_threads: expected at least 1 thread, got {}", threads);
  library();  // loading sets the default, which must not overwrite this choice
  gemm_threads = std::min(threads, parallel::thread_count());
}

ScopedBlasThreads::ScopedBlasThreads(int threads) : previous_((library(), gemm_threads.load())) {
  set_blas_threads(threads);
}

ScopedBlasThreads::~ScopedBlasThreads() { gemm_threads = previous_; }

namespace blas {

template <class T>
void gemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
          std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "blas::gemm: float or double");
  // OpenBLAS reports bad arguments on stderr and returns without computing: reject them here instead.
  to_blas_int(m, "m");
  to_blas_int(n, "n");
  const int ik = to_blas_int(k, "k");
  const std::int64_t need_a = std::max<std::int64_t>(1, transpose_a ? m : k);
  const std::int64_t need_b = std::max<std::int64_t>(1, transpose_b ? k : n);
  check(lda >= need_a && ldb >= need_b && ldc >= std::max<std::int64_t>(1, n),
        "blas::gemm: leading dimensions too small for m={}, n={}, k={}: lda={} (needs >= {}), ldb={} (needs >= {}), "
        "ldc={} (needs >= {})", m, n, k, lda, need_a, ldb, need_b, ldc, std::max<std::int64_t>(1, n));
  const Library& lib = library();
  const auto ta = transpose_a ? CblasTrans : CblasNoTrans;
  const auto tb = transpose_b ? CblasTrans : CblasNoTrans;
  const int ilda = to_blas_int(lda, "lda"), ildb = to_blas_int(ldb, "ldb"), ildc = to_blas_int(ldc, "ldc");
  // C[rows, cols] from the matching rows of op(A) and columns of op(B), on OpenBLAS's one thread.
  auto block = [&](std::int64_t row, std::int64_t rows, std::int64_t col, std::int64_t cols) {
    const T* a_rows = a + row * (transpose_a ? 1 : lda);
    const T* b_cols = b + col * (transpose_b ? ldb : 1);
    T* c_block = c + row * ldc + col;
    if constexpr (std::is_same_v<T, float>)
      lib.sgemm(CblasRowMajor, ta, tb, int(rows), int(cols), ik, alpha, a_rows, ilda, b_cols, ildb, beta, c_block, ildc);
    else
      lib.dgemm(CblasRowMajor, ta, tb, int(rows), int(cols), ik, alpha, a_rows, ilda, b_cols, ildb, beta, c_block, ildc);
  };
  for_each_block(m, n, k, block);
}

void for_each_block(std::int64_t m, std::int64_t n, std::int64_t k, const GemmBlock& block) {
  // One block per thread along the longer side of C, cut at multiples of the microkernels' 16 rows or columns.
  // The cut depends on the sizes and the thread count alone, so a product is the same bits every time, also
  // when a busy pool leaves every block to the calling thread. (Another thread count may change the last bit:
  // OpenBLAS computes the leftover rows of a block with other kernels.)
  library();  // sets the thread count on first use (a bf16 product may come before any float one)
  const std::int64_t pieces = std::int64_t(gemm_threads);
  if (pieces < 2 || double(m) * double(n) * double(k) < double(pieces) * kMinMultiplyAddsPerPiece) {
    block(0, m, 0, n);
    return;
  }
  const bool split_rows = m >= n;
  const std::int64_t units = ((split_rows ? m : n) + 15) / 16;
  parallel::run(pieces, int(pieces), [&](int, std::int64_t p) {
    const std::int64_t begin = std::min(units * p / pieces * 16, split_rows ? m : n);
    const std::int64_t end = std::min(units * (p + 1) / pieces * 16, split_rows ? m : n);
    if (end == begin) return;
    if (split_rows) block(begin, end - begin, 0, n);
    else block(0, m, begin, end - begin);
  });
}

template void gemm<float>(bool, bool, std::int64_t, std::int64_t, std::int64_t, float, const float*, std::int64_t,
                          const float*, std::int64_t, float, float*, std::int64_t);
template void gemm<double>(bool, bool, std::int64_t, std::int64_t, std::int64_t, double, const double*, std::int64_t,
                           const double*, std::int64_t, double, double*, std::int64_t);

void* symbol(const char* name) {
  const Library& lib = library();
  dlerror();
  void* address = dlsym(lib.handle, name);
  check(address != nullptr, "blas: OpenBLAS library '{}' has no symbol '{}'", lib.path, name);
  return address;
}

}  // namespace blas

}  // namespace loom
