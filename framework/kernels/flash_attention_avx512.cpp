// The AVX-512 instantiation of the flash attention kernels (16 floats / 8 doubles per vector). Compiled with
// -mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma -ffp-contract=fast (CMakeLists.txt); used only when the
// CPU and the OS support AVX-512 F, BW, DQ and VL.
// GCC 12 warns (maybe-uninitialized, uninitialized) inside its own avx512fintrin.h about the deliberately
// undefined lanes of _mm512_undefined_* (used by xsimd's conversions and by the rounding and scaling
// intrinsics); the warning is about the header, not this code. Clang has no such warning.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "framework/kernels/flash_attention_impl.hpp"

namespace loom::flash {
const KernelTable avx512_kernels = make_table<xsimd::avx512bw>();
}  // namespace loom::flash
