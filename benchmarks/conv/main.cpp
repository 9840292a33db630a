// A small ResNet-style stack, forward + backward, against the same network in PyTorch in interleaved rounds.
// Two basic blocks relu(x + bn(conv(relu(bn(conv(x)))))): Conv2D 3x3 ("same", 64 -> 64 filters, no bias) and
// BatchNormalization in training mode (Keras's momentum 0.99, epsilon 1e-3), ReLU; batch 32, 32x32 pixels,
// 64 channels, channels_last, float32. One step is the forward pass, loss = mean of the output, and the
// gradients of every trainable weight and of the input (what a training step computes before its optimizer,
// which neither side runs). The peer, benchmarks/conv/peer_torch.py, builds the same network in PyTorch
// (torch.autograd.grad of the same sources) in both of its layouts, channels_last and NCHW (contiguous).
//
//   bench_conv [--rounds R] [--steps S] [--warmup W] [--python PYTHON] [--peer peer_torch.py]
//              [--peer-env VAR=VALUE]... [--no-torch]
//     PYTHON: an interpreter with torch (default python3); the peer defaults to the one next to this file;
//     --peer-env sets a variable for the peer alone, e.g. OMP_WAIT_POLICY=PASSIVE: PyTorch's OpenMP threads
//     spin at every barrier by default, and lose 2.5x more than loom when another process takes a core
//   bench_conv loom S W          # one loom measurement in this process (what each round runs)
//   bench_conv sgemm             # one cblas_sgemm measurement in this process
//
// Each round runs, each in a fresh process so that its peak RSS is its own: loom, PyTorch with channels_last,
// PyTorch with NCHW (the order alternates between rounds: odd rounds loom first, even rounds loom last), then
// OpenBLAS's cblas_sgemm on the machine's threads at the shape of the whole conv forward
// ([32768, 576] x [576, 64]) and at 2048 square. PyTorch runs on as many threads as loom's gemm split
// (torch.set_num_threads). A process reports the median of S timed steps after W warm-up steps, split into
// forward (up to the loss) and backward (the gradient call). The summary gives each side's median over the
// rounds, the median over rounds of the per-round ratio loom / torch (of the median steps, and of the
// fastest steps, which load on a shared machine disturbs less), GFLOP/s counting the convolutions
// alone (2*N*H*W*Cin*Cout*9 per conv forward, 3x that forward + backward: the input's and the kernel's
// gradients), and peak RSS (ru_maxrss; "RSS base" is the peak before the network is built: loom with OpenBLAS
// loaded, PyTorch after its import). Defaults: 5 rounds of 8 steps after 2 warm-up steps, about 2 minutes.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "benchmarks/rounds.hpp"
#include "benchmarks/sgemm_rate.hpp"
#include "framework/runtime/detail/gemm.hpp"
#include "framework/runtime/detail/parallel.hpp"
#include "loom.hpp"

using namespace loom;
namespace L = loom::layers;
using benchmarks::Fields;
using benchmarks::median;
using benchmarks::number;
using benchmarks::peak_rss_mib;
using benchmarks::quoted;
using benchmarks::run_child;

namespace {

constexpr std::int64_t kBatch = 32, kSize = 32, kChannels = 64, kBlocks = 2;
constexpr int kConvs = 2 * kBlocks;
/// FLOPs of one conv forward: 2 * N*H*W * Cin*9 * Cout.
constexpr double kConvFlop = 2.0 * kBatch * kSize * kSize * kChannels * 9 * kChannels;

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// ---- one loom measurement ----

/// relu(x + bn2(conv2(relu(bn1(conv1(x)))))).
class BasicBlock : public L::Layer {
 public:
  BasicBlock() : Layer("basic_block") {}

 protected:
  Tensor call(const Tensor& x, bool training) override {
    const Tensor h = ops::relu(bn1_(conv1_(x), training));
    return ops::relu(x + bn2_(conv2_(h), training));
  }

 private:
  static L::Conv2D conv() { return L::Conv2D(kChannels, {3, 3}, {.padding = "same", .use_bias = false}); }
  L::Conv2D& conv1_ = add_layer(conv());
  L::BatchNormalization& bn1_ = add_layer(L::BatchNormalization());
  L::Conv2D& conv2_ = add_layer(conv());
  L::BatchNormalization& bn2_ = add_layer(L::BatchNormalization());
};

int run_loom(int steps, int warmup) {
  const BlasInfo blas = blas_info();  // loads OpenBLAS, as the first gemm would
  const double base_mib = peak_rss_mib();
  const Tensor x = Tensor::randn({kBatch, kSize, kSize, kChannels}, DType::f32, 1);
  std::vector<BasicBlock> blocks(std::size_t{kBlocks});
  auto forward = [&](bool training) {
    Tensor h = x;
    for (auto& block : blocks) h = block(h, training);
    return h;
  };
  forward(false);  // builds the weights
  std::vector<Tensor> sources;
  for (auto& block : blocks)
    for (const Variable& w : block.trainable_weights()) sources.push_back(w.value());
  sources.push_back(x);

  std::vector<double> fwd_ms, bwd_ms, step_ms;
  double loss = 0;
  for (int step = 0; step < warmup + steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    double forward_ms = 0;
    {
      GradientTape tape;
      tape.watch(x);
      const Tensor l = ops::mean(forward(true));
      forward_ms = ms_since(start);
      const auto middle = std::chrono::steady_clock::now();
      const std::vector<Tensor> grads = tape.gradient(l, sources);
      const double backward_ms = ms_since(middle);
      loss = l.item<double>();
      if (step >= warmup) {
        fwd_ms.push_back(forward_ms);
        bwd_ms.push_back(backward_ms);
      }
    }
    if (step >= warmup) step_ms.push_back(ms_since(start));
  }
  fmt::print("loom core={} threads={} pool={} simd={} step_ms={:.2f} fwd_ms={:.2f} bwd_ms={:.2f} min_ms={:.2f} "
             "steps={} rss_mib={:.0f} base_mib={:.0f} loss={:.5f}\n",
             blas.core, blas.threads, parallel::thread_count(), simd::active_isa(), median(step_ms), median(fwd_ms),
             median(bwd_ms), *std::min_element(step_ms.begin(), step_ms.end()), step_ms.size(), peak_rss_mib(),
             base_mib, loss);
  return 0;
}

// ---- one sgemm measurement: cblas_sgemm of the very OpenBLAS loom loaded, on its own threads ----

int run_sgemm() {
  const int threads = blas_info().threads;
  const auto gflops = benchmarks::sgemm_gflops;
  const double thin = gflops(kBatch * kSize * kSize, 9 * kChannels, kChannels, 9);
  const double square = gflops(2048, 2048, 2048, 5);
  fmt::print("sgemm threads={} thin_gflops={:.1f} square_gflops={:.1f}\n", threads, thin, square);
  return 0;
}

// ---- the driver ----

struct Series {
  std::vector<double> step, fwd, bwd, rss, base;
  void add(const Fields& f) {
    step.push_back(number(f, "step_ms"));
    fwd.push_back(number(f, "fwd_ms"));
    bwd.push_back(number(f, "bwd_ms"));
    rss.push_back(number(f, "rss_mib"));
    base.push_back(number(f, "base_mib"));
  }
};

int usage() {
  fmt::print(stderr,
             "usage: bench_conv [--rounds R] [--steps S] [--warmup W] [--python PYTHON] [--peer FILE] "
             "[--peer-env VAR=VALUE]... [--no-torch]\n"
             "       bench_conv loom STEPS WARMUP | bench_conv sgemm\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 3 && args[0] == "loom") return run_loom(std::atoi(args[1].c_str()), std::atoi(args[2].c_str()));
  if (args.size() == 1 && args[0] == "sgemm") return run_sgemm();

  int rounds = 5, steps = 8, warmup = 2;
  std::string python = "python3", peer = benchmarks::next_to(__FILE__, "peer_torch.py"), peer_env;
  bool torch = true;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const bool has_value = i + 1 < args.size();
    if (args[i] == "--rounds" && has_value) rounds = std::atoi(args[++i].c_str());
    else if (args[i] == "--steps" && has_value) steps = std::atoi(args[++i].c_str());
    else if (args[i] == "--warmup" && has_value) warmup = std::atoi(args[++i].c_str());
    else if (args[i] == "--python" && has_value) python = args[++i];
    else if (args[i] == "--peer" && has_value) peer = args[++i];
    else if (args[i] == "--peer-env" && has_value) peer_env += fmt::format(" {}", quoted(args[++i]));
    else if (args[i] == "--no-torch") torch = false;
    else return usage();
  }
  if (rounds < 1 || steps < 1 || warmup < 0) return usage();

  const BlasInfo blas = blas_info();
  const int threads = blas.threads;
  const std::string self = quoted(benchmarks::self_path("bench_conv"));
  const std::string loom_cmd = fmt::format("{} loom {} {}", self, steps, warmup);
  auto torch_cmd = [&](const char* format) {
    const std::string env = peer_env.empty() ? std::string() : fmt::format("env{} ", peer_env);
    return fmt::format("{}{} {} --threads {} --steps {} --warmup {} --memory-format {}", env, quoted(python),
                       quoted(peer), threads, steps, warmup, format);
  };
  const double step_flop = 3.0 * kConvs * kConvFlop;
  fmt::print("conv stack: {} basic blocks = {} x (Conv2D 3x3 same {} -> {} no bias, BatchNormalization, ReLU), "
             "residual add every two; batch {}, {}x{}, channels_last, float32; forward + gradients of the weights "
             "and the input\n",
             kBlocks, kConvs, kChannels, kChannels, kBatch, kSize, kSize);
  fmt::print("{} rounds of {} steps after {} warm-up; {} threads (loom's gemm split; torch.set_num_threads); OpenBLAS "
             "core {}; conv FLOPs per step {:.2f} G (forward {:.2f} G)\n",
             rounds, steps, warmup, threads, blas.core, step_flop * 1e-9, kConvs * kConvFlop * 1e-9);
  if (!peer_env.empty()) fmt::print("the peer runs with{}\n", peer_env);
  std::fflush(stdout);

  Series loom, torch_cl, torch_nchw;
  std::vector<double> ratio_cl, ratio_nchw, min_ratio_cl, min_ratio_nchw, thin, square;
  std::string version;
  for (int round = 1; round <= rounds; ++round) {
    Fields l, tc, tn;
    auto run_torch = [&] {
      if (!torch) return;
      tc = run_child(torch_cmd("channels_last"), "torch");
      tn = run_child(torch_cmd("contiguous"), "torch");
    };
    if (round % 2 == 1) {
      l = run_child(loom_cmd, "loom");
      run_torch();
    } else {
      run_torch();
      l = run_child(loom_cmd, "loom");
    }
    const Fields s = run_child(fmt::format("{} sgemm", self), "sgemm");
    if (l.empty() || (torch && (tc.empty() || tn.empty())) || s.empty()) return 1;
    loom.add(l);
    thin.push_back(number(s, "thin_gflops"));
    square.push_back(number(s, "square_gflops"));
    std::string line = fmt::format("round {}: loom {:.1f} ms (fwd {:.1f}, bwd {:.1f}, {:.0f} MiB)", round,
                                   number(l, "step_ms"), number(l, "fwd_ms"), number(l, "bwd_ms"),
                                   number(l, "rss_mib"));
    if (torch) {
      version = tc["version"];
      torch_cl.add(tc);
      torch_nchw.add(tn);
      ratio_cl.push_back(number(l, "step_ms") / number(tc, "step_ms"));
      ratio_nchw.push_back(number(l, "step_ms") / number(tn, "step_ms"));
      min_ratio_cl.push_back(number(l, "min_ms") / number(tc, "min_ms"));
      min_ratio_nchw.push_back(number(l, "min_ms") / number(tn, "min_ms"));
      line += fmt::format(" | torch channels_last {:.1f} ms (fwd {:.1f}, bwd {:.1f}, {:.0f} MiB) | torch NCHW "
                          "{:.1f} ms (fwd {:.1f}, bwd {:.1f}, {:.0f} MiB) | loom/torch {:.2f} cl, {:.2f} nchw",
                          number(tc, "step_ms"), number(tc, "fwd_ms"), number(tc, "bwd_ms"), number(tc, "rss_mib"),
                          number(tn, "step_ms"), number(tn, "fwd_ms"), number(tn, "bwd_ms"), number(tn, "rss_mib"),
                          ratio_cl.back(), ratio_nchw.back());
    }
    line += fmt::format(" | sgemm {:.0f} / {:.0f} GFLOP/s", thin.back(), square.back());
    fmt::print("{}\n", line);
    std::fflush(stdout);
  }

  auto row = [&](const std::string& name, const Series& s) {
    const double step = median(s.step), fwd = median(s.fwd), bwd = median(s.bwd);
    fmt::print("  {:<27} {:>8.1f} {:>8.1f} {:>8.1f} {:>8.1f} {:>12.1f} {:>8.0f} {:>9.0f}\n", name, step, fwd, bwd,
               step_flop / step * 1e-6, kConvs * kConvFlop / fwd * 1e-6, median(s.rss), median(s.base));
  };
  fmt::print("\nmedians over {} rounds\n  {:<27} {:>8} {:>8} {:>8} {:>8} {:>12} {:>8} {:>9}\n", rounds, "", "step ms",
             "fwd ms", "bwd ms", "GFLOP/s", "fwd GFLOP/s", "peak RSS", "RSS base");
  row("loom", loom);
  if (torch) {
    row(fmt::format("torch {} channels_last", version), torch_cl);
    row(fmt::format("torch {} NCHW", version), torch_nchw);
    auto ratios = [](const char* what, const std::vector<double>& cl, const std::vector<double>& nchw) {
      fmt::print("  loom / torch {}, median of the per-round ratios: {:.2f} (channels_last; {:.2f} - {:.2f}), "
                 "{:.2f} (NCHW; {:.2f} - {:.2f})\n",
                 what, median(cl), *std::min_element(cl.begin(), cl.end()), *std::max_element(cl.begin(), cl.end()),
                 median(nchw), *std::min_element(nchw.begin(), nchw.end()),
                 *std::max_element(nchw.begin(), nchw.end()));
    };
    ratios("median step", ratio_cl, ratio_nchw);
    ratios("fastest step", min_ratio_cl, min_ratio_nchw);
  }
  fmt::print("  OpenBLAS cblas_sgemm on {} threads: {:.1f} GFLOP/s at [32768, 576] x [576, 64], {:.1f} GFLOP/s at "
             "2048 square\n",
             threads, median(thin), median(square));
  return 0;
}
