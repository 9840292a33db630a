#include "framework/runtime/cpu_features.hpp"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace loom {

namespace {

#if defined(__x86_64__) || defined(__i386__)

struct Registers {
  std::uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

/// CPUID leaf/subleaf; all zero when the leaf is beyond the CPU's maximum.
Registers cpuid(std::uint32_t leaf, std::uint32_t subleaf = 0) {
  Registers r;
  if (__get_cpuid_count(leaf, subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx) == 0) return {};
  return r;
}

bool bit(std::uint32_t value, int n) { return ((value >> n) & 1U) != 0; }

/// XCR0: the register state the OS saves and restores. The XGETBV instruction is spelled out in asm so this
/// file needs no -mxsave.
std::uint64_t xcr0() {
  std::uint32_t eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (std::uint64_t(edx) << 32) | eax;
}

CpuFeatures detect() {
  CpuFeatures f;
  const Registers leaf0 = cpuid(0);
  char vendor[13] = {};
  std::memcpy(vendor + 0, &leaf0.ebx, 4);
  std::memcpy(vendor + 4, &leaf0.edx, 4);
  std::memcpy(vendor + 8, &leaf0.ecx, 4);
  f.vendor = vendor;

  if (cpuid(0x80000000).eax >= 0x80000004) {
    char brand[49] = {};
    for (std::uint32_t i = 0; i < 3; ++i) {
      const Registers r = cpuid(0x80000002 + i);
      std::memcpy(brand + 16 * i + 0, &r.eax, 4);
      std::memcpy(brand + 16 * i + 4, &r.ebx, 4);
      std::memcpy(brand + 16 * i + 8, &r.ecx, 4);
      std::memcpy(brand + 16 * i + 12, &r.edx, 4);
    }
    f.brand = brand;
    f.brand.erase(0, f.brand.find_first_not_of(' '));  // some CPUs pad the brand string on the left
  }

  const Registers leaf1 = cpuid(1);
  const Registers leaf7 = leaf0.eax >= 7 ? cpuid(7, 0) : Registers{};
  // Without OSXSAVE the OS does not manage extended state and XGETBV would fault.
  const std::uint64_t state = bit(leaf1.ecx, 27) ? xcr0() : 0;
  constexpr std::uint64_t kYmmState = 0x6;    // XCR0 bits 1 (SSE) and 2 (AVX upper halves)
  constexpr std::uint64_t kZmmState = 0xE6;   // plus bits 5 (opmask), 6 (ZMM0-15 upper), 7 (ZMM16-31)
  const bool ymm = (state & kYmmState) == kYmmState;
  const bool zmm = (state & kZmmState) == kZmmState;

  f.avx = ymm && bit(leaf1.ecx, 28);
  f.fma = f.avx && bit(leaf1.ecx, 12);
  f.avx2 = f.avx && bit(leaf7.ebx, 5);
  f.avx512f = zmm && bit(leaf7.ebx, 16);
  f.avx512dq = f.avx512f && bit(leaf7.ebx, 17);
  f.avx512bw = f.avx512f && bit(leaf7.ebx, 30);
  f.avx512vl = f.avx512f && bit(leaf7.ebx, 31);
  f.avx512_bf16 = f.avx512f && leaf7.eax >= 1 && bit(cpuid(7, 1).eax, 5);
  return f;
}

#else

CpuFeatures detect() { return {}; }  // not x86: only the scalar kernels apply

#endif

}  // namespace

std::string CpuFeatures::best_isa() const {
  if (has_avx512()) return "avx512";
  if (has_avx2_fma()) return "avx2";
  return "scalar";
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();  // C++ guarantees a thread-safe one-time initialisation
  return features;
}

}  // namespace loom
