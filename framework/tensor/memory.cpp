#include "framework/tensor/memory.hpp"

#include <sys/sysinfo.h>

#include <limits>

#include "framework/tensor/error.hpp"

namespace loom {

std::uint64_t memory_limit() {
  static const std::uint64_t limit = [] {
    struct sysinfo info {};
    if (::sysinfo(&info) != 0) return std::numeric_limits<std::uint64_t>::max();
    return (std::uint64_t(info.totalram) + std::uint64_t(info.totalswap)) * std::uint64_t(info.mem_unit);
  }();
  return limit;
}

bool fits_in_memory(std::int64_t count, std::size_t element_size) {
  std::uint64_t bytes = 0;
  return count >= 0 && !__builtin_mul_overflow(std::uint64_t(count), std::uint64_t(element_size), &bytes) &&
         bytes <= memory_limit();
}

void throw_too_large_for_memory(std::int64_t count, std::size_t element_size, const std::string& what) {
  throw Error(fmt::format("{} needs {} x {} bytes, more than this machine's memory and swap ({} bytes)", what,
                          count, element_size, memory_limit()));
}

}  // namespace loom
