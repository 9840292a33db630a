// scaled_dot_product_attention, batch 1, 8 heads, head_dim 64, float32: forward and forward + backward
// (gradients of q, k and v for a fixed output gradient), for the flash kernels on each SIMD level this machine
// has and for the math path, over N = 512 ... 16384; full, causal, and causal with a 256-wide window. The
// flash_bf16 rows give the kernels bf16 q, k and v cast from the float32 ones inside the measured step (as
// mixed_bfloat16 does), on the widest level with the default bf16 engine (vdpbf16ps where the CPU has it).
// GFLOP/s counts 4*N^2*d*H for the forward and 3.5 times that for forward + backward, halved for causal
// (the window's figure uses the same causal count, so it shows the speed-up, not the work done).
//
//   bench_attention                      # the whole table (each row in a fresh process, for its peak RSS)
//   bench_attention N IMPL ISA MASK      # one row: IMPL flash|flash_bf16|math, ISA avx512|avx2|scalar,
//                                        #          MASK full|causal|window
//   bench_attention info                 # the widest ISA here and the OpenBLAS core loom picked
//   benchmarks/attention/goals.sh        # the goals below, in rounds interleaved with the PyTorch peer
//
// Goals: fwd+bwd at N = 4096 >= 150 GFLOP/s and faster than PyTorch (peer_torch.py); peak memory at N = 16384
// within 3x the size of q, k, v, o and their gradients; causal with window 256 at N = 16384 >= 20x faster than
// full causal. Each time is the median of 3 runs after one warm-up (one run when a run takes over 5 s).
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "framework/autograd/tape.hpp"
#include "framework/ops/attention.hpp"
#include "framework/ops/ops.hpp"
#include "framework/runtime/blas.hpp"
#include "framework/runtime/simd.hpp"

using namespace loom;

namespace {

constexpr std::int64_t kHeads = 8, kDim = 64;

double seconds_of(const std::function<void()>& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median_seconds(const std::function<void()>& fn) {
  const double first = seconds_of(fn);  // warm-up (and the estimate)
  if (first > 5.0) return first;
  std::vector<double> t{seconds_of(fn), seconds_of(fn), seconds_of(fn)};
  std::sort(t.begin(), t.end());
  return t[1];
}

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_maxrss) / 1024.0;  // KiB on Linux
}

/// One row, in this process: prints "N impl isa mask fwd_ms fwd_gflops fwdbwd_ms fwdbwd_gflops rss_mib".
int run_one(std::int64_t n, const std::string& impl, const std::string& isa, const std::string& mask) {
  const bool flash = impl != "math", bf16 = impl == "flash_bf16";
  if (flash) simd::set_active_isa(isa);
  const Tensor q = Tensor::randn({1, kHeads, n, kDim}, DType::f32, 1);
  const Tensor k = Tensor::randn({1, kHeads, n, kDim}, DType::f32, 2);
  const Tensor v = Tensor::randn({1, kHeads, n, kDim}, DType::f32, 3);
  const Tensor dout = Tensor::randn({1, kHeads, n, kDim}, DType::f32, 4);
  const ops::AttentionOptions options{.causal = mask != "full",
                                      .sliding_window = mask == "window" ? 256 : 0,
                                      .impl = flash ? ops::AttentionImpl::Flash : ops::AttentionImpl::Math};
  auto attention = [&] {
    if (!bf16) return ops::scaled_dot_product_attention(q, k, v, options);
    return ops::scaled_dot_product_attention(ops::cast(q, DType::bf16), ops::cast(k, DType::bf16),
                                             ops::cast(v, DType::bf16), options);
  };
  const double fwd = median_seconds([&] { (void)attention(); });
  const double both = median_seconds([&] {
    GradientTape tape;
    tape.watch({q, k, v});
    const Tensor o = attention();
    (void)tape.gradient(o, {q, k, v}, dout);
  });
  const double flop = 4.0 * double(n) * double(n) * kDim * kHeads * (mask == "full" ? 1.0 : 0.5);
  fmt::print("{:>6} {:>10} {:>6} {:>6} {:>10.2f} {:>8.1f} {:>11.2f} {:>8.1f} {:>9.0f}\n", n, impl,
             flash ? isa : "blas", mask, fwd * 1e3, flop / fwd / 1e9, both * 1e3, 3.5 * flop / both / 1e9,
             peak_rss_mib());
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Two threads for the flash workers (two cores) and for OpenBLAS in the math path.
  set_blas_threads(2);
  if (argc == 5) return run_one(std::atoll(argv[1]), argv[2], argv[3], argv[4]);
  if (argc == 2 && std::string(argv[1]) == "info") {
    fmt::print("{} {}\n", simd::available_isas().front(), blas_info().core);
    return 0;
  }

  const double tensors_mib = 8.0 * kHeads * kDim * 16384 * 4 / (1 << 20);
  fmt::print("attention, batch 1, {} heads, head_dim {}, float32, 2 threads; OpenBLAS core {}\n", kHeads, kDim,
             blas_info().core);
  fmt::print("q, k, v, o and their gradients at N = 16384: {:.0f} MiB (3x = {:.0f} MiB)\n", tensors_mib,
             3 * tensors_mib);
  fmt::print("{:>6} {:>10} {:>6} {:>6} {:>10} {:>8} {:>11} {:>8} {:>9}\n", "N", "impl", "isa", "mask", "fwd ms",
             "GFLOP/s", "fwdbwd ms", "GFLOP/s", "RSS MiB");
  std::fflush(stdout);
  auto row = [&](std::int64_t n, const std::string& impl, const std::string& isa, const std::string& mask) {
    const pid_t pid = fork();
    if (pid == 0) {
      execl("/proc/self/exe", argv[0], std::to_string(n).c_str(), impl.c_str(), isa.c_str(), mask.c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
  };
  for (std::int64_t n : {512, 1024, 2048, 4096, 8192, 16384}) {
    for (const std::string& isa : simd::available_isas())
      if (isa != "scalar" || n <= 2048) row(n, "flash", isa, "full");
    row(n, "flash_bf16", simd::available_isas().front(), "full");
    if (n <= 4096) row(n, "math", "", "full");
  }
  for (std::int64_t n : {4096, 16384}) {
    row(n, "flash", simd::available_isas().front(), "causal");
    row(n, "flash", simd::available_isas().front(), "window");
  }
  return 0;
}
