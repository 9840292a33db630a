#pragma once
// What the benchmarks compare loom's products with: GFLOP/s of OpenBLAS's own cblas_sgemm (the very library
// loom loaded, on loom's OpenBLAS threads), row-major A [m, k] times B [k, n], and of loom's bf16 products;
// medians of `repeats` calls after one warm-up call.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "framework/ops/ops.hpp"
#include "framework/runtime/blas.hpp"
#include "framework/runtime/detail/gemm.hpp"
#include "framework/tensor/tensor.hpp"

namespace loom::benchmarks {

/// GFLOP/s of an m x k x n product computed by `once`: the median of `repeats` calls after a warm-up call.
template <class Product>
double product_gflops(std::int64_t m, std::int64_t k, std::int64_t n, int repeats, Product&& once) {
  once();  // warm-up: threads, page faults
  std::vector<double> seconds;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    once();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  return 2.0 * double(m) * double(k) * double(n) / seconds[seconds.size() / 2] * 1e-9;
}

inline double sgemm_gflops(std::int64_t m, std::int64_t k, std::int64_t n, int repeats) {
  using Sgemm = void (*)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha, const float* a,
                         int lda, const float* b, int ldb, float beta, float* c, int ldc);
  using SetThreads = void (*)(int threads);
  constexpr int kRowMajor = 101, kNoTrans = 111;  // the CBLAS enums
  const auto sgemm = reinterpret_cast<Sgemm>(blas::symbol("cblas_sgemm"));
  reinterpret_cast<SetThreads>(blas::symbol("openblas_set_num_threads"))(blas_info().threads);
  const Tensor a = Tensor::randn({m, k}, DType::f32, 1), b = Tensor::randn({k, n}, DType::f32, 2);
  std::vector<float> c(std::size_t(m * n));
  return product_gflops(m, k, n, repeats, [&] {
    sgemm(kRowMajor, kNoTrans, kNoTrans, int(m), int(n), int(k), 1.0f, a.data<float>(), int(k), b.data<float>(),
          int(n), 0.0f, c.data(), int(n));
  });
}

/// GFLOP/s of ops::matmul on bf16 operands [n, n] @ [n, n], on the bf16 engine loom runs now.
inline double bf16_matmul_gflops(std::int64_t n, int repeats) {
  const Tensor a = ops::cast(Tensor::randn({n, n}, DType::f32, 3), DType::bf16);
  const Tensor b = ops::cast(Tensor::randn({n, n}, DType::f32, 4), DType::bf16);
  return product_gflops(n, n, n, repeats, [&] { (void)ops::matmul(a, b); });
}

}  // namespace loom::benchmarks
