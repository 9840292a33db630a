#pragma once
// What the CPU and the operating system together allow: CPUID says which instructions the core has, XGETBV
// says whether the OS saves the wider registers on a context switch. An instruction set is usable only when
// both agree, so a hypervisor or kernel that disables AVX-512 state turns it off here too.
//
// Used to pick the OpenBLAS core before the library loads (blas.cpp) and by the SIMD kernel dispatch.
#include <string>

namespace loom {

struct CpuFeatures {
  bool avx = false;       // AVX with YMM state enabled by the OS
  bool fma = false;       // FMA3 (needs the same YMM state)
  bool avx2 = false;      // AVX2 with YMM state enabled by the OS
  bool avx512f = false;   // AVX-512 Foundation with opmask and ZMM state enabled by the OS
  bool avx512bw = false;  // byte/word
  bool avx512dq = false;  // doubleword/quadword
  bool avx512vl = false;  // 128/256-bit forms of the AVX-512 instructions
  bool avx512_bf16 = false;  // bf16 conversions and dot products (vdpbf16ps), with AVX-512 state
  std::string vendor;     // "GenuineIntel", "AuthenticAMD", ...
  std::string brand;      // e.g. "Intel(R) Xeon(R) Platinum 8480+", empty when the CPU does not report one

  /// AVX2 and FMA together: the Haswell level that the avx2 kernels are compiled for.
  bool has_avx2_fma() const { return avx2 && fma; }
  /// F, BW, DQ and VL together: the Skylake-X level that the avx512 kernels are compiled for.
  bool has_avx512() const { return avx512f && avx512bw && avx512dq && avx512vl && has_avx2_fma(); }
  /// The best kernel level: "avx512", "avx2" or "scalar".
  std::string best_isa() const;
};

/// Detected once (thread-safe) and cached for the life of the process.
const CpuFeatures& cpu_features();

}  // namespace loom
