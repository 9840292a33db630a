#pragma once
// The OpenBLAS calls behind ops::matmul (framework/runtime/blas.hpp loads the library and owns its threads).
// Not installed: users multiply with ops::matmul.
#include <cstdint>

#include "framework/runtime/blas.hpp"

namespace loom {

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
