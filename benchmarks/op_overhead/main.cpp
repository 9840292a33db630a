// Fixed cost of one op: microseconds per ops::add on 8x8 float32 tensors, where the arithmetic (64 adds) is
// negligible and what is measured is dispatch, checks, output allocation and, with a GradientTape watching
// the input, building and appending the tape node. Goal: <= 0.5 us per recorded op.
//
//   bench_op_overhead
//   python3 benchmarks/op_overhead/peer_torch.py     # the same chain in PyTorch eager mode
//
// Each figure is the median over repeats of a chain of kChain dependent adds.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"

using namespace loom;

namespace {

constexpr int kChain = 1000;
constexpr int kRepeats = 51;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Microseconds per add of one chain z = z + y, ..., with or without a tape recording it.
double chain_us(bool record) {
  const Tensor x = Tensor::randn({8, 8}, DType::f32, 1), y = Tensor::randn({8, 8}, DType::f32, 2);
  std::optional<GradientTape> tape;
  if (record) tape.emplace().watch(x);
  Tensor z = x;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kChain; ++i) z = ops::add(z, y);
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  if (record && tape->recorded_ops().size() != std::size_t(kChain)) std::fprintf(stderr, "tape did not record the chain\n");
  return us / kChain;  // the tape is freed outside the timed region
}

double median_us(bool record) {
  std::vector<double> runs;
  for (int i = 0; i < 3; ++i) chain_us(record);  // warm-up: allocator pools
  for (int i = 0; i < kRepeats; ++i) runs.push_back(chain_us(record));
  return median(runs);
}

}  // namespace

int main() {
  const double taped = median_us(true);
  const double untaped = median_us(false);
  fmt::print("ops::add on 8x8 float32, chain of {}, median of {} runs\n", kChain, kRepeats);
  fmt::print("  recorded on a GradientTape: {:.3f} us/op\n", taped);
  fmt::print("  no tape recording:          {:.3f} us/op\n", untaped);
  return 0;
}
