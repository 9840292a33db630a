#pragma once
// The OpenBLAS calls behind ops::matmul (framework/runtime/blas.hpp loads the library and owns its threads).
// Not installed: users multiply with ops::matmul.
#include <cstdint>
#include <functional>

#include "framework/runtime/blas.hpp"
#include "framework/tensor/bfloat16.hpp"

namespace loom {

namespace blas {
/// Row-major C = alpha * op(A) @ op(B) + beta * C through cblas_sgemm / cblas_dgemm (T = float or double).
template <class T>
void gemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
          std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc);

/// Row-major C = op(A) @ op(B) + beta * C for bfloat16 A and B and a float32 C, accumulated in float32, on
/// oneDNN (framework/runtime/bf16_matmul.hpp; under the "float32" engine ops/linalg.cpp widens the operands
/// for gemm<float> instead of calling this). beta is 0 or 1.
void gemm_bf16(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k,
               const bfloat16* a, std::int64_t lda, const bfloat16* b, std::int64_t ldb, float beta, float* c,
               std::int64_t ldc);

/// Computes the block C[row : row + rows, col : col + cols] of an m x n product.
using GemmBlock = std::function<void(std::int64_t row, std::int64_t rows, std::int64_t col, std::int64_t cols)>;
/// Cuts an m x n x k product into one block of C per gemm thread (set_blas_threads) and runs them on loom's
/// pool, or runs it whole on the calling thread when it is too small to share. The cut depends on the sizes
/// and the thread count alone.
void for_each_block(std::int64_t m, std::int64_t n, std::int64_t k, const GemmBlock& block);

/// Address of any symbol of the loaded OpenBLAS (loading it first), for benchmarks and tests that call it
/// directly through the very library loom uses. Throws loom::Error when the symbol is missing.
void* symbol(const char* name);
}  // namespace blas

}  // namespace loom
