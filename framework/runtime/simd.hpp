#pragma once
// Which SIMD kernels run: "avx512", "avx2" or "scalar". The best level that both the CPU and the OS support
// (cpu_features.hpp) unless the environment variable LOOM_SIMD=scalar|avx2|avx512 forces one; forcing a level
// the machine lacks is an error (never an illegal instruction later). Kernels of each level live in their own
// translation unit compiled with that level's flags and are reached only through this choice.
#include <string>
#include <vector>

namespace loom::simd {

/// The level the kernels use now.
std::string active_isa();
/// The levels this machine can run, best first; "scalar" is always last.
std::vector<std::string> available_isas();
/// Switches the level for the whole process (tests run every path with it). Throws loom::Error for an
/// unknown name or a level the CPU or OS lacks. Not to be called while kernels run on other threads.
void set_active_isa(const std::string& isa);

}  // namespace loom::simd
