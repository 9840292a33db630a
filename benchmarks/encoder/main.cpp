// One training step of a pre-norm Transformer encoder block: forward, backward and an Adam update.
// Batch 32, sequence 128, d_model 256, 8 heads, feed-forward 1024 (ReLU), LayerNorm epsilon 1e-3, MSE loss,
// float32, OpenBLAS on 2 threads. Prints the median step time over kRepeats steps after kWarmup, the peak
// RSS, and loom's count of tensor memory (memory_stats): the peak of live tensor bytes over the timed steps and
// what lives between steps (weights, Adam's slots, the data). Then the step's GEMM floor: its matrix-product
// FLOPs over OpenBLAS's own sgemm rate at 2048 square measured in this process, and loom's step as a multiple
// of it. The peer, benchmarks/encoder/peer_torch.py, runs the identical configuration in PyTorch.
// --mixed-bfloat16 builds the block under Keras's mixed_bfloat16 policy (float32 weights, bf16 matmuls) and also
// prints the rate of a 2048^2 bf16 matmul on loom's bf16 engine. --remat runs the block through loom::remat (the
// tape keeps its input only; the backward pass recomputes it).
//
//   bench_encoder [--mixed-bfloat16] [--remat]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "benchmarks/sgemm_rate.hpp"
#include "loom.hpp"

using namespace loom;
namespace L = loom::layers;

namespace {

constexpr std::int64_t kBatch = 32, kSeq = 128, kModel = 256, kHeads = 8, kFF = 1024;
constexpr int kWarmup = 3, kRepeats = 20;

/// The step's matrix-product FLOPs: forward, the Q, K, V and output projections (4 x 2 T d^2 over T = batch x
/// seq tokens), the two feed-forward products (2 x 2 T d ff) and attention's QK^T and AV (2 x 2 batch seq^2 d);
/// the backward pass twice that (each product's two gradient products). About 21 GFLOP.
double step_gflop() {
  const double tokens = double(kBatch * kSeq), d = double(kModel);
  const double forward = 4 * 2 * tokens * d * d + 2 * 2 * tokens * d * double(kFF) +
                         2 * 2 * double(kBatch) * double(kSeq) * double(kSeq) * d;
  return 3 * forward * 1e-9;
}

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_maxrss) / 1024.0;  // KiB on Linux
}

}  // namespace

int main(int argc, char** argv) {
  bool mixed = false, rematerialize = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--mixed-bfloat16") {
      mixed = true;
    } else if (arg == "--remat") {
      rematerialize = true;
    } else {
      fmt::print(stderr, "usage: bench_encoder [--mixed-bfloat16] [--remat]\n");
      return 2;
    }
  }
  if (mixed) mixed_precision::set_global_policy("mixed_bfloat16");
  const Tensor x = Tensor::randn({kBatch, kSeq, kModel}, DType::f32, 1);
  const Tensor target = Tensor::randn({kBatch, kSeq, kModel}, DType::f32, 2);
  L::TransformerEncoder block({.num_heads = kHeads, .ff_dim = kFF, .norm_first = true, .epsilon = 1e-3});
  block(x);  // builds the weights
  const UnaryRematFunction forward = [&](const Tensor& input) { return block(input, /*training=*/true); };
  const UnaryRematFunction step_forward = rematerialize ? remat(forward) : forward;
  optim::Adam adam({.learning_rate = 1e-4});

  std::vector<double> ms;
  double loss = 0;
  std::int64_t between_steps = 0;
  for (int step = 0; step < kWarmup + kRepeats; ++step) {
    if (step == kWarmup) {
      between_steps = memory_stats().live_bytes;
      reset_peak_memory_stats();
    }
    const auto start = std::chrono::steady_clock::now();
    {
      GradientTape tape;
      const Tensor l = ops::mean(ops::square(step_forward(x) - target));
      const auto weights = block.trainable_weights();
      adam.apply_gradients(tape.gradient(l, weights), weights);
      loss = l.item<double>();
    }
    const double elapsed = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (step >= kWarmup) ms.push_back(elapsed);
  }
  std::sort(ms.begin(), ms.end());
  const BlasInfo blas = blas_info();
  const MemoryStats memory = memory_stats();
  fmt::print("loom encoder step ({}{}, batch {}, seq {}, d_model {}, {} heads, ff {}): median {:.1f} ms (min {:.1f}, max "
             "{:.1f}) over {} steps, peak RSS {:.0f} MiB, peak live tensors {:.1f} MiB ({:.1f} MiB between steps), "
             "final loss {:.4f}; OpenBLAS {} on {} threads, SIMD {}\n",
             mixed ? fmt::format("mixed_bfloat16, bf16 matmuls on {}", bf16_matmul_engine()) : std::string("float32"),
             rematerialize ? ", remat" : "", kBatch, kSeq, kModel, kHeads, kFF, ms[ms.size() / 2], ms.front(), ms.back(), ms.size(), peak_rss_mib(),
             double(memory.peak_live_bytes) / double(1 << 20), double(between_steps) / double(1 << 20), loss,
             blas.core, blas.threads, simd::active_isa());
  const double sgemm = benchmarks::sgemm_gflops(2048, 2048, 2048, 5);
  const double floor_ms = step_gflop() / sgemm * 1e3;
  fmt::print("GEMM floor: {:.1f} GFLOP per step at {:.1f} GFLOP/s (sgemm 2048^2 in this process) = {:.1f} ms; "
             "loom's step is {:.2f}x its floor\n",
             step_gflop(), sgemm, floor_ms, ms[ms.size() / 2] / floor_ms);
  if (mixed) {
    const double bf16 = benchmarks::bf16_matmul_gflops(2048, 5);
    fmt::print("bf16 matmul 2048^2 on {}: {:.1f} GFLOP/s ({:.2f}x sgemm); the step's FLOPs at that rate = {:.1f} ms\n",
               bf16_matmul_engine(), bf16, bf16 / sgemm, step_gflop() / bf16 * 1e3);
  }
  return 0;
}
