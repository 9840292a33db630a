#pragma once
// The flash attention kernels, written once over the scalar type T and a vector type: xsimd::batch<T, Arch>
// or, for the scalar reference, T itself (Arch = Scalar, width 1). Include this header ONLY from the
// per-ISA translation units (flash_attention_{scalar,avx2,avx512}.cpp), each compiled with its ISA's flags:
// everything here has internal linkage (anonymous namespace), so no instantiation compiled for one ISA can
// be merged by the linker into code that runs on another. The units export only a KernelTable of pointers.
//
// Algorithm (FlashAttention-2, Dao 2023), per head, with the score tile kept TRANSPOSED, S^T[c][r] (key c,
// query r, kBlockQ queries along the vector lanes): both products are then "broadcast one element x a
// contiguous row", and the softmax's row max / row sum over keys are vertical (lane-wise) operations, with no
// horizontal shuffles. Two register-blocked micro-kernels serve the forward and the backward:
//   gemm_bt : C[c][r]  = sum_k A[c][k] * Bt[k][r]      (S^T = K Q^T, dP^T = V dO^T; Bt packed per q block)
//   gemm_acc: C[x][y] += sum_z A(x, z) * B[z][y]        (O += P V, dV += P^T dO, dK += dS^T Q, dQ += dS K;
//                                                        A read through strides, B and C rows contiguous)
// bfloat16 inputs reach these kernels widened to float32 (exactly), except in the unit compiled with
// AVX512_BF16 (kPairs), which reads the bf16 q, k, v themselves: its score products S^T = K Q^T multiply bf16
// pairs with vdpbf16ps (K's rows as they are, Q packed as pairs along d), exact products summed in float32;
// every other product runs on rows widened to float32, so nothing the kernels compute is rounded to bf16.
#include <algorithm>
#include <array>
#include <cmath>
#include <bit>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <numbers>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "framework/kernels/flash_attention_kernels.hpp"

namespace loom::flash {
namespace {

/// Arch tag of the scalar reference path.
struct Scalar {};

/// Two bfloat16 of consecutive depth indices in one 32-bit lane (the first in the low half), as the bf16
/// dot-product instructions read them.
using Pair = std::uint32_t;

template <class T, class Arch>
struct Vec {
  using V = xsimd::batch<T, Arch>;
  static constexpr std::int64_t width = std::int64_t(V::size);
  // Register blocking: 32 zmm registers hold 4 x 4 accumulators plus operands; 16 ymm hold 4 x 2.
  static constexpr int rows = 4;
  static constexpr int vectors = sizeof(V) >= 64 ? 4 : 2;
  static V load(const T* p) { return V::load_unaligned(p); }
  static void store(T* p, const V& v) { v.store_unaligned(p); }
  static V set(T x) { return V(x); }
  static T sum(const V& v) { return xsimd::hadd(v); }
  /// p[0], p[stride], ..., p[(width - 1) * stride]: one column of `width` rows. The gather instructions are
  /// named here because xsimd 8.1's batch::gather misses its AVX2/AVX-512 overloads and inserts lane by lane.
  static V gather(const T* p, std::int64_t stride) {
    using Int = xsimd::as_integer_t<T>;
    using Index = xsimd::batch<Int, Arch>;
    static constexpr auto lanes = [] {
      std::array<Int, width> a{};
      for (std::size_t i = 0; i < a.size(); ++i) a[i] = Int(i);
      return a;
    }();
    const Index index = Index::load_unaligned(lanes.data()) * Index(Int(stride));
    if constexpr (std::is_base_of_v<xsimd::avx512f, Arch>) {
      if constexpr (std::is_same_v<T, float>) return _mm512_i32gather_ps(index, p, sizeof(T));
      else return _mm512_i64gather_pd(index, p, sizeof(T));
    } else if constexpr (std::is_base_of_v<xsimd::avx2, Arch>) {
      if constexpr (std::is_same_v<T, float>) return _mm256_i32gather_ps(p, index, sizeof(T));
      else return _mm256_i64gather_pd(p, index, sizeof(T));
    } else {
      return V::gather(p, index);
    }
  }
  /// 2^x for the scores, which are kept in base 2 (Q is packed times log2(e)): x = n + f with n an integer and
  /// |f| <= 1/2, 2^f by its Taylor series, times 2^n. About half the instructions of xsimd::exp, which pays for a
  /// Cody-Waite reduction by ln 2 and for its over- and underflow selects. Below the smallest normal power of
  /// two the result is exactly 0 (a masked score is -inf, and denormals would slow every later product);
  /// NaN passes through (it compares false).
  static V exp2(const V& x) {
    constexpr T lowest = T(std::numeric_limits<T>::min_exponent - 1);  // 2^lowest: the smallest normal
    if constexpr (std::is_base_of_v<xsimd::avx512f, Arch>) {
      // vscalefps/pd gives p * 2^n with IEEE underflow, so an n far below `lowest` yields exactly 0.
      const V r = xsimd::select(x < V(lowest), V(T(16) * lowest), x);
      const V n = xsimd::nearbyint(r);
      if constexpr (std::is_same_v<T, float>) return _mm512_scalef_ps(series(r - n), n);
      else return _mm512_scalef_pd(series(r - n), n);
    } else {
      const V n = xsimd::nearbyint(xsimd::select(x < V(lowest), V(lowest), x));
      return xsimd::select(x < V(lowest), V(T(0)), xsimd::ldexp(series(x - n), xsimd::to_int(n)));
    }
  }
  /// 2^f = sum_k (f ln 2)^k / k! for |f| <= 1/2, to degree 7 (float: remainder 7e-9) or 12 (double: 2e-16).
  static V series(const V& f) {
    constexpr int degree = std::is_same_v<T, float> ? 7 : 12;
    V p = V(coefficient(degree));
    for (int k = degree - 1; k >= 0; --k) p = p * f + V(coefficient(k));
    return p;
  }
  static constexpr T coefficient(int k) {
    long double c = 1;
    for (int i = 1; i <= k; ++i) c *= std::numbers::ln2_v<long double> / i;
    return T(c);
  }
  static V max(const V& a, const V& b) { return xsimd::max(a, b); }
  /// -inf -> 0: the shift of a row that has seen no allowed key yet, so 2^(-inf - shift) = 0, never NaN.
  static V finite_or_zero(const V& x) {
    return xsimd::select(x == V(-std::numeric_limits<T>::infinity()), V(T(0)), x);
  }

#if defined(__AVX512BF16__)
  // bf16 dot products (T = float): W lanes of Pairs, and acc + a.low * b.low + a.high * b.high per lane.
  static_assert(std::is_base_of_v<xsimd::avx512f, Arch>, "AVX512_BF16 units are AVX-512 units");
  static constexpr bool bf16_dot_products = true;
  using Pairs = __m512i;
  static Pairs load_pairs(const Pair* p) { return _mm512_loadu_si512(p); }
  static Pairs broadcast_pair(Pair x) { return _mm512_set1_epi32(int(x)); }
  static V dot_pairs(const V& acc, const Pairs& a, const Pairs& b) {
    return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)b);
  }
#else
  static constexpr bool bf16_dot_products = false;
#endif
};

template <class T>
struct Vec<T, Scalar> {
  using V = T;
  static constexpr std::int64_t width = 1;
  static constexpr int rows = 4;
  static constexpr int vectors = 4;
  static V load(const T* p) { return *p; }
  static void store(T* p, V v) { *p = v; }
  static V set(T x) { return x; }
  static T sum(V v) { return v; }
  static V gather(const T* p, std::int64_t) { return *p; }
  static V exp2(V x) { return std::exp2(x); }
  static V max(V a, V b) { return a < b ? b : a; }
  static V finite_or_zero(V x) { return x == -std::numeric_limits<T>::infinity() ? T(0) : x; }
  static constexpr bool bf16_dot_products = false;
};

/// kPairs: the inputs are the problem's q_bf16, k_bf16 and v_bf16 (float32, AVX512_BF16 units only).
template <class T, class Arch, bool kPairs = false>
struct Kernel {
  using S = Vec<T, Arch>;
  using V = typename S::V;
  static_assert(!kPairs || (std::is_same_v<T, float> && S::bf16_dot_products), "bf16 pairs need vdpbf16ps");
  /// The score products' operands: bf16 rows (K) and packed Pairs (Q) with kPairs, else both T.
  using ScoreRow = std::conditional_t<kPairs, Bf16Bits, T>;
  using Packed = std::conditional_t<kPairs, Pair, T>;
  /// Packed items per Br x depth block of packed queries.
  static constexpr std::int64_t packed_size(std::int64_t depth) { return (kPairs ? depth / 2 : depth) * kBlockQ; }
  static constexpr std::int64_t W = S::width;
  static constexpr std::int64_t Br = kBlockQ, Bc = kBlockK;
  static constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  /// Scores, maxima and logsumexps are kept in base 2: Q is packed times scale * log2(e), so every
  /// exponential is a plain 2^x.
  static constexpr T kLog2e = std::numbers::log2e_v<T>;
  static_assert(Br % (W * S::vectors) == 0, "kBlockQ must hold whole register blocks");

  // ---- micro-kernels ----

  /// The accumulators times factor, stored as rows of C (Br apart).
  template <int MR, int RN>
  static void store_tile(V (&acc)[MR][RN], T factor, T* c) {
    if (factor != T(1))
      for (int i = 0; i < MR; ++i)
        for (int j = 0; j < RN; ++j) acc[i][j] = acc[i][j] * S::set(factor);
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < RN; ++j) S::store(c + i * Br + j * W, acc[i][j]);
  }

  template <int MR, int RN>
  static void tile_bt(const T* a, std::int64_t lda, const T* bt, std::int64_t depth, T factor, T* c) {
    V acc[MR][RN];
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < RN; ++j) acc[i][j] = S::set(T(0));
    // The product over no depth is the zeros. Exiting early also keeps the accumulators in registers: with a
    // path that skips the loop, GCC merged both paths' accumulators through the stack (48 vector moves a call
    // of the AVX-512 float kernel).
    if (depth <= 0) {
      store_tile(acc, factor, c);
      return;
    }
    for (std::int64_t k = 0; k < depth; ++k) {
      V b[RN];
      for (int j = 0; j < RN; ++j) b[j] = S::load(bt + k * Br + j * W);
      for (int i = 0; i < MR; ++i) {
        const V ai = S::set(a[i * lda + k]);
        for (int j = 0; j < RN; ++j) acc[i][j] = ai * b[j] + acc[i][j];  // contracted to FMA in the ISA units
      }
    }
    store_tile(acc, factor, c);
  }

  /// tile_bt over bf16: a's rows are bf16, bt holds Pairs [depth / 2][Br] (depth even, > 0).
  template <int MR, int RN>
  static void tile_bt(const Bf16Bits* a, std::int64_t lda, const Pair* bt, std::int64_t depth, T factor, T* c) {
    V acc[MR][RN];
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < RN; ++j) acc[i][j] = S::set(T(0));
    for (std::int64_t k = 0; k < depth / 2; ++k) {
      typename S::Pairs b[RN];
      for (int j = 0; j < RN; ++j) b[j] = S::load_pairs(bt + k * Br + j * W);
      for (int i = 0; i < MR; ++i) {
        Pair x;
        std::memcpy(&x, a + i * lda + 2 * k, sizeof x);
        const typename S::Pairs ai = S::broadcast_pair(x);
        for (int j = 0; j < RN; ++j) acc[i][j] = S::dot_pairs(acc[i][j], ai, b[j]);
      }
    }
    store_tile(acc, factor, c);
  }

  /// Keys [lo[v], hi[v]) of a tile that the queries of lane vector v (lanes [v*W, v*W + W)) may reach. Both
  /// bounds are nondecreasing in v (causal and window are bands), so the vectors needing a key are contiguous.
  struct Band {
    std::int64_t lo[Br / W], hi[Br / W];
    /// The vectors [v0, v1) that need any of the rows [row, row + m).
    void vectors(std::int64_t row, std::int64_t m, int& v0, int& v1) const {
      v0 = 0;
      v1 = int(Br / W);
      while (v0 < v1 && hi[v0] <= row) ++v0;
      while (v1 > v0 && lo[v1 - 1] >= row + m) --v1;
    }
    /// Every vector needs all nc keys: a tile with no structure to skip.
    static Band all(std::int64_t nc) {
      Band band;
      std::fill(std::begin(band.lo), std::end(band.lo), 0);
      std::fill(std::begin(band.hi), std::end(band.hi), nc);
      return band;
    }
  };

  /// c[row][r] = factor * sum_k a[row][k] * bt[k][r] for rows < nrows, over the vectors of columns r that the
  /// band says need the row: the band's edge tiles skip their out-of-band half. A and Bt are T, or bf16 rows
  /// and Pairs.
  template <class A, class B>
  static void gemm_bt(const A* a, std::int64_t lda, std::int64_t nrows, const B* bt, std::int64_t depth, T factor,
                      T* c, const Band& band) {
    constexpr int MR = S::rows, RN = S::vectors;
    auto block = [&]<int M>(std::int64_t row) {
      int v0, v1;
      band.vectors(row, M, v0, v1);
      int v = v0;
      for (; v + RN <= v1; v += RN) tile_bt<M, RN>(a + row * lda, lda, bt + v * W, depth, factor, c + row * Br + v * W);
      // Two vectors still keep 2 * MR independent FMA chains in flight; one is latency-bound.
      if constexpr (RN > 2)
        for (; v + 2 <= v1; v += 2) tile_bt<M, 2>(a + row * lda, lda, bt + v * W, depth, factor, c + row * Br + v * W);
      for (; v < v1; ++v) tile_bt<M, 1>(a + row * lda, lda, bt + v * W, depth, factor, c + row * Br + v * W);
    };
    std::int64_t row = 0;
    for (; row + MR <= nrows; row += MR) block.template operator()<MR>(row);
    for (; row < nrows; ++row) block.template operator()<1>(row);
  }

  template <int MR, int RN>
  static void tile_acc(const T* a, std::int64_t ax, std::int64_t az, std::int64_t nz, const T* b, std::int64_t ldb,
                       T* c, std::int64_t ldc) {
    V acc[MR][RN];
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < RN; ++j) acc[i][j] = S::load(c + i * ldc + j * W);
    for (std::int64_t z = 0; z < nz; ++z) {
      V bz[RN];
      for (int j = 0; j < RN; ++j) bz[j] = S::load(b + z * ldb + j * W);
      for (int i = 0; i < MR; ++i) {
        const V ai = S::set(a[i * ax + z * az]);
        for (int j = 0; j < RN; ++j) acc[i][j] = ai * bz[j] + acc[i][j];
      }
    }
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < RN; ++j) S::store(c + i * ldc + j * W, acc[i][j]);
  }

  /// c[x][y] += sum_z a[x*ax + z*az] * b[z][y] for x < nx, z < nz, y < ny (ny a multiple of kPad). With a
  /// band, z runs along its lanes (the queries) and x over its rows (the keys): rows x.. sum only the vectors
  /// that need them, the same blocks of rows and vectors that gemm_bt computes with that band.
  static void gemm_acc(std::int64_t nx, std::int64_t nz, const T* a, std::int64_t ax, std::int64_t az, const T* b,
                       std::int64_t ldb, std::int64_t ny, T* c, std::int64_t ldc, const Band* band = nullptr) {
    constexpr int MR = S::rows, RN = S::vectors;
    // The lanes z0.. z1 that rows x.. x + m sum over: all, or the band's vectors that need those rows.
    auto lanes = [&](std::int64_t x, std::int64_t m, std::int64_t& z0, std::int64_t& z1) {
      z0 = 0;
      z1 = nz;
      if (band == nullptr) return true;
      int v0, v1;
      band->vectors(x, m, v0, v1);
      z0 = v0 * W;
      z1 = std::min(v1 * W, nz);
      return z0 < z1;
    };
    auto columns = [&]<int N>(std::int64_t y) {
      std::int64_t x = 0, z0, z1;
      for (; x + MR <= nx; x += MR)
        if (lanes(x, MR, z0, z1))
          tile_acc<MR, N>(a + x * ax + z0 * az, ax, az, z1 - z0, b + z0 * ldb + y, ldb, c + x * ldc + y, ldc);
      for (; x < nx; ++x)
        if (lanes(x, 1, z0, z1))
          tile_acc<1, N>(a + x * ax + z0 * az, ax, az, z1 - z0, b + z0 * ldb + y, ldb, c + x * ldc + y, ldc);
    };
    std::int64_t y = 0;
    for (; y + RN * W <= ny; y += RN * W) columns.template operator()<RN>(y);
    for (; y < ny; y += W) columns.template operator()<1>(y);
  }

  /// c[x][y] += sum_z a[z][x] * b[z][y] for the nx lanes x of a band, z over each vector's keys: one product
  /// per run of vectors with the same keys (O += P V, dQ += dS K).
  static void gemm_acc_lanes(const Band& band, std::int64_t nx, const T* a, const T* b, std::int64_t ldb,
                             std::int64_t ny, T* c, std::int64_t ldc) {
    for (std::int64_t v = 0; v * W < nx;) {
      std::int64_t e = v + 1;
      while (e * W < nx && band.lo[e] == band.lo[v] && band.hi[e] == band.hi[v]) ++e;
      const std::int64_t x0 = v * W, x1 = std::min(e * W, nx), lo = band.lo[v], hi = band.hi[v];
      if (lo < hi) gemm_acc(x1 - x0, hi - lo, a + lo * Br + x0, 1, Br, b + lo * ldb, ldb, ny, c + x0 * ldc, ldc);
      v = e;
    }
  }

  // ---- helpers ----

  /// Rows [n0, n1) of a [*, dim] buffer (of T or bf16) with rows padded to dimp: the rows themselves when no
  /// padding is needed, else a zero-padded copy in buf.
  template <class X>
  static const X* rows(const X* src, std::int64_t n0, std::int64_t n1, std::int64_t dim, std::int64_t dimp, X* buf) {
    if (dim == dimp) return src + n0 * dim;
    for (std::int64_t n = n0; n < n1; ++n)
      for (std::int64_t c = 0; c < dimp; ++c) buf[(n - n0) * dimp + c] = c < dim ? src[n * dim + c] : X(0);
    return buf;
  }

  /// Bt[k][r] = factor * src[i0 + r][k], zero beyond nr rows and dim columns.
  static void pack_transposed(const T* src, std::int64_t i0, std::int64_t nr, std::int64_t dim, std::int64_t dimp,
                              T factor, T* bt) {
    // W rows at a time, a column per gather and a vector store: the W rows stay in L1 while their columns are
    // read (scalar stores of single elements cost a tenth of a sliding-window forward).
    for (std::int64_t r0 = 0; r0 < Br; r0 += W) {
      if (r0 + W <= nr) {
        for (std::int64_t k = 0; k < dim; ++k)
          S::store(bt + k * Br + r0, S::set(factor) * S::gather(src + (i0 + r0) * dim + k, dim));
      } else {
        for (std::int64_t k = 0; k < dim; ++k)
          for (std::int64_t r = r0; r < r0 + W; ++r) bt[k * Br + r] = r < nr ? factor * src[(i0 + r) * dim + k] : T(0);
      }
      for (std::int64_t k = dim; k < dimp; ++k) S::store(bt + k * Br + r0, S::set(T(0)));
    }
  }

  /// Rows [n0, n1) of input x (q, k or v at element offset `at`) as float rows padded to dimp: rows() of T
  /// inputs, or the bf16 ones widened (exactly) into buf.
  static const T* input_rows(const T* x, const Bf16Bits* x_bf16, std::int64_t at, std::int64_t n0, std::int64_t n1,
                             std::int64_t dim, std::int64_t dimp, T* buf) {
    if constexpr (!kPairs) {
      return rows(x + at, n0, n1, dim, dimp, buf);
    } else {
      for (std::int64_t n = n0; n < n1; ++n) {
        const Bf16Bits* row = x_bf16 + at + n * dim;
        T* out = buf + (n - n0) * dimp;
        for (std::int64_t c = 0; c < dim; ++c) out[c] = std::bit_cast<float>(std::uint32_t(row[c]) << 16);
        for (std::int64_t c = dim; c < dimp; ++c) out[c] = T(0);
      }
      return buf;
    }
  }

  /// Pairs bt[k/2][r] = (src[i0 + r][k], src[i0 + r][k + 1]) for even k, zero beyond nr rows and dim columns.
  static void pack_pairs(const Bf16Bits* src, std::int64_t i0, std::int64_t nr, std::int64_t dim, std::int64_t dimp,
                         Pair* bt) {
    auto at = [&](std::int64_t r, std::int64_t k) { return r < nr && k < dim ? Pair(src[(i0 + r) * dim + k]) : Pair(0); };
    for (std::int64_t k = 0; k < dimp; k += 2)
      for (std::int64_t r = 0; r < Br; ++r) bt[k / 2 * Br + r] = at(r, k) | at(r, k + 1) << 16;
  }

  /// Queries [i0, i0 + nr) of head bh packed as the score products' Bt: times scale * log2(e) in T, or as
  /// bf16 Pairs as they are (not rounded again), the products then applying score_factor.
  static void pack_queries(const Problem<T>& p, std::int64_t bh, std::int64_t i0, std::int64_t nr, Packed* qt) {
    if constexpr (kPairs) pack_pairs(p.q_bf16 + bh * p.nq * p.d, i0, nr, p.d, padded(p.d), qt);
    else pack_transposed(p.q + bh * p.nq * p.d, i0, nr, p.d, padded(p.d), p.scale * kLog2e, qt);
  }
  static T score_factor(const Problem<T>& p) { return kPairs ? p.scale * kLog2e : T(1); }
  /// Keys [j0, j1) of key/value head kv as the score products' rows.
  static const ScoreRow* score_keys(const Problem<T>& p, std::int64_t kv, std::int64_t j0, std::int64_t j1,
                                    ScoreRow* buf) {
    if constexpr (kPairs) return rows(p.k_bf16 + kv * p.nk * p.d, j0, j1, p.d, padded(p.d), buf);
    else return rows(p.k + kv * p.nk * p.d, j0, j1, p.d, padded(p.d), buf);
  }

  /// sum_c a[c] * b[c] over n elements.
  static T row_dot(const T* a, const T* b, std::int64_t n) {
    V acc = S::set(T(0));
    std::int64_t c = 0;
    for (; c + W <= n; c += W) acc = S::load(a + c) * S::load(b + c) + acc;
    T total = S::sum(acc);
    for (; c < n; ++c) total += a[c] * b[c];
    return total;
  }

  /// Keys [jlo, jhi) that queries [i0, i0 + nr) may reach under the causal and window structure.
  static void key_range(const Problem<T>& p, std::int64_t i0, std::int64_t nr, std::int64_t& jlo, std::int64_t& jhi) {
    jlo = 0;
    jhi = p.nk;
    if (p.causal) jhi = std::min(jhi, i0 + nr);
    if (p.window > 0) {
      jlo = std::max<std::int64_t>(0, i0 - p.window + 1);
      jhi = std::min(jhi, i0 + nr - 1 + p.window);
    }
  }

  static bool tile_is_partial(const Problem<T>& p, std::int64_t i0, std::int64_t nr, std::int64_t j0, std::int64_t nc) {
    return p.mask != nullptr || (p.causal && j0 + nc - 1 > i0) ||
           (p.window > 0 && (j0 + nc - 1 - i0 >= p.window || i0 + nr - 1 - j0 >= p.window));
  }

  /// Sets the disallowed entries of the tile S^T (keys j0.., queries i0..) to -inf, only inside the band (the
  /// rest is neither computed nor read).
  static void apply_mask(const Problem<T>& p, std::int64_t bh, std::int64_t i0, std::int64_t nr, std::int64_t j0,
                         std::int64_t nc, T* s, const Band& band) {
    // Causal and window allow one interval of keys per query: only the entries outside it are touched.
    for (std::int64_t r = 0; r < nr; ++r) {
      const std::int64_t i = i0 + r, c0 = band.lo[r / W], c1 = band.hi[r / W];
      std::int64_t lo = 0, hi = nc;  // allowed: c in [lo, hi)
      if (p.causal) hi = std::min(hi, i - j0 + 1);
      if (p.window > 0) {
        lo = std::max(lo, i - p.window + 1 - j0);
        hi = std::min(hi, i + p.window - j0);
      }
      lo = std::clamp(lo, c0, std::max(c0, c1));
      hi = std::clamp(hi, lo, std::max(lo, c1));
      for (std::int64_t c = c0; c < lo; ++c) s[c * Br + r] = kNegInf;
      for (std::int64_t c = hi; c < c1; ++c) s[c * Br + r] = kNegInf;
    }
    if (p.mask == nullptr) return;
    const std::uint8_t* mask = p.mask + (bh / p.heads) * p.mask_b + (bh % p.heads) * p.mask_h;
    for (std::int64_t r = 0; r < nr; ++r)
      for (std::int64_t c = band.lo[r / W]; c < band.hi[r / W]; ++c)
        if (mask[(i0 + r) * p.mask_i + (j0 + c) * p.mask_j] == 0) s[c * Br + r] = kNegInf;
  }

  /// S^T <- 2^(S^T - lse[r]) inside the band: the exact probabilities from the saved logsumexp (+inf rows
  /// give 0).
  static void exp_minus(T* s, const T* lse, const Band& band) {
    for (std::int64_t v = 0, r = 0; r < Br; ++v, r += W) {
      const V l = S::load(lse + r);
      for (std::int64_t c = band.lo[v]; c < band.hi[v]; ++c) S::store(s + c * Br + r, S::exp2(S::load(s + c * Br + r) - l));
    }
  }

  /// For each vector of W query lanes of the tile (queries i0.., keys j0..), the keys [lo, hi) that causal and
  /// window let any of its lanes reach (a user mask is applied per entry). `align` widens each non-empty
  /// interval to whole blocks of that many rows, so that what gemm_bt computes is exactly the band.
  static Band band_of(const Problem<T>& p, std::int64_t i0, std::int64_t nr, std::int64_t j0, std::int64_t nc,
                      std::int64_t align) {
    Band band;
    for (std::int64_t v = 0; v < Br / W; ++v) {
      std::int64_t lo = nc, hi = nc;  // padded lanes need no key
      if (v * W < nr) {
        key_range(p, i0 + v * W, std::min(W, nr - v * W), lo, hi);
        lo = std::clamp<std::int64_t>(lo - j0, 0, nc);
        hi = std::max(lo, std::clamp<std::int64_t>(hi - j0, 0, nc));
        if (lo < hi) {
          lo = lo / align * align;
          hi = std::min(nc, (hi + align - 1) / align * align);
        }
      }
      band.lo[v] = lo;
      band.hi[v] = hi;
    }
    return band;
  }

  // ---- kernels ----

  /// The online-softmax state of one block of Br queries.
  struct QueryBlock {
    std::int64_t i0, nr, jlo, jhi;
    Packed* qt;
    T *o, *m, *l;
    bool started;
  };

  /// Adds keys [j0, j0 + nc) (rows krows, vrows) to the state of query block b; s and alpha are scratch.
  static void forward_tile(const Problem<T>& p, std::int64_t bh, QueryBlock& b, std::int64_t j0, std::int64_t nc,
                           const ScoreRow* krows, const T* vrows, T* s, T* alpha) {
    const std::int64_t dp = padded(p.d), dvp = padded(p.dv);
    // The softmax reads only each vector's keys, so the band needs no widening to gemm_bt's row blocks.
    const Band band = band_of(p, b.i0, b.nr, j0, nc, 1);
    gemm_bt(krows, dp, nc, b.qt, dp, score_factor(p), s, band);
    if (tile_is_partial(p, b.i0, b.nr, j0, nc)) apply_mask(p, bh, b.i0, b.nr, j0, nc, s, band);
    // Online softmax, W queries per pass along the lanes, over the keys their vector needs.
    for (std::int64_t v = 0, r = 0; r < Br; ++v, r += W) {
      const std::int64_t lo = band.lo[v], hi = band.hi[v];
      if (lo == hi) {
        S::store(alpha + r, S::set(T(1)));
        continue;
      }
      const V old_max = S::load(b.m + r);
      V new_max = old_max;
      for (std::int64_t c = lo; c < hi; ++c) new_max = S::max(new_max, S::load(s + c * Br + r));
      const V shift = S::finite_or_zero(new_max);
      const V a = S::exp2(old_max - shift);
      V sum = S::set(T(0));
      for (std::int64_t c = lo; c < hi; ++c) {
        const V e = S::exp2(S::load(s + c * Br + r) - shift);
        S::store(s + c * Br + r, e);
        sum = sum + e;
      }
      S::store(b.l + r, a * S::load(b.l + r) + sum);
      S::store(b.m + r, new_max);
      S::store(alpha + r, a);
    }
    if (b.started)  // before the first tile O = 0: nothing to rescale
      for (std::int64_t r = 0; r < b.nr; ++r)
        if (alpha[r] != T(1))
          for (std::int64_t c = 0; c < dvp; ++c) b.o[r * dvp + c] *= alpha[r];
    b.started = true;
    gemm_acc_lanes(band, b.nr, s, vrows, dvp, dvp, b.o, dvp);  // O += P V
  }

  /// Output rows of query blocks [g*group, (g+1)*group) of head bh. The blocks of a group walk the keys
  /// together, so each key/value tile fetched from L2/L3 serves `group` query blocks.
  static void forward_block(const Problem<T>& p, T* scratch, std::int64_t bh, std::int64_t g) {
    const std::int64_t d = p.d, dv = p.dv, dp = padded(d), dvp = padded(dv);
    const std::int64_t nqb = (p.nq + Br - 1) / Br, first = g * p.group;
    const std::int64_t count = std::min(p.group, nqb - first);
    T* s = scratch;
    T* alpha = s + Bc * Br;
    T* state = alpha + Br;
    QueryBlock blocks[kMaxGroup];
    std::int64_t jlo = p.nk, jhi = 0;
    for (std::int64_t n = 0; n < count; ++n) {
      QueryBlock& b = blocks[n];
      b.i0 = (first + n) * Br;
      b.nr = std::min(Br, p.nq - b.i0);
      key_range(p, b.i0, b.nr, b.jlo, b.jhi);
      T* block_state = state + n * (dp * Br + Br * dvp + 2 * Br);  // qt's Packed items fit in dp * Br of T
      b.qt = reinterpret_cast<Packed*>(block_state);
      b.o = block_state + dp * Br;
      b.m = b.o + Br * dvp;
      b.l = b.m + Br;
      b.started = false;
      pack_queries(p, bh, b.i0, b.nr, b.qt);
      for (std::int64_t r = 0; r < Br; ++r) {
        b.m[r] = kNegInf;
        b.l[r] = T(0);
      }
      for (std::int64_t x = 0; x < Br * dvp; ++x) b.o[x] = T(0);
      if (b.jlo < b.jhi) {
        jlo = std::min(jlo, b.jlo);
        jhi = std::max(jhi, b.jhi);
      }
    }
    T* kbuf = state + p.group * (dp * Br + Br * dvp + 2 * Br);
    T* vbuf = kbuf + (p.nk + Bc) * dp;
    const std::int64_t kv = bh / p.heads_per_kv;
    const ScoreRow* krows = jhi > jlo ? score_keys(p, kv, jlo, jhi, reinterpret_cast<ScoreRow*>(kbuf)) : nullptr;
    const T* vrows = jhi > jlo ? input_rows(p.v, p.v_bf16, kv * p.nk * dv, jlo, jhi, dv, dvp, vbuf) : nullptr;
    for (std::int64_t j0 = jlo; j0 < jhi; j0 += Bc) {
      const std::int64_t j1 = std::min(j0 + Bc, jhi);
      for (std::int64_t n = 0; n < count; ++n) {
        QueryBlock& b = blocks[n];
        const std::int64_t a0 = std::max(j0, b.jlo), a1 = std::min(j1, b.jhi);  // this block's part of the tile
        if (a0 < a1)
          forward_tile(p, bh, b, a0, a1 - a0, krows + (a0 - jlo) * dp, vrows + (a0 - jlo) * dvp, s, alpha);
      }
    }
    for (std::int64_t n = 0; n < count; ++n) {
      const QueryBlock& b = blocks[n];
      T* out = p.o + (bh * p.nq + b.i0) * dv;
      T* lse = p.lse + bh * p.nq + b.i0;
      for (std::int64_t r = 0; r < b.nr; ++r) {
        const bool empty = b.l[r] == T(0);
        const T inv = empty ? T(0) : T(1) / b.l[r];
        for (std::int64_t c = 0; c < dv; ++c) out[r * dv + c] = b.o[r * dvp + c] * inv;
        lse[r] = empty ? std::numeric_limits<T>::infinity() : b.m[r] + std::log2(b.l[r]);
      }
    }
  }

  /// Key blocks [kb0, kb1) of query head bh: writes (or, when accumulate, adds) their rows of dk and dv (of
  /// bh's key/value head), and writes these keys' share of dq (scaled, all rows) to dq.
  static void backward_head(const Problem<T>& p, T* scratch, std::int64_t bh, std::int64_t kb0, std::int64_t kb1,
                            T* dq, T* dk, T* dvv, bool accumulate) {
    const std::int64_t nq = p.nq, nk = p.nk, d = p.d, dv = p.dv, dp = padded(d), dvp = padded(dv);
    const std::int64_t nqb = (nq + Br - 1) / Br, nqp = nqb * Br;
    auto* qt = reinterpret_cast<Packed*>(scratch);  // [nqb] blocks of packed queries, in nqp * dp of T
    T* dot = scratch + nqp * dp;                     // [nqb][dvp][Br]
    T* qbuf = dot + nqp * dvp;
    T* dobuf = qbuf + nqp * dp;
    T* dqacc = dobuf + nqp * dvp;
    T* lse = dqacc + nqp * dp;
    T* dsum = lse + nqp;
    T* s = dsum + nqp;
    T* ds = s + Bc * Br;
    T* dkacc = ds + Bc * Br;
    T* dvacc = dkacc + Bc * dp;
    T* kbuf = dvacc + Bc * dvp;
    T* vbuf = kbuf + (nk + Bc) * dp;
    auto* kbf16 = reinterpret_cast<Bf16Bits*>(vbuf + (nk + Bc) * dvp);  // kPairs only

    const T* dout = p.dout + bh * nq * dv;
    const T* out = p.o + bh * nq * dv;
    for (std::int64_t b = 0; b < nqb; ++b) {
      const std::int64_t nr = std::min(Br, nq - b * Br);
      pack_queries(p, bh, b * Br, nr, qt + b * packed_size(dp));
      pack_transposed(dout, b * Br, nr, dv, dvp, T(1), dot + b * dvp * Br);
    }
    const T* qrows = input_rows(p.q, p.q_bf16, bh * nq * d, 0, nq, d, dp, qbuf);
    const T* dorows = rows(dout, 0, nq, dv, dvp, dobuf);
    const std::int64_t kv = bh / p.heads_per_kv;
    const T* krows = input_rows(p.k, p.k_bf16, kv * nk * d, 0, nk, d, dp, kbuf);
    const T* vrows = input_rows(p.v, p.v_bf16, kv * nk * dv, 0, nk, dv, dvp, vbuf);
    const ScoreRow* kscore;  // the keys as the score products read them
    if constexpr (kPairs) kscore = score_keys(p, kv, 0, nk, kbf16);
    else kscore = krows;
    for (std::int64_t i = 0; i < nqp; ++i) {
      // Padded queries get lse = +inf, so their probabilities (and dS) are exactly 0.
      lse[i] = i < nq ? p.lse[bh * nq + i] : std::numeric_limits<T>::infinity();
      dsum[i] = i < nq ? row_dot(dout + i * dv, out + i * dv, dv) : T(0);  // D_i = rowsum(dO * O)
    }
    for (std::int64_t n = 0; n < nqp * dp; ++n) dqacc[n] = T(0);

    for (std::int64_t j0 = kb0 * Bc; j0 < std::min(nk, kb1 * Bc); j0 += Bc) {
      const std::int64_t nc = std::min(Bc, nk - j0);
      for (std::int64_t n = 0; n < nc * dp; ++n) dkacc[n] = T(0);
      for (std::int64_t n = 0; n < nc * dvp; ++n) dvacc[n] = T(0);
      // Queries that may see keys [j0, j0 + nc).
      std::int64_t ilo = p.causal ? j0 : 0, ihi = nq;
      if (p.window > 0) {
        ilo = std::max<std::int64_t>(ilo, j0 - p.window + 1);
        ihi = std::min(ihi, j0 + nc - 1 + p.window);
      }
      for (std::int64_t b = ilo / Br; ilo < ihi && b <= (ihi - 1) / Br; ++b) {
        const std::int64_t i0 = b * Br, nr = std::min(Br, nq - i0);
        // Every product below touches only the band: the entries gemm_bt computes and the next ones read.
        const Band band = band_of(p, i0, nr, j0, nc, S::rows);
        gemm_bt(kscore + j0 * dp, dp, nc, qt + b * packed_size(dp), dp, score_factor(p), s, band);
        if (tile_is_partial(p, i0, nr, j0, nc)) apply_mask(p, bh, i0, nr, j0, nc, s, band);
        exp_minus(s, lse + i0, band);                                                      // P^T
        gemm_acc(nc, nr, s, Br, 1, dorows + i0 * dvp, dvp, dvp, dvacc, dvp, &band);        // dV += P^T dO
        gemm_bt(vrows + j0 * dvp, dvp, nc, dot + b * dvp * Br, dvp, T(1), ds, band);       // dP^T = V dO^T
        for (std::int64_t v = 0, r = 0; r < Br; ++v, r += W) {                              // dS^T = P^T (dP^T - D)
          const V dr = S::load(dsum + i0 + r);
          for (std::int64_t c = band.lo[v]; c < band.hi[v]; ++c)
            S::store(ds + c * Br + r, S::load(s + c * Br + r) * (S::load(ds + c * Br + r) - dr));
        }
        gemm_acc(nc, nr, ds, Br, 1, qrows + i0 * dp, dp, dp, dkacc, dp, &band);             // dK += dS^T Q
        gemm_acc_lanes(band, nr, ds, krows + j0 * dp, dp, dp, dqacc + i0 * dp, dp);        // dQ += dS K
      }
      for (std::int64_t c = 0; c < nc; ++c) {
        T* dkrow = dk + (j0 + c) * d;
        T* dvrow = dvv + (j0 + c) * dv;
        for (std::int64_t x = 0; x < d; ++x) dkrow[x] = (accumulate ? dkrow[x] : T(0)) + p.scale * dkacc[c * dp + x];
        for (std::int64_t x = 0; x < dv; ++x) dvrow[x] = (accumulate ? dvrow[x] : T(0)) + dvacc[c * dvp + x];
      }
    }
    for (std::int64_t i = 0; i < nq; ++i)
      for (std::int64_t x = 0; x < d; ++x) dq[i * d + x] = p.scale * dqacc[i * dp + x];
  }

  static void probabilities_block(const Problem<T>& p, T* scratch, std::int64_t bh, std::int64_t qb) {
    const std::int64_t d = p.d, dp = padded(d);
    const std::int64_t i0 = qb * Br, nr = std::min(Br, p.nq - i0);
    auto* qt = reinterpret_cast<Packed*>(scratch);  // in dp * Br of T
    T* s = scratch + dp * Br;
    T* lse = s + Bc * Br;
    T* kbuf = lse + Br;
    pack_queries(p, bh, i0, nr, qt);
    for (std::int64_t r = 0; r < Br; ++r)
      lse[r] = r < nr ? p.lse[bh * p.nq + i0 + r] : std::numeric_limits<T>::infinity();
    std::int64_t jlo = 0, jhi = 0;
    key_range(p, i0, nr, jlo, jhi);
    if (jhi <= jlo) return;  // the output starts at zero
    const ScoreRow* krows = score_keys(p, bh / p.heads_per_kv, jlo, jhi, reinterpret_cast<ScoreRow*>(kbuf));
    T* out = p.p + (bh * p.nq + i0) * p.nk;
    for (std::int64_t j0 = jlo; j0 < jhi; j0 += Bc) {
      const std::int64_t nc = std::min(Bc, jhi - j0);
      // Every entry is copied out, so the whole tile is computed (the mask makes the out-of-band ones 0).
      const Band band = Band::all(nc);
      gemm_bt(krows + (j0 - jlo) * dp, dp, nc, qt, dp, score_factor(p), s, band);
      if (tile_is_partial(p, i0, nr, j0, nc)) apply_mask(p, bh, i0, nr, j0, nc, s, band);
      exp_minus(s, lse, band);
      for (std::int64_t r = 0; r < nr; ++r)
        for (std::int64_t c = 0; c < nc; ++c) out[r * p.nk + j0 + c] = s[c * Br + r];
    }
  }
};

template <class T, class Arch, bool kPairs = false>
constexpr Kernels<T> kernels() {
  using K = Kernel<T, Arch, kPairs>;
  return {&K::forward_block, &K::backward_head, &K::probabilities_block};
}

template <class Arch>
constexpr KernelTable make_table() {
  return {kernels<float, Arch>(), kernels<double, Arch>()};
}

}  // namespace
}  // namespace loom::flash
