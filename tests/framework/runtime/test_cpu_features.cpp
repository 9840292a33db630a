#include <catch2/catch.hpp>

#include "framework/runtime/cpu_features.hpp"

using namespace loom;

#if defined(__x86_64__) || defined(__i386__)
// GCC's own detection also asks XGETBV whether the OS saves YMM/ZMM state, so the two must agree exactly.
TEST_CASE("cpu_features agrees with __builtin_cpu_supports", "[cpu]") {
  __builtin_cpu_init();
  const CpuFeatures& f = cpu_features();
  CHECK(f.avx == (__builtin_cpu_supports("avx") != 0));
  CHECK(f.fma == (__builtin_cpu_supports("fma") != 0));
  CHECK(f.avx2 == (__builtin_cpu_supports("avx2") != 0));
  CHECK(f.avx512f == (__builtin_cpu_supports("avx512f") != 0));
  CHECK(f.avx512bw == (__builtin_cpu_supports("avx512bw") != 0));
  CHECK(f.avx512dq == (__builtin_cpu_supports("avx512dq") != 0));
  CHECK(f.avx512vl == (__builtin_cpu_supports("avx512vl") != 0));
  CHECK(f.avx512_bf16 == (__builtin_cpu_supports("avx512bf16") != 0));
  CHECK(!f.vendor.empty());
}
#endif

TEST_CASE("cpu_features levels are consistent and cached", "[cpu]") {
  const CpuFeatures& f = cpu_features();
  CHECK(&f == &cpu_features());
  // Each level implies the one below it.
  if (f.avx2 || f.fma) CHECK(f.avx);
  if (f.avx512f) CHECK(f.avx);
  if (f.has_avx512()) CHECK(f.has_avx2_fma());
  const std::string isa = f.best_isa();
  CHECK((isa == "avx512" || isa == "avx2" || isa == "scalar"));
  CHECK((isa == "avx512") == f.has_avx512());
  CHECK((isa == "avx2") == (f.has_avx2_fma() && !f.has_avx512()));
}

TEST_CASE("CpuFeatures::best_isa picks the highest complete level", "[cpu]") {
  CpuFeatures f;
  CHECK(f.best_isa() == "scalar");
  f.avx = f.avx2 = true;
  CHECK(f.best_isa() == "scalar");  // AVX2 without FMA is not the Haswell level
  f.fma = true;
  CHECK(f.best_isa() == "avx2");
  f.avx512f = true;
  CHECK(f.best_isa() == "avx2");  // Foundation alone (Knights Landing) is not the Skylake-X level
  f.avx512bw = f.avx512dq = f.avx512vl = true;
  CHECK(f.best_isa() == "avx512");
}
