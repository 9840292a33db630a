#pragma once
// How ops::matmul multiplies bfloat16 operands (mixed precision, docs/mixed_precision.md). Two engines, the
// same contract (bf16 inputs, float32 accumulation and result):
//   "onednn"   oneDNN's matmul, on the CPU's bf16 dot-product instructions (AVX512_BF16, AMX) where it has
//              them, emulated on plain AVX-512 (not offered on CPUs without AVX-512);
//   "float32"  the operands widened to float32 (exactly) and OpenBLAS's sgemm.
// The default is "onednn" where the CPU has AVX512_BF16 or AMX, else "float32"; LOOM_BF16_MATMUL=onednn|float32
// forces one. Either way each product is cut into one block per gemm thread on loom's pool, as float32 ones are.
// The flash attention kernels follow the choice for bf16 inputs: vdpbf16ps under "onednn" where the CPU has
// AVX512_BF16, the inputs widened to float32 otherwise (ops/attention.hpp).
#include <string>
#include <vector>

namespace loom {

/// The engine bf16 products use now.
std::string bf16_matmul_engine();
/// The engines this machine can run, the default first ("onednn" needs AVX-512).
std::vector<std::string> available_bf16_matmul_engines();
/// Switches the engine for the whole process (tests run both paths with it). Throws loom::Error for an unknown
/// name. Not to be called while products run on other threads.
void set_bf16_matmul_engine(const std::string& engine);

}  // namespace loom
