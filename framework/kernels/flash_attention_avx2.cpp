// The AVX2 + FMA instantiation of the flash attention kernels (8 floats / 4 doubles per vector). Compiled with
// -mavx2 -mfma -ffp-contract=fast (CMakeLists.txt); used only when the CPU and the OS support AVX2 and FMA.
#include "framework/kernels/flash_attention_impl.hpp"

namespace loom::flash {
const KernelTable avx2_kernels = make_table<xsimd::fma3<xsimd::avx2>>();
}  // namespace loom::flash
