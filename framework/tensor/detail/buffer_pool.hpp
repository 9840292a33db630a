#pragma once
// Where Storage's buffers come from. Buffers of a megabyte and more are rounded up to a size class and each
// has its own mapping (glibc maps them); a freed one is kept for the next buffer of its class, up to the most
// pooled bytes ever in use at once, so that a training step reuses the last step's pages instead of faulting
// fresh ones in, and what is not kept goes back to the kernel at once. Smaller buffers come from glibc's heap,
// which keeps freed memory for the next step. docs/memory.md, "Where the bytes go", measures both.
#include <cstddef>

namespace loom::detail {

/// Every tensor buffer, pooled, from the heap or inline in its Storage, starts on this boundary.
inline constexpr std::size_t kBufferAlignment = 64;

/// False when the user tuned malloc (MALLOC_*_ or GLIBC_TUNABLES set): then nothing is pooled and glibc
/// serves every buffer as it was told to.
bool buffers_are_pooled();

/// A buffer of at least `bytes` (rounded up to its size class when pooled), or null when memory is exhausted.
std::byte* allocate_buffer(std::size_t bytes);

/// Gives back a buffer from allocate_buffer(bytes). Never throws.
void free_buffer(std::byte* data, std::size_t bytes) noexcept;

/// The pooled buffers' bytes: kept for reuse, in use, and the most ever in use at once (the cap on kept,
/// with a floor of 256 MiB).
struct PoolBytes {
  std::size_t kept = 0;
  std::size_t in_use = 0;
  std::size_t most_in_use = 0;
};
PoolBytes pool_bytes();

}  // namespace loom::detail
