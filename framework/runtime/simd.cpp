#include "framework/runtime/simd.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "framework/runtime/cpu_features.hpp"
#include "framework/tensor/error.hpp"

namespace loom::simd {

namespace {

enum Level : int { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };
constexpr const char* kNames[] = {"scalar", "avx2", "avx512"};

bool supported(int level) {
  const CpuFeatures& f = cpu_features();
  return level == kScalar || (level == kAvx2 && f.has_avx2_fma()) || (level == kAvx512 && f.has_avx512());
}

int parse(const std::string& name, const char* where) {
  for (int level = kScalar; level <= kAvx512; ++level)
    if (name == kNames[level]) {
      check(supported(level), "{}: this CPU (or its operating system) does not support {}; it supports {}", where,
            name, fmt::join(available_isas(), ", "));
      return level;
    }
  throw Error(fmt::format("{}: unknown SIMD level '{}'; expected scalar, avx2 or avx512", where, name));
}

int initial_level() {
  const char* forced = std::getenv("LOOM_SIMD");
  if (forced != nullptr && *forced != '\0') return parse(forced, "LOOM_SIMD");
  const std::string best = cpu_features().best_isa();
  return best == "avx512" ? kAvx512 : best == "avx2" ? kAvx2 : kScalar;
}

std::atomic<int>& level() {
  static std::atomic<int> current{initial_level()};
  return current;
}

}  // namespace

std::string active_isa() { return kNames[level().load()]; }

std::vector<std::string> available_isas() {
  std::vector<std::string> out;
  for (int l = kAvx512; l >= kScalar; --l)
    if (supported(l)) out.emplace_back(kNames[l]);
  return out;
}

void set_active_isa(const std::string& isa) { level().store(parse(isa, "simd::set_active_isa")); }

}  // namespace loom::simd
