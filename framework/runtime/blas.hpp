#pragma once
// OpenBLAS, loaded at run time so that loom can pick the CPU core before the library initialises.
//
// When OPENBLAS_CORETYPE is unset, loom sets it from CPUID (SKYLAKEX with AVX-512, HASWELL with AVX2) and
// only then opens the library, because some OpenBLAS builds do not recognise recent CPUs (docs/benchmarks.md,
// "matmul"); a user's own setting is never overridden. The variable is removed
// again once the library is loaded, so child processes see the environment the user gave. The library is the
// file found at build time, else the system's libopenblas.so.0; LOOM_OPENBLAS=<file> picks another one.
//
// Threads: OpenBLAS runs single-threaded; loom cuts each large gemm into one block of C per thread and runs
// the blocks on its own pool (runtime/detail/parallel.hpp), the pool every other kernel uses, so no second
// set of threads spins on the cores between calls; OpenBLAS is loaded with OPENBLAS_NUM_THREADS=1, so it
// starts no threads at all. The split uses all cores by default (or OPENBLAS_NUM_THREADS / GOTO_NUM_THREADS /
// OMP_NUM_THREADS when the user set one); a gemm called while the pool is busy (from another thread, or from
// a kernel running on the pool) runs its blocks on the calling thread.
//
// Loading sets OPENBLAS_CORETYPE and OPENBLAS_NUM_THREADS for a moment: call blas_info() early in main, before
// starting threads that read the environment, if that matters to a program (loom's own threads never read it).
#include <string>

namespace loom {

struct BlasInfo {
  std::string core;         // openblas_get_corename(), e.g. "SkylakeX"
  int threads = 0;          // threads one gemm is split over (OpenBLAS itself runs on one)
  std::string config;       // openblas_get_config()
  std::string library;      // the file that was opened
  bool core_chosen_by_loom = false;  // false when the user set OPENBLAS_CORETYPE
};

/// Loads OpenBLAS on first use and reports what it runs.
BlasInfo blas_info();
/// Threads one gemm is split over (default: all cores); at most the pool's threads. `threads` must be >= 1.
void set_blas_threads(int threads);

/// RAII: gemm uses `threads` threads while it lives, then the previous count again. The count is global to
/// the process, so create it on the controlling thread, not inside workers.
class ScopedBlasThreads {
 public:
  explicit ScopedBlasThreads(int threads);
  ~ScopedBlasThreads();
  ScopedBlasThreads(const ScopedBlasThreads&) = delete;
  ScopedBlasThreads& operator=(const ScopedBlasThreads&) = delete;

 private:
  int previous_;
};

}  // namespace loom
