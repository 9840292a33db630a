// The AVX-512 float32 flash attention kernels for bf16 inputs on CPUs with AVX512_BF16: the score products
// multiply the bf16 q and k pairs with vdpbf16ps (flash_attention_impl.hpp, kPairs). Compiled with the avx512
// unit's flags plus -mavx512bf16 (CMakeLists.txt); used only when the CPU has AVX512_BF16 too.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // as in flash_attention_avx512.cpp
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "framework/kernels/flash_attention_impl.hpp"

namespace loom::flash {
const Kernels<float> avx512_bf16_kernels = kernels<float, xsimd::avx512bw, /*kPairs=*/true>();
}  // namespace loom::flash
