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
//
//   bench_memory --rounds R [--python PYTHON] [--peer peer_torch.py] [--no-torch] [--seq ...] [--blocks ...]
//                [--steps ...] [--attention ...]
//
// runs R interleaved rounds, each of four child processes: loom without and with remat, and the same stack in
// PyTorch (benchmarks/memory/peer_torch.py, on as many threads as loom's) without and with
// torch.utils.checkpoint around each block; odd rounds run loom first, even rounds PyTorch first. A child
// reports its last step's time (the first step pays the allocator's first touches) and its peak RSS. The
// summary gives the medians over the rounds and the medians of the per-round ratios: remat / without for
// each side (RSS and time) and loom / PyTorch (time and RSS, without and with recomputation).
#include <chrono>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "benchmarks/rounds.hpp"
#include "loom.hpp"

using namespace loom;
namespace L = loom::layers;
using benchmarks::median;
using benchmarks::number;
using benchmarks::quoted;

namespace {

constexpr std::int64_t kBatch = 8, kModel = 256, kHeads = 8, kFF = 1024;

double mib(std::int64_t bytes) { return double(bytes) / double(1 << 20); }

struct Args {
  std::int64_t seq = 2048, blocks = 12, steps = 2;
  bool flash = true;
  bool remat = false;
  std::optional<int> rounds;  // the driver, when given
  std::string python = "python3";
  std::string peer = benchmarks::next_to(__FILE__, "peer_torch.py");
  bool torch = true;
};

std::int64_t positive(const std::string& key, const std::string& value) {
  std::size_t used = 0;
  std::int64_t n = 0;
  try {
    n = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  check(used == value.size() && n > 0, "bench_memory: {} takes a positive integer, got '{}'", key, value);
  return n;
}

Args parse(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    if (key == "--no-torch") {
      args.torch = false;
      continue;
    }
    check(i + 1 < argc, "bench_memory: {} needs a value", key);
    const std::string value = argv[++i];
    if (key == "--seq") args.seq = positive(key, value);
    else if (key == "--blocks") args.blocks = positive(key, value);
    else if (key == "--steps") args.steps = positive(key, value);
    else if (key == "--rounds") args.rounds = int(std::min<std::int64_t>(positive(key, value), 1000));
    else if (key == "--python") args.python = value;
    else if (key == "--peer") args.peer = value;
    else if (key == "--attention") {
      check(value == "flash" || value == "math", "bench_memory: --attention is flash or math, got '{}'", value);
      args.flash = value == "flash";
    } else if (key == "--remat") {
      check(value == "0" || value == "1", "bench_memory: --remat is 0 or 1, got '{}'", value);
      args.remat = value == "1";
    } else {
      throw Error(fmt::format("bench_memory: unknown option '{}' (--seq, --blocks, --steps, --attention, --remat, "
                              "--rounds, --python, --peer, --no-torch)", key));
    }
  }
  return args;
}

/// One configuration in this process.
int run_one(const Args& args) {
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
  double seconds = 0.0, loss = 0.0, peak_live = 0.0;
  for (std::int64_t step = 0; step < args.steps; ++step) {
    const std::int64_t between = memory_stats().live_bytes;
    reset_peak_memory_stats();
    const auto start = std::chrono::steady_clock::now();
    {
      GradientTape tape;
      Tensor h = x;
      for (const auto& call : calls) h = call({h})[0];
      const Tensor l = ops::mean(ops::square(h - target));
      adam.apply_gradients(tape.gradient(l, weights), weights);
      loss = l.item<double>();
    }
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    peak_live = mib(memory_stats().peak_live_bytes);
    fmt::print("step {}: {:.2f} s, peak live tensors {:.1f} MiB ({:.1f} MiB between steps), loss {:.5f}\n", step,
               seconds, peak_live, mib(between), loss);
  }
  const double rss = benchmarks::peak_rss_mib();
  fmt::print("peak RSS {:.1f} MiB\n", rss);
  fmt::print("loom step_s={:.3f} live_mib={:.1f} rss_mib={:.0f} loss={:.5f}\n", seconds, peak_live, rss, loss);
  return 0;
}

/// The interleaved rounds against PyTorch.
int drive(const Args& args) {
  const int threads = blas_info().threads;
  const std::string shape = fmt::format("--seq {} --blocks {} --steps {}", args.seq, args.blocks, args.steps);
  const auto loom_cmd = [&](bool use_remat) {
    return fmt::format("{} {} --attention {} --remat {}", quoted(benchmarks::self_path("bench_memory")), shape,
                       args.flash ? "flash" : "math", use_remat ? 1 : 0);
  };
  const auto torch_cmd = [&](bool checkpoint) {
    return fmt::format("{} {} {} --threads {} --checkpoint {}", quoted(args.python), quoted(args.peer), shape, threads,
                       checkpoint ? 1 : 0);
  };
  fmt::print("bench_memory: {} rounds; {} pre-norm blocks, batch {}, seq {}, d_model {}, {} heads, ff {}, {} "
             "attention; {} threads; the last of {} steps\n",
             *args.rounds, args.blocks, kBatch, args.seq, kModel, kHeads, kFF, args.flash ? "flash" : "math", threads,
             args.steps);
  std::fflush(stdout);
  struct Side {
    std::vector<double> time, rss, live;  // live: loom's peak of live tensors (loom only)
  };
  Side loom_plain, loom_remat, torch_plain, torch_checkpoint;
  std::vector<double> remat_rss, remat_time, checkpoint_rss, checkpoint_time, plain_ratio, remat_ratio,
      plain_rss_ratio, remat_rss_ratio;
  std::string version;
  for (int round = 1; round <= *args.rounds; ++round) {
    benchmarks::Fields lp, lr, tp, tc;
    const auto run_loom = [&] {
      lp = benchmarks::run_child(loom_cmd(false), "loom");
      lr = benchmarks::run_child(loom_cmd(true), "loom");
    };
    const auto run_torch = [&] {
      if (!args.torch) return;
      tp = benchmarks::run_child(torch_cmd(false), "torch");
      tc = benchmarks::run_child(torch_cmd(true), "torch");
    };
    if (round % 2 == 1) {
      run_loom();
      run_torch();
    } else {
      run_torch();
      run_loom();
    }
    if (lp.empty() || lr.empty() || (args.torch && (tp.empty() || tc.empty()))) return 1;
    const auto add = [](Side& side, const benchmarks::Fields& f) {
      side.time.push_back(number(f, "step_s"));
      side.rss.push_back(number(f, "rss_mib"));
      side.live.push_back(number(f, "live_mib"));
    };
    add(loom_plain, lp);
    add(loom_remat, lr);
    remat_rss.push_back(number(lr, "rss_mib") / number(lp, "rss_mib"));
    remat_time.push_back(number(lr, "step_s") / number(lp, "step_s"));
    std::string line = fmt::format("round {}: loom {:.2f} s {:.0f} MiB, remat {:.2f} s {:.0f} MiB (RSS {:.2f}, time "
                                   "{:.2f}x)", round, number(lp, "step_s"), number(lp, "rss_mib"),
                                   number(lr, "step_s"), number(lr, "rss_mib"), remat_rss.back(), remat_time.back());
    if (args.torch) {
      version = tp["version"];
      add(torch_plain, tp);
      add(torch_checkpoint, tc);
      checkpoint_rss.push_back(number(tc, "rss_mib") / number(tp, "rss_mib"));
      checkpoint_time.push_back(number(tc, "step_s") / number(tp, "step_s"));
      plain_ratio.push_back(number(lp, "step_s") / number(tp, "step_s"));
      remat_ratio.push_back(number(lr, "step_s") / number(tc, "step_s"));
      plain_rss_ratio.push_back(number(lp, "rss_mib") / number(tp, "rss_mib"));
      remat_rss_ratio.push_back(number(lr, "rss_mib") / number(tc, "rss_mib"));
      line += fmt::format(" | torch {:.2f} s {:.0f} MiB, checkpoint {:.2f} s {:.0f} MiB (RSS {:.2f}, time {:.2f}x) | "
                          "loom/torch time {:.2f}, with recomputation {:.2f}",
                          number(tp, "step_s"), number(tp, "rss_mib"), number(tc, "step_s"), number(tc, "rss_mib"),
                          checkpoint_rss.back(), checkpoint_time.back(), plain_ratio.back(), remat_ratio.back());
    }
    fmt::print("{}\n", line);
    std::fflush(stdout);
  }
  fmt::print("\nmedians over {} rounds        step s   peak RSS MiB   peak live tensors MiB\n", *args.rounds);
  const auto row = [](const std::string& name, const Side& side) {
    const double live = median(side.live);
    fmt::print("  {:<26} {:>7.2f} {:>12.0f}   {}\n", name, median(side.time), median(side.rss),
               live > 0 ? fmt::format("{:>21.1f}", live) : std::string());
  };
  row("loom", loom_plain);
  row("loom remat", loom_remat);
  if (args.torch) {
    row(fmt::format("torch {}", version), torch_plain);
    row(fmt::format("torch {} checkpoint", version), torch_checkpoint);
  }
  fmt::print("median of the per-round ratios\n  loom remat / without: RSS {:.2f}, time {:.2f}x\n", median(remat_rss),
             median(remat_time));
  if (args.torch) {
    fmt::print("  torch checkpoint / without: RSS {:.2f}, time {:.2f}x\n", median(checkpoint_rss),
               median(checkpoint_time));
    fmt::print("  loom / torch: time {:.2f} without, {:.2f} with recomputation; RSS {:.2f} without, {:.2f} with\n",
               median(plain_ratio), median(remat_ratio), median(plain_rss_ratio), median(remat_rss_ratio));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args args = parse(argc, argv);
    return args.rounds ? drive(args) : run_one(args);
  } catch (const Error& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 2;
  }
}
