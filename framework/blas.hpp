#pragma once
// OpenBLAS, loaded at run time so that loom can pick the CPU core before the library initialises.
//
// Debian's OpenBLAS 0.3.21 does not recognise recent Xeons and falls back to generic kernels several times
// slower. When OPENBLAS_CORETYPE is unset, loom sets it from CPUID (SKYLAKEX with AVX-512, HASWELL with
// AVX2) and only then opens the library; a user's own setting is never overridden. The variable is removed
// again once the library is loaded, so child processes see the environment the user gave. The library is the
// file found at build time, else the system's libopenblas.so.0; LOOM_OPENBLAS=<file> picks another one.
//
// Threads: OpenBLAS runs its own pthreads pool, all cores by default (or OPENBLAS_NUM_THREADS when the user set
// it). loom has no thread pool of its own, so the two never compete. Code that runs its own threads and calls
// gemm from inside them must either call gemm from one thread only or hold a ScopedBlasThreads(1) around its
// parallel region, otherwise every worker fans out to all cores again (threads x cores runnable threads).
#include <cstdint>
#include <string>

namespace loom {

struct BlasInfo {
  std::string core;         // openblas_get_corename(), e.g. "SkylakeX"
  int threads = 0;          // openblas_get_num_threads()
  std::string config;       // openblas_get_config()
  std::string library;      // the file that was opened
  bool core_chosen_by_loom = false;  // false when the user set OPENBLAS_CORETYPE
};

/// Loads OpenBLAS on first use and reports what it runs.
BlasInfo blas_info();
/// Threads OpenBLAS may use (default: all cores). `threads` must be >= 1.
void set_blas_threads(int threads);

/// RAII: OpenBLAS uses `threads` threads while it lives, then the previous count again. The count is global
/// to the process, so create it on the controlling thread, around a parallel region, not inside the workers.
class ScopedBlasThreads {
 public:
  explicit ScopedBlasThreads(int threads);
  ~ScopedBlasThreads();
  ScopedBlasThreads(const ScopedBlasThreads&) = delete;
  ScopedBlasThreads& operator=(const ScopedBlasThreads&) = delete;

 private:
  int previous_;
};

namespace blas {
/// Row-major C = alpha * op(A) @ op(B) + beta * C through cblas_sgemm / cblas_dgemm (T = float or double).
template <class T>
void gemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
          std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc);

/// Address of any symbol of the loaded OpenBLAS (loading it first), for benchmarks and tests that call it
/// directly through the very library loom uses. Throws loom::Error when the symbol is missing.
void* symbol(const char* name);
}  // namespace blas

}  // namespace loom
