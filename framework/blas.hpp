#pragma once
// OpenBLAS, loaded at run time so that loom can pick the CPU core before the library initialises.
//
// Debian's OpenBLAS 0.3.21 does not recognise recent Xeons and falls back to generic kernels several times
// slower. When OPENBLAS_CORETYPE is unset, loom sets it from CPUID (SKYLAKEX with AVX-512, HASWELL with
// AVX2) and only then opens the library; a user's own setting is never overridden.
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
/// Threads OpenBLAS may use (default: all cores).
void set_blas_threads(int threads);

namespace blas {
/// Row-major C = alpha * op(A) @ op(B) + beta * C through cblas_sgemm / cblas_dgemm (T = float or double).
template <class T>
void gemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
          std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc);
}  // namespace blas

}  // namespace loom
