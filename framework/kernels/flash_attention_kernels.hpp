#pragma once
// The interface between the flash attention driver (flash_attention.cpp, generic code) and the kernels, which
// are compiled once per instruction set (flash_attention_{scalar,avx2,avx512}.cpp). Only plain structs and
// function pointers cross it, so no inline code of an ISA translation unit can reach the generic one.
#include <cstdint>

namespace loom::flash {

/// Query rows per tile (Br); a multiple of every vector width (16 floats at most), so the transposed score
/// tile S^T[c][r] has whole vectors along r.
inline constexpr std::int64_t kBlockQ = 64;
/// Key rows per tile (Bc). S^T (64 x 64) + Q^T (d x 64) + O (64 x d) = 48 KiB at d = 64 in float: L1.
inline constexpr std::int64_t kBlockK = 64;
/// A bfloat16 as its bits (no code of the bfloat16 class is compiled into the kernel units).
using Bf16Bits = std::uint16_t;
/// Head dimensions are zero-padded to a multiple of this (the widest vector), only when they are not already.
inline constexpr std::int64_t kPad = 16;
inline constexpr std::int64_t padded(std::int64_t n) { return (n + kPad - 1) / kPad * kPad; }
/// Query blocks that walk the keys together in the forward (Problem::group, 1 .. kMaxGroup): each key/value
/// tile then serves that many query blocks while it is in L1/L2, instead of being fetched again per block.
inline constexpr std::int64_t kMaxGroup = 4;

/// One attention problem over contiguous buffers: q [B*H, nq, d], k [B*Hkv, nk, d], v [B*Hkv, nk, dv] with
/// H = Hkv * heads_per_kv (grouped-query attention; 1 for plain attention): query head bh reads key/value head
/// bh / heads_per_kv, which is head h / heads_per_kv of its batch, as Keras's repeat of K and V along the
/// heads gives, without the copies. Masks are the user mask as bytes (1 = may attend) addressed through
/// strides, 0 where it broadcasts, over the query heads.
template <class T>
struct Problem {
  const T* q;
  const T* k;
  const T* v;
  // bfloat16 inputs for avx512_bf16_kernels, which read only these (q, k and v above are then null); null
  // for the other kernels.
  const Bf16Bits* q_bf16;
  const Bf16Bits* k_bf16;
  const Bf16Bits* v_bf16;
  std::int64_t heads, nq, nk, d, dv;
  std::int64_t heads_per_kv;  // query heads that share one key/value head (>= 1, divides heads)
  T scale;
  std::int64_t group;  // query blocks per forward item (1 .. kMaxGroup)
  bool causal;
  std::int64_t window;  // 0 = none
  const std::uint8_t* mask;  // null = none
  std::int64_t mask_b, mask_h, mask_i, mask_j;
  // Forward: writes o [B*H, nq, dv] and lse [B*H, nq] (in base 2, as the kernels' scores; +inf for a row with
  // no allowed key).
  T* o;
  T* lse;
  // Backward: reads o, lse and dout (dq, dk and dv are backward_head's arguments).
  const T* dout;
  // attention probabilities: writes p [B*H, nq, nk] from lse.
  T* p;
};

/// Scratch (in elements of T) that one worker needs for each kernel; allocated once per call and thread.
inline std::int64_t forward_scratch(std::int64_t nk, std::int64_t d, std::int64_t dv) {
  return kBlockK * kBlockQ + kBlockQ +
         kMaxGroup * (padded(d) * kBlockQ + kBlockQ * padded(dv) + 2 * kBlockQ) +
         (nk + kBlockK) * (padded(d) + padded(dv));
}
/// avx512_bf16_kernels (`bf16`) also keep the keys' bf16 rows for the score products, beside their float rows.
inline std::int64_t backward_scratch(std::int64_t nq, std::int64_t nk, std::int64_t d, std::int64_t dv, bool bf16) {
  const std::int64_t nqp = (nq + kBlockQ - 1) / kBlockQ * kBlockQ;
  return nqp * (3 * padded(d) + 2 * padded(dv) + 2) + 2 * kBlockK * kBlockQ + kBlockK * (padded(d) + padded(dv)) +
         (nk + kBlockK) * (padded(d) + padded(dv)) + (bf16 ? (nk + kBlockK) * padded(d) / 2 : 0);
}

template <class T>
struct Kernels {
  /// Output rows of query blocks [g*group, (g+1)*group) of head bh.
  void (*forward_block)(const Problem<T>& p, T* scratch, std::int64_t bh, std::int64_t g);
  /// Query head bh's share of the gradients of the keys in key blocks [kb0, kb1) (of kBlockK keys): their
  /// rows of dk [nk, d] and dv [nk, dv] (of bh's key/value head), written, or added to when `accumulate`
  /// (the later query heads of a group), and those keys' share of the head's dq [nq, d], written.
  void (*backward_head)(const Problem<T>& p, T* scratch, std::int64_t bh, std::int64_t kb0, std::int64_t kb1,
                        T* dq, T* dk, T* dv, bool accumulate);
  /// Probability rows [qb*kBlockQ, ...) of head bh.
  void (*probabilities_block)(const Problem<T>& p, T* scratch, std::int64_t bh, std::int64_t qb);
};

struct KernelTable {
  Kernels<float> f32;
  Kernels<double> f64;
};

// One per translation unit; an ISA's table may only be used when the CPU has that ISA. avx512_bf16_kernels
// (AVX512_BF16 too) are the float32 kernels on bf16 inputs (q_bf16, k_bf16, v_bf16): the score products
// S = Q K^T multiply the bf16 values with vdpbf16ps, the other products run on rows widened to float32.
extern const KernelTable scalar_kernels;
extern const KernelTable avx2_kernels;
extern const KernelTable avx512_kernels;
extern const Kernels<float> avx512_bf16_kernels;

}  // namespace loom::flash
