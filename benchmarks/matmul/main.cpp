// GFLOP/s of square float32 matrix products: ops::matmul next to a direct cblas_sgemm call through the very
// OpenBLAS that loom loaded (same core), on 1 and 2 threads. loom splits a product over its own threads and
// runs OpenBLAS single-threaded in each piece; the direct call runs on OpenBLAS's own threads. The ratio
// loom/sgemm is loom's overhead (output allocation, dispatch, checks) and what its split gains or loses
// (goal >= 95%).
//
//   bench_matmul                              # the core loom picks from CPUID (SkylakeX with AVX-512)
//   OPENBLAS_CORETYPE=Prescott bench_matmul   # the generic core OpenBLAS 0.3.21 falls back to on new CPUs
//
// Each figure is the median over repeats; loom and sgemm calls alternate so that both see the same noise.
//
// Then bf16 products (ops::matmul of bf16 operands, a float32 result) on each bf16 engine this machine runs, at
// the shapes of the encoder benchmark's step (4096 tokens, d_model 256, ff 1024; forward, and the backward's
// transposed forms), next to the float32 product of the same shape, on the default threads.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "framework/ops/ops.hpp"
#include "framework/runtime/bf16_matmul.hpp"
#include "framework/runtime/blas.hpp"
#include "framework/runtime/cpu_features.hpp"
#include "framework/runtime/detail/gemm.hpp"

using namespace loom;

namespace {

// cblas_sgemm's C signature; the CBLAS enums are ints (CblasRowMajor = 101, CblasNoTrans = 111).
using Sgemm = void (*)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                       const float* b, int ldb, float beta, float* c, int ldc);
using SetThreads = void (*)(int threads);
constexpr int kRowMajor = 101, kNoTrans = 111;

double seconds_of(auto&& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

struct Row {
  double loom_gflops, sgemm_gflops;
};

Row measure(std::int64_t n, int repeats, int threads, Sgemm sgemm, SetThreads set_openblas_threads) {
  const Tensor a = Tensor::randn({n, n}, DType::f32, 1), b = Tensor::randn({n, n}, DType::f32, 2);
  std::vector<float> c(std::size_t(n * n));
  const int in = int(n);
  auto run_loom = [&] { (void)ops::matmul(a, b); };
  auto run_sgemm = [&] {
    set_openblas_threads(threads);
    sgemm(kRowMajor, kNoTrans, kNoTrans, in, in, in, 1.0f, a.data<float>(), in, b.data<float>(), in, 0.0f, c.data(),
          in);
    set_openblas_threads(1);  // as loom runs it
  };
  for (int i = 0; i < 2; ++i) {  // warm-up: thread pool, caches, page faults
    run_loom();
    run_sgemm();
  }
  std::vector<double> loom_s, sgemm_s;
  for (int i = 0; i < repeats; ++i) {
    loom_s.push_back(seconds_of(run_loom));
    sgemm_s.push_back(seconds_of(run_sgemm));
  }
  const double flops = 2.0 * double(n) * double(n) * double(n);
  return {flops / median(loom_s) * 1e-9, flops / median(sgemm_s) * 1e-9};
}

/// GFLOP/s of op(a) @ op(b), float32 and bf16 on each engine, alternating, median of `repeats`.
void bf16_products(int repeats) {
  struct Product {
    std::int64_t m, k, n;
    bool transpose_a, transpose_b;
    const char* what;
  };
  const Product products[] = {{4096, 256, 256, false, false, "x @ W (projection)"},
                              {4096, 256, 1024, false, false, "x @ W1 (feed-forward in)"},
                              {4096, 1024, 256, false, false, "h @ W2 (feed-forward out)"},
                              {4096, 256, 1024, false, true, "g @ W^T (input gradient)"},
                              {1024, 4096, 256, true, false, "x^T @ g (kernel gradient)"},
                              {2048, 2048, 2048, false, false, "square 2048"}};
  const std::vector<std::string> engines = available_bf16_matmul_engines();
  fmt::print("\nbf16 products (engines: {}; default {})\n", fmt::join(engines, ", "), bf16_matmul_engine());
  fmt::print("{:>28} {:>16}", "product", "f32 GFLOP/s");
  for (const std::string& e : engines) fmt::print(" {:>16} {:>8}", e + " GFLOP/s", "x f32");
  fmt::print("\n");
  const std::string previous = bf16_matmul_engine();
  for (const Product& p : products) {
    const Shape a_shape = p.transpose_a ? Shape{p.k, p.m} : Shape{p.m, p.k};
    const Shape b_shape = p.transpose_b ? Shape{p.n, p.k} : Shape{p.k, p.n};
    const Tensor a = Tensor::randn(a_shape, DType::f32, 3), b = Tensor::randn(b_shape, DType::f32, 4);
    const Tensor ha = ops::cast(a, DType::bf16), hb = ops::cast(b, DType::bf16);
    auto op = [&](const Tensor& t, bool transpose) { return transpose ? ops::transpose(t) : t; };
    std::vector<std::vector<double>> s(engines.size() + 1);
    for (int i = 0; i < repeats + 1; ++i) {  // the first round warms up
      const double f32 = seconds_of([&] { (void)ops::matmul(op(a, p.transpose_a), op(b, p.transpose_b)); });
      if (i > 0) s[0].push_back(f32);
      for (std::size_t e = 0; e < engines.size(); ++e) {
        set_bf16_matmul_engine(engines[e]);
        const double t = seconds_of([&] { (void)ops::matmul(op(ha, p.transpose_a), op(hb, p.transpose_b)); });
        if (i > 0) s[e + 1].push_back(t);
      }
    }
    const double flops = 2.0 * double(p.m) * double(p.k) * double(p.n);
    fmt::print("{:>28} {:>16.1f}", p.what, flops / median(s[0]) * 1e-9);
    for (std::size_t e = 0; e < engines.size(); ++e)
      fmt::print(" {:>16.1f} {:>7.2f}x", flops / median(s[e + 1]) * 1e-9, median(s[0]) / median(s[e + 1]));
    fmt::print("\n");
    std::fflush(stdout);
  }
  set_bf16_matmul_engine(previous);
}

}  // namespace

int main() {
  const BlasInfo info = blas_info();
  const CpuFeatures& cpu = cpu_features();
  fmt::print("cpu: {} ({}), loom kernels: {}\n", cpu.brand, cpu.vendor, cpu.best_isa());
  fmt::print("OpenBLAS core: {} ({}), default threads: {}\n", info.core,
             info.core_chosen_by_loom ? "chosen by loom from CPUID" : "as given or detected by OpenBLAS",
             info.threads);
  fmt::print("config: {}\n\n", info.config);

  const auto sgemm = reinterpret_cast<Sgemm>(blas::symbol("cblas_sgemm"));
  const auto set_openblas_threads = reinterpret_cast<SetThreads>(blas::symbol("openblas_set_num_threads"));
  struct Size {
    std::int64_t n;
    int repeats;
  };
  const Size sizes[] = {{256, 200}, {1024, 21}, {2048, 7}};
  fmt::print("{:>7} {:>5} {:>16} {:>16} {:>10}\n", "threads", "n", "loom GFLOP/s", "sgemm GFLOP/s", "loom/sgemm");
  for (int threads : {1, 2}) {
    set_blas_threads(threads);
    for (const Size& s : sizes) {
      const Row r = measure(s.n, s.repeats, threads, sgemm, set_openblas_threads);
      fmt::print("{:>7} {:>5} {:>16.1f} {:>16.1f} {:>9.1f}%\n", threads, s.n, r.loom_gflops, r.sgemm_gflops,
                 100.0 * r.loom_gflops / r.sgemm_gflops);
      std::fflush(stdout);
    }
  }
  fmt::print("\nmedians over 200/21/7 repeats (n = 256/1024/2048). The generic core for comparison:\n"
             "  OPENBLAS_CORETYPE=Prescott bench_matmul\n");
  set_blas_threads(info.threads);
  bf16_products(9);
  return 0;
}
