#pragma once
// The bound on what one allocation driven by a user's sizes may ask for, so that a legal but huge size is a
// loom::Error naming the op, not std::bad_alloc, a sanitizer's abort or the out-of-memory killer.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace loom {

/// This machine's physical memory plus swap, in bytes (read once): Linux's default overcommit refuses more.
std::uint64_t memory_limit();
/// False when `count` elements of `element_size` bytes overflow or exceed memory_limit() (count >= 0).
bool fits_in_memory(std::int64_t count, std::size_t element_size);
/// Throws loom::Error "<what> needs <count> x <element_size> bytes, more than this machine's memory and swap
/// (<limit> bytes)" unless fits_in_memory(count, element_size); `what` is formatted only then.
[[noreturn]] void throw_too_large_for_memory(std::int64_t count, std::size_t element_size, const std::string& what);
template <class... Args>
void check_fits_in_memory(std::int64_t count, std::size_t element_size, fmt::format_string<Args...> what,
                          Args&&... args) {
  if (!fits_in_memory(count, element_size))
    throw_too_large_for_memory(count, element_size, fmt::format(what, std::forward<Args>(args)...));
}

}  // namespace loom
