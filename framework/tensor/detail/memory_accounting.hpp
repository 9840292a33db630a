#pragma once
// Internal: what Storage (framework/tensor/tensor.cpp) tells memory_stats() (framework/tensor/memory_stats.hpp).
#include <cstddef>
#include <cstdint>

namespace loom::detail {

/// A tensor buffer of `bytes` was made / freed.
void note_buffer_allocated(std::size_t bytes) noexcept;
void note_buffer_freed(std::size_t bytes) noexcept;
/// The kept large blocks grew (positive) or shrank (negative) by `bytes`.
void note_cached_bytes(std::int64_t bytes) noexcept;

}  // namespace loom::detail
