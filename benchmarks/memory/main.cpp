// The memory of a training step of a deep pre-norm encoder: a stack of TransformerEncoder blocks (d_model 256,
// 8 heads, feed-forward 1024, ReLU), batch 8, float32, MSE loss, forward + backward + Adam. Prints, for each
// step, its time, loom's peak of live tensor bytes (memory_stats) and what lives between steps, and at the end
// the process's peak RSS. One configuration per process, so that each peak RSS is its own:
//
//   bench_memory [--seq 2048] [--blocks 12] [--steps 2] [--attention flash|math] [--remat 0|1]
//
// "math" composes attention from ops (the [B, heads, seq, seq] scores and probabilities are stored for the
// backward pass), "flash" is the tiled kernel (O(seq) memory per head). --remat 1 calls each block through
// loom::remat, which keeps only the block's input and recomputes the block during the backward pass.
#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "loom.hpp"

using namespace loom;
namespace L = loom::layers;

namespace {

constexpr std::int64_t kBatch = 8, kModel = 256, kHeads = 8, kFF = 1024;

double mib(std::int64_t bytes) { return double(bytes) / double(1 << 20); }

struct Args {
  std::int64_t seq = 2048, blocks = 12, steps = 2;
  bool flash = true;
  bool remat = false;
};

Args parse(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    check(i + 1 < argc, "bench_memory: {} needs a value", key);
    const std::string value = argv[++i];
    if (key == "--seq") args.seq = std::stoll(value);
    else if (key == "--blocks") args.blocks = std::stoll(value);
    else if (key == "--steps") args.steps = std::stoll(value);
    else if (key == "--attention") {
      check(value == "flash" || value == "math", "bench_memory: --attention is flash or math, got '{}'", value);
      args.flash = value == "flash";
    } else if (key == "--remat") {
      check(value == "0" || value == "1", "bench_memory: --remat is 0 or 1, got '{}'", value);
      args.remat = value == "1";
    } else {
      throw Error(fmt::format("bench_memory: unknown option '{}' (--seq, --blocks, --steps, --attention, --remat)",
                              key));
    }
  }
  check(args.seq > 0 && args.blocks > 0 && args.steps > 0, "bench_memory: --seq, --blocks and --steps must be > 0");
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  const Tensor x = Tensor::randn({kBatch, args.seq, kModel}, DType::f32, 1);
  const Tensor target = Tensor::randn({kBatch, args.seq, kModel}, DType::f32, 2);
  std::vector<std::shared_ptr<L::TransformerEncoder>> blocks;
  for (std::int64_t b = 0; b < args.blocks; ++b)
    blocks.push_back(std::make_shared<L::TransformerEncoder>(L::TransformerEncoderOptions{
        .num_heads = kHeads, .ff_dim = kFF, .norm_first = true, .epsilon = 1e-3,
        .flash_attention = args.flash ? ops::AttentionImpl::Flash : ops::AttentionImpl::Math}));
  std::vector<Variable> weights;
  {
    Tensor h = x;
    for (auto& block : blocks) h = (*block)(h);  // builds the weights
    for (auto& block : blocks)
      for (const Variable& w : block->trainable_weights()) weights.push_back(w);
  }
  optim::Adam adam({.learning_rate = 1e-4});
  std::vector<RematFunction> calls;
  for (auto& block : blocks) {
    RematFunction call = [block](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{(*block)(in[0], /*training=*/true)};
    };
    calls.push_back(args.remat ? remat(call) : call);
  }
  fmt::print("bench_memory: {} pre-norm blocks, batch {}, seq {}, d_model {}, {} heads, ff {}, {} attention{}\n",
             args.blocks, kBatch, args.seq, kModel, kHeads, kFF, args.flash ? "flash" : "math",
             args.remat ? ", remat" : "");
  for (std::int64_t step = 0; step < args.steps; ++step) {
    const std::int64_t between = memory_stats().live_bytes;
    reset_peak_memory_stats();
    const auto start = std::chrono::steady_clock::now();
    double loss = 0.0;
    {
      GradientTape tape;
      Tensor h = x;
      for (const auto& call : calls) h = call({h})[0];
      const Tensor l = ops::mean(ops::square(h - target));
      adam.apply_gradients(tape.gradient(l, weights), weights);
      loss = l.item<double>();
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    fmt::print("step {}: {:.2f} s, peak live tensors {:.1f} MiB ({:.1f} MiB between steps), loss {:.5f}\n", step,
               seconds, mib(memory_stats().peak_live_bytes), mib(between), loss);
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  fmt::print("peak RSS {:.1f} MiB\n", double(usage.ru_maxrss) / 1024.0);
  return 0;
}
