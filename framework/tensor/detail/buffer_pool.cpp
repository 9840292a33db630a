#include "framework/tensor/detail/buffer_pool.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

#include <malloc.h>
#include <sys/mman.h>

#include "framework/tensor/detail/memory_accounting.hpp"

namespace loom::detail {

namespace {

/// Buffers from this size on are pooled and mapped one by one.
constexpr std::size_t kPooledBytes = std::size_t(1) << 20;
/// Freed pooled buffers are kept up to the most pooled bytes ever in use at once (a training step's own
/// high-water mark, which the next step will reach again), and at least this much; beyond it the oldest kept
/// buffers are unmapped. So the process holds at most twice its largest working set, and in a steady loop
/// about that set once.
constexpr std::size_t kMinKeptBytes = std::size_t(256) << 20;

/// Maps buffers of a megabyte and more one by one (so that freeing one returns its pages) and keeps up to
/// 1 GiB of freed heap for the next training step (docs/benchmarks.md, "op_overhead"), unless the user tuned
/// malloc themselves; then loom pools nothing either.
bool tune_malloc_once() {
  for (const char* variable : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "GLIBC_TUNABLES"})
    if (std::getenv(variable) != nullptr) return false;
  constexpr int kTrimThreshold = 1 << 30;
  mallopt(M_MMAP_THRESHOLD, int(kPooledBytes));
  mallopt(M_TRIM_THRESHOLD, kTrimThreshold);
  return true;
}


/// The pooled buffers: those in use are counted, freed ones are kept oldest first, each reused only for a
/// buffer of its own size class.
class PooledBuffers {
 public:
  /// The most recently kept buffer of exactly `bytes` (its pages likeliest in cache), or null; either way
  /// the caller's buffer of `bytes` counts as in use from now on.
  std::byte* take(std::size_t bytes) {
    const std::lock_guard lock(mutex_);
    in_use_ += bytes;
    most_in_use_ = std::max(most_in_use_, in_use_);
    for (auto it = kept_.rbegin(); it != kept_.rend(); ++it)
      if (it->bytes == bytes) {
        std::byte* data = it->data;
        total_ -= bytes;
        kept_.erase(std::next(it).base());
        note_cached_bytes(-std::int64_t(bytes));
        return data;
      }
    return nullptr;
  }
  PoolBytes bytes() {
    const std::lock_guard lock(mutex_);
    return {.kept = total_, .in_use = in_use_, .most_in_use = most_in_use_};
  }
  /// A buffer counted by take() could not be made after all.
  void not_made(std::size_t bytes) noexcept {
    const std::lock_guard lock(mutex_);
    in_use_ -= bytes;
  }
  /// Keeps a freed buffer, unmapping the oldest kept ones to stay within the cap; false when the caller must
  /// free it (larger than the cap, or no memory for the list's entry). Called from a destructor: never throws.
  bool keep(std::byte* data, std::size_t bytes) noexcept {
    const std::lock_guard lock(mutex_);
    in_use_ -= bytes;
    const std::size_t cap = std::max(kMinKeptBytes, most_in_use_);
    if (bytes > cap) return false;
    try {
      kept_.push_back({data, bytes});
    } catch (const std::bad_alloc&) {
      return false;
    }
    total_ += bytes;
    note_cached_bytes(std::int64_t(bytes));
    std::size_t evicted = 0, freed = 0;
    while (total_ - freed > cap) {
      std::free(kept_[evicted].data);
      freed += kept_[evicted++].bytes;
    }
    if (evicted > 0) {
      kept_.erase(kept_.begin(), kept_.begin() + std::ptrdiff_t(evicted));
      total_ -= freed;
      note_cached_bytes(-std::int64_t(freed));
    }
    return true;
  }

 private:
  struct Buffer {
    std::byte* data;
    std::size_t bytes;
  };
  std::mutex mutex_;
  std::vector<Buffer> kept_;
  std::size_t total_ = 0;        // bytes kept
  std::size_t in_use_ = 0;       // bytes of pooled buffers in use
  std::size_t most_in_use_ = 0;  // the high-water mark of in_use_
};

/// Never destroyed: tensors held by other static objects may be freed after static destruction began.
PooledBuffers& pooled_buffers() {
  static auto* pool = new PooledBuffers;
  return *pool;
}

bool is_pooled(std::size_t rounded) { return rounded >= kPooledBytes && buffers_are_pooled(); }

/// Asks for transparent huge pages on the 2 MiB-aligned interior of a fresh mapping, so that first touch
/// faults once per 2 MiB rather than once per 4 KiB (docs/benchmarks.md, "op_overhead"). A hint: ignored
/// where THP is off.
void advise_huge_pages(std::byte* data, std::size_t bytes) {
  constexpr std::uintptr_t kHugePage = 2 << 20;
  if (bytes < 2 * kHugePage) return;
  const auto begin = (reinterpret_cast<std::uintptr_t>(data) + kHugePage - 1) & ~(kHugePage - 1);
  const auto end = (reinterpret_cast<std::uintptr_t>(data) + bytes) & ~(kHugePage - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

/// The bytes to ask for a buffer of `bytes`: 64-byte aligned, and its size class when pooled.
std::size_t buffer_bytes(std::size_t bytes) {
  const std::size_t aligned = (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
  if (!is_pooled(aligned)) return aligned;
  // Eight classes per power of two: at most 12.5% more than asked, and nearby sizes share a class.
  const std::size_t step = std::bit_floor(aligned) / 8;
  return (aligned + step - 1) / step * step;
}

}  // namespace

bool buffers_are_pooled() {
  static const bool tuned = tune_malloc_once();
  return tuned;
}

std::byte* allocate_buffer(std::size_t bytes) {
  const std::size_t rounded = buffer_bytes(bytes);
  const bool pooled = is_pooled(rounded);
  if (pooled)
    if (std::byte* kept = pooled_buffers().take(rounded)) return kept;
  auto* data = static_cast<std::byte*>(std::aligned_alloc(kBufferAlignment, rounded));
  if (data != nullptr) advise_huge_pages(data, rounded);
  else if (pooled) pooled_buffers().not_made(rounded);
  return data;
}

void free_buffer(std::byte* data, std::size_t bytes) noexcept {
  const std::size_t rounded = buffer_bytes(bytes);
  if (!(is_pooled(rounded) && pooled_buffers().keep(data, rounded))) std::free(data);
}

PoolBytes pool_bytes() { return pooled_buffers().bytes(); }

}  // namespace loom::detail
