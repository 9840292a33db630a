#pragma once
// Scoped switches of the process-wide kernel choices, so that a test can run every path the machine has and
// leave the setting as it found it.
#include <string>

#include "framework/runtime/bf16_matmul.hpp"
#include "framework/runtime/simd.hpp"

namespace loom::testing {

/// The SIMD level (simd::set_active_isa) for one scope.
struct IsaGuard {
  std::string previous = simd::active_isa();
  explicit IsaGuard(const std::string& isa) { simd::set_active_isa(isa); }
  ~IsaGuard() { simd::set_active_isa(previous); }
  IsaGuard(const IsaGuard&) = delete;
  IsaGuard& operator=(const IsaGuard&) = delete;
};

/// The bf16 matmul engine (set_bf16_matmul_engine) for one scope.
struct Bf16EngineGuard {
  std::string previous = bf16_matmul_engine();
  explicit Bf16EngineGuard(const std::string& engine) { set_bf16_matmul_engine(engine); }
  ~Bf16EngineGuard() { set_bf16_matmul_engine(previous); }
  Bf16EngineGuard(const Bf16EngineGuard&) = delete;
  Bf16EngineGuard& operator=(const Bf16EngineGuard&) = delete;
};

}  // namespace loom::testing
