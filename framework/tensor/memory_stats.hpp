#pragma once
// loom's own count of the memory its tensors hold, as PyTorch's memory_allocated / max_memory_allocated /
// reset_peak_memory_stats report for a device: the bytes of the tensor buffers alive now, the most they have
// been since the process started or since the last reset_peak_memory_stats(), and the freed large blocks kept
// for reuse. A buffer counts once whatever views share it, at the size its tensor asked for. Memory outside
// tensor buffers (OpenBLAS's work space, the tape's records, containers) is not counted; peak_rss_bytes is the
// whole process's high-water mark, for comparison.
//
//   loom::reset_peak_memory_stats();
//   train_step();
//   fmt::print("{}\n", loom::to_string(loom::memory_stats()));
#include <cstdint>
#include <string>

namespace loom {

struct MemoryStats {
  /// Bytes in tensor buffers alive now.
  std::int64_t live_bytes = 0;
  /// The largest live_bytes since the start or the last reset_peak_memory_stats().
  std::int64_t peak_live_bytes = 0;
  /// Tensor buffers alive now.
  std::int64_t live_buffers = 0;
  /// Tensor buffers made since the process started.
  std::int64_t allocations = 0;
  /// Freed buffers of 1 MiB and more kept for the next buffer of their size class (not in live_bytes).
  std::int64_t cached_bytes = 0;
  /// The process's peak resident set size (getrusage's ru_maxrss), which no reset lowers.
  std::int64_t peak_rss_bytes = 0;
};

/// The counts now. Safe to call from any thread; the counts are exact once other threads' tensors are made
/// or freed.
MemoryStats memory_stats();
/// Restarts peak_live_bytes from live_bytes now.
void reset_peak_memory_stats();
/// One line: "tensors: 12.5 MiB live in 312 buffers, peak 80.2 MiB, 64.0 MiB cached; process peak RSS 410.3 MiB".
std::string to_string(const MemoryStats& stats);

}  // namespace loom
