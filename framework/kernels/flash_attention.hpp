#pragma once
// The flash implementation behind ops::scaled_dot_product_attention (attention.cpp validates the inputs
// first). Internal to the framework: use the ops in attention.hpp.
#include <cstdint>

#include "framework/ops/attention.hpp"

namespace loom::ops::flash_attention {

/// Output [B, H, Nq, dv]; recorded on the tape as "flash_attention", whose backward runs the fused backward
/// kernel (recorded as "flash_attention_backward", which cannot be differentiated again).
Tensor forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options);

/// The output and the probabilities [B, H, Nq, Nk], the latter recomputed tile by tile from the saved
/// logsumexp (not recorded on the tape).
AttentionOutputs forward_with_probabilities(const Tensor& q, const Tensor& k, const Tensor& v,
                                            const AttentionOptions& options);

/// Whether the flash kernels are expected to beat the math path for these sizes (AttentionImpl::Auto).
bool preferred(std::int64_t nq, std::int64_t nk, std::int64_t d, std::int64_t dv);

}  // namespace loom::ops::flash_attention
