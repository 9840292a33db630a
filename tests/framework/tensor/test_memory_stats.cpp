#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "framework/tensor/detail/buffer_pool.hpp"
#include "framework/tensor/memory_stats.hpp"
#include "framework/tensor/tensor.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;

TEST_CASE("memory_stats counts each tensor buffer once at its size and gives it back when freed", "[memory_stats]") {
  const MemoryStats before = memory_stats();
  {
    const Tensor a = Tensor::zeros({1000}, DType::f32);
    const MemoryStats with_a = memory_stats();
    CHECK(with_a.live_bytes - before.live_bytes == 4000);
    CHECK(with_a.live_buffers - before.live_buffers == 1);
    CHECK(with_a.allocations - before.allocations == 1);
    // Views share the buffer.
    const Tensor view = a.reshape({10, 100}).slice(0, 2, 8);
    CHECK(memory_stats().live_bytes == with_a.live_bytes);
    // A small buffer (kept inside its Storage) counts at its size too.
    const Tensor small = Tensor::zeros({3}, DType::f64);
    CHECK(memory_stats().live_bytes - with_a.live_bytes == 24);
  }
  const MemoryStats after = memory_stats();
  CHECK(after.live_bytes == before.live_bytes);
  CHECK(after.live_buffers == before.live_buffers);
  CHECK(after.allocations - before.allocations == 2);
  CHECK(after.peak_rss_bytes > 0);
}

TEST_CASE("memory_stats keeps the peak until reset_peak_memory_stats", "[memory_stats]") {
  reset_peak_memory_stats();
  const MemoryStats start = memory_stats();
  CHECK(start.peak_live_bytes == start.live_bytes);
  { const Tensor big = Tensor::empty({1 << 20}, DType::f64); }  // 8 MiB, freed at once
  const MemoryStats after = memory_stats();
  CHECK(after.live_bytes == start.live_bytes);
  CHECK(after.peak_live_bytes - start.live_bytes == 8 << 20);
  reset_peak_memory_stats();
  CHECK(memory_stats().peak_live_bytes == after.live_bytes);
}

TEST_CASE("memory_stats sees a training step's activations in its peak and none of them after", "[memory_stats]") {
  const Tensor x = Tensor::randn({256, 512}, DType::f32, 1);
  const Tensor w = Tensor::randn({512, 512}, DType::f32, 2);
  const MemoryStats before = memory_stats();
  reset_peak_memory_stats();
  {
    GradientTape tape;
    tape.watch(w);
    const Tensor h = ops::tanh(ops::matmul(x, w));  // two [256, 512] activations the backward pass reads
    const Tensor loss = ops::sum(ops::square(h));
    const Tensor grad = tape.gradient(loss, {w})[0];
    CHECK(grad.shape() == Shape{512, 512});
  }
  const MemoryStats after = memory_stats();
  CHECK(after.peak_live_bytes - before.live_bytes >= 2 * 256 * 512 * 4 + 512 * 512 * 4);
  CHECK(after.live_bytes == before.live_bytes);
}

TEST_CASE("the backward pass frees each saved activation and each gradient once it is used", "[memory_stats]") {
  // A chain of 16 tanh: each keeps its output (1 MiB) for the backward pass. Were the sweep to keep every
  // node's saved tensors and every intermediate gradient to the end, its peak would be twice the activations.
  const std::int64_t mib = 1 << 20;
  const Tensor x = Tensor::randn({mib / 8}, DType::f64, 3);
  const std::int64_t before = memory_stats().live_bytes;
  GradientTape tape;
  tape.watch(x);
  Tensor h = x;
  for (int i = 0; i < 16; ++i) h = ops::tanh(h);
  const std::int64_t after_forward = memory_stats().live_bytes - before;
  CHECK(after_forward >= 16 * mib);
  reset_peak_memory_stats();
  const Tensor loss = ops::sum(h);
  h = Tensor();
  const Tensor grad = tape.gradient(loss, {x})[0];
  const std::int64_t backward_peak = memory_stats().peak_live_bytes - before;
  INFO("after the forward pass " << after_forward << " bytes, peak of the backward pass " << backward_peak);
  CHECK(backward_peak <= after_forward + 4 * mib);  // the gradients in flight: about 3 MiB
  CHECK(memory_stats().live_bytes - before <= 2 * mib);  // the gradient (and x's view of nothing else)
  CHECK(grad.shape() == x.shape());
  REQUIRE_THROWS_WITH(tape.gradient(loss, {x}), Catch::Contains("non-persistent tape can only compute gradients once"));
}

TEST_CASE("flash attention on strided views keeps its contiguous copies, not the viewed buffers", "[memory_stats]") {
  // Heads-first views of [B, T, heads, d] projections, as MultiHeadAttention passes them.
  const std::int64_t B = 2, T = 256, N = 4, d = 32, bytes = B * T * N * d * 4;
  GradientTape tape;
  Tensor out;
  std::int64_t before = 0;
  {
    const Tensor q = Tensor::randn({B, T, N, d}, DType::f32, 4), k = Tensor::randn({B, T, N, d}, DType::f32, 5),
                 v = Tensor::randn({B, T, N, d}, DType::f32, 6);
    for (const Tensor& t : {q, k, v}) tape.watch(t);
    before = memory_stats().live_bytes - 3 * bytes;
    const std::vector<std::int64_t> heads_first{0, 2, 1, 3};
    out = ops::scaled_dot_product_attention(ops::permute(q, heads_first), ops::permute(k, heads_first),
                                            ops::permute(v, heads_first), {.impl = ops::AttentionImpl::Flash});
  }
  // Kept: the three copies, the output and the log-sum-exp; the three [B, T, N, d] buffers are gone.
  const std::int64_t kept = memory_stats().live_bytes - before;
  INFO("kept " << kept << " bytes; one tensor is " << bytes);
  CHECK(kept < 5 * bytes);
  CHECK(kept >= 4 * bytes);
}

TEST_CASE("memory_stats reports freed large buffers as cached until they serve again", "[memory_stats]") {
  if (!detail::buffers_are_pooled()) return skip_test("malloc is tuned by the user (MALLOC_*_ or GLIBC_TUNABLES)");
  const Shape large{std::int64_t(10) << 20};  // 40 MiB of float
  const MemoryStats start = memory_stats();
  // The pool keeps up to the most it ever had in use (at least 256 MiB); earlier tests in this process may
  // have filled it.
  const detail::PoolBytes pool = detail::pool_bytes();
  if (pool.kept + (40 << 20) > std::max(pool.most_in_use, std::size_t(256) << 20))
    return skip_test("the pool's kept buffers are at their cap");
  { const Tensor t = Tensor::empty(large); }
  const MemoryStats freed = memory_stats();
  CHECK(freed.cached_bytes - start.cached_bytes == 40 << 20);
  CHECK(freed.live_bytes == start.live_bytes);
  const Tensor again = Tensor::empty(large);
  CHECK(memory_stats().cached_bytes == start.cached_bytes);
  CHECK(memory_stats().live_bytes - start.live_bytes == 40 << 20);
}

TEST_CASE("memory_stats counts tensors made and freed on several threads", "[memory_stats]") {
  const MemoryStats before = memory_stats();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t] {
      for (int i = 0; i < 200; ++i) {
        const Tensor a = Tensor::zeros({16 + t, 64}, DType::f32);
        const Tensor b = a + a;
      }
    });
  for (auto& thread : threads) thread.join();
  const MemoryStats after = memory_stats();
  CHECK(after.live_bytes == before.live_bytes);
  CHECK(after.live_buffers == before.live_buffers);
  CHECK(after.allocations - before.allocations >= 4 * 200 * 2);
  CHECK(after.peak_live_bytes >= before.live_bytes + 2 * 16 * 64 * 4);
}

TEST_CASE("memory_stats prints as one line in MiB", "[memory_stats]") {
  MemoryStats s;
  s.live_bytes = 3 << 20;
  s.live_buffers = 7;
  s.peak_live_bytes = 5 << 19;
  s.cached_bytes = 0;
  s.peak_rss_bytes = 100 << 20;
  CHECK(to_string(s) == "tensors: 3.0 MiB live in 7 buffers, peak 2.5 MiB, 0.0 MiB cached; process peak RSS 100.0 MiB");
}
