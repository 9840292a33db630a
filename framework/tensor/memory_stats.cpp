#include "framework/tensor/memory_stats.hpp"

#include <sys/resource.h>

#include <atomic>

#include <fmt/format.h>

#include "framework/tensor/detail/memory_accounting.hpp"

namespace loom {

namespace {

struct Counters {
  std::atomic<std::int64_t> live_bytes{0};
  std::atomic<std::int64_t> peak_live_bytes{0};
  std::atomic<std::int64_t> live_buffers{0};
  std::atomic<std::int64_t> allocations{0};
  std::atomic<std::int64_t> cached_bytes{0};
};

/// Never destroyed: tensors held by static objects may be freed after static destruction began.
Counters& counters() {
  static auto* c = new Counters;
  return *c;
}

double mib(std::int64_t bytes) { return double(bytes) / double(1 << 20); }

}  // namespace

namespace detail {

void note_buffer_allocated(std::size_t bytes) noexcept {
  Counters& c = counters();
  const std::int64_t live = c.live_bytes.fetch_add(std::int64_t(bytes), std::memory_order_relaxed) + std::int64_t(bytes);
  c.live_buffers.fetch_add(1, std::memory_order_relaxed);
  c.allocations.fetch_add(1, std::memory_order_relaxed);
  std::int64_t peak = c.peak_live_bytes.load(std::memory_order_relaxed);
  while (live > peak && !c.peak_live_bytes.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
}

void note_buffer_freed(std::size_t bytes) noexcept {
  Counters& c = counters();
  c.live_bytes.fetch_sub(std::int64_t(bytes), std::memory_order_relaxed);
  c.live_buffers.fetch_sub(1, std::memory_order_relaxed);
}

void note_cached_bytes(std::int64_t bytes) noexcept { counters().cached_bytes.fetch_add(bytes, std::memory_order_relaxed); }

}  // namespace detail

MemoryStats memory_stats() {
  const Counters& c = counters();
  MemoryStats s;
  s.live_bytes = c.live_bytes.load(std::memory_order_relaxed);
  s.peak_live_bytes = c.peak_live_bytes.load(std::memory_order_relaxed);
  s.live_buffers = c.live_buffers.load(std::memory_order_relaxed);
  s.allocations = c.allocations.load(std::memory_order_relaxed);
  s.cached_bytes = c.cached_bytes.load(std::memory_order_relaxed);
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) == 0) s.peak_rss_bytes = std::int64_t(usage.ru_maxrss) * 1024;  // KiB on Linux
  return s;
}

void reset_peak_memory_stats() {
  Counters& c = counters();
  c.peak_live_bytes.store(c.live_bytes.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

std::string to_string(const MemoryStats& s) {
  return fmt::format("tensors: {:.1f} MiB live in {} buffers, peak {:.1f} MiB, {:.1f} MiB cached; process peak RSS "
                     "{:.1f} MiB",
                     mib(s.live_bytes), s.live_buffers, mib(s.peak_live_bytes), mib(s.cached_bytes),
                     mib(s.peak_rss_bytes));
}

}  // namespace loom
