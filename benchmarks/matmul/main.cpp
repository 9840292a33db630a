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
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <fmt/format.h>

#include "framework/ops/ops.hpp"
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
  return 0;
}
