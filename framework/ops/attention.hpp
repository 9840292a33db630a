#pragma once
// scaled_dot_product_attention: softmax(q k^T * scale + mask) v over [batch, heads, seq, head_dim].
//
// Grouped-query attention (GQA, and multi-query attention with one key/value head): k and v may have fewer
// heads than q, a number Hkv that divides q's H. Query head h then attends with key/value head
// h / (H / Hkv), as if k and v were repeated H / Hkv times along the heads (keras.ops.repeat(k, H / Hkv,
// axis=heads), what Keras's GroupQueryAttention does), but nothing is repeated: the flash kernels read each
// key/value head for its group of query heads, the math path multiplies each group's query heads stacked
// against their one key/value head, and the gradients of k and v sum over the group.
//
//   Tensor o = ops::scaled_dot_product_attention(q /* [B, 8, T, 64] */, k /* [B, 2, S, 64] */, v, {.causal = true});
#include <concepts>
#include <cstdint>
#include <optional>

#include "framework/tensor/tensor.hpp"

namespace loom::ops {

/// Which implementation computes attention. Math: the reference, composed from loom ops (O(Nq*Nk) memory,
/// differentiable to any order). Flash: tiled online softmax, O(N) memory, first-order only. Auto picks the
/// faster one for the sizes. Keras's spelling, flash_attention = None / True / False, converts to Auto / Flash /
/// Math, so this op's `.impl` and MultiHeadAttention's `.flash_attention` take the same values.
class AttentionImpl {
 public:
  enum Choice { Auto, Math, Flash };
  constexpr AttentionImpl(Choice choice = Auto) : choice_(choice) {}  // NOLINT: AttentionImpl::Flash converts
  constexpr AttentionImpl(std::nullopt_t) : choice_(Auto) {}         // NOLINT: Keras's None
  template <class Bool>
    requires std::same_as<Bool, bool>
  constexpr AttentionImpl(Bool flash) : choice_(flash ? Flash : Math) {}  // NOLINT: Keras's True / False, bool only
  constexpr AttentionImpl(std::optional<bool> flash)  // NOLINT
      : choice_(!flash ? Auto : *flash ? Flash : Math) {}
  constexpr Choice choice() const { return choice_; }
  constexpr bool operator==(const AttentionImpl&) const = default;

 private:
  Choice choice_;
};

struct AttentionOptions {
  /// Broadcastable to [batch, heads, q_seq, k_seq]; boolean or float, true / nonzero = may attend.
  Tensor mask = {};
  /// Query i may attend key j only when j <= i (top-left aligned, as PyTorch and Keras).
  bool causal = false;
  /// Defaults to 1/sqrt(head_dim).
  std::optional<double> scale = std::nullopt;
  /// w > 0 keeps only |i - j| < w.
  std::int64_t sliding_window = 0;
  AttentionImpl impl = AttentionImpl::Auto;
};

/// q [B, H, Nq, d], k [B, Hkv, Nk, d], v [B, Hkv, Nk, dv] -> [B, H, Nq, dv], with Hkv = H or Hkv dividing H
/// (grouped-query attention, above). A query row with no key it may attend yields zeros (and zero gradients),
/// never NaN. q, k and v are all float32, all float64 or all bf16 (mixed precision): bf16 inputs give float32
/// outputs, probabilities and gradients; the scores are bf16 products accumulated in float32 (vdpbf16ps in the
/// flash kernels where the CPU has AVX512_BF16), and softmax and P V run in float32 on v widened exactly.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options = {});

/// The attention probabilities [B, H, Nq, Nk] that scaled_dot_product_attention applies to v (k may have
/// grouped heads, [B, Hkv, Nk, d]), with the same options (fully masked rows are zeros). Always computed by
/// the math path (options.impl is not consulted).
Tensor attention_probabilities(const Tensor& q, const Tensor& k, const AttentionOptions& options = {});

struct AttentionOutputs {
  Tensor output;         // [B, H, Nq, dv]
  Tensor probabilities;  // [B, H, Nq, Nk]
};

/// Both at once. Math: both differentiable. Flash: the output from the tiled kernel (differentiable, first
/// order) and the probabilities recomputed tile by tile from its saved logsumexp, so the O(Nq*Nk) score
/// matrix exists only as this result; these probabilities are not recorded on the tape.
AttentionOutputs scaled_dot_product_attention_with_probabilities(const Tensor& q, const Tensor& k, const Tensor& v,
                                                                 const AttentionOptions& options = {});

}  // namespace loom::ops
