#pragma once
// What MultiHeadAttention and GroupQueryAttention share: Keras's combination of the masks of a call on
// [batch, seq, features] inputs, and the recording of a call on symbolic tensors as a graph node.
// Internal to layers/attention/.
#include <cstdint>
#include <string>
#include <vector>

#include "framework/ops/attention.hpp"
#include "layers/attention/multi_head_attention.hpp"

namespace loom::layers::detail {

/// Keras's _compute_attention_mask for query [B, T, *] and value [B, S, *], without its causal and window
/// parts: query_mask [B, T], value_mask and key_mask [B, S] and attention_mask (broadcasting to [B, T, S], or
/// [B, heads, T, S] per head) combined as one boolean; undefined when the call has none. `layer` names the
/// layer in errors, `heads_name` its option for the number of heads.
Tensor combine_attention_masks(const std::string& layer, const Tensor& query, const Tensor& value,
                               const MultiHeadAttentionCall& call, std::int64_t heads, const char* heads_name);

/// [1, 1, T, S]: true where query i may attend key j under causal (j <= i) and a sliding window (|i - j| < w).
Tensor structural_mask(std::int64_t t, std::int64_t s, bool causal, std::int64_t window);

/// Keras's fused path (keras.ops.dot_product_attention): a query row that its mask (with causal and the
/// window) leaves no key attends every key equally (all its logits become the same large negative number),
/// so its output is the mean of the values; ops::scaled_dot_product_attention gives zeros there. `attended`
/// [B, H, T, dv] is the op's output for v [B, Hkv, S, dv] (Hkv dividing H) and `attention` its options; it is
/// returned as is when there is no mask or every row has a key.
Tensor attend_uniformly_where_fully_masked(const Tensor& attended, const Tensor& v,
                                           const ops::AttentionOptions& attention);

/// A loom::Error unless the attention_mask is boolean or numeric (nonzero = may attend).
void check_attention_mask_dtype(const std::string& layer, const Tensor& mask);

/// Whether any tensor of the call is symbolic (the call is then a graph node).
bool any_symbolic_input(const Tensor& query, const Tensor& value, const MultiHeadAttentionCall& call);

/// The call's tensors in the order its graph node records them: query, value, key, query_mask, value_mask,
/// key_mask, attention_mask.
std::vector<Tensor> attention_node_inputs(const Tensor& query, const Tensor& value,
                                          const MultiHeadAttentionCall& call);

/// What the node runs: the layer called again on the recorded values in the order above, with the scores as
/// a second output when `want_scores`.
template <class AttentionLayer>
auto attention_node_call(const MultiHeadAttentionCall& call, bool want_scores) {
  return [call, want_scores](Layer& self, const std::vector<Tensor>& v, bool training) {
    MultiHeadAttentionCall o = call;
    o.key = v[2];
    o.query_mask = v[3];
    o.value_mask = v[4];
    o.key_mask = v[5];
    o.attention_mask = v[6];
    o.training = training;
    auto& layer = static_cast<AttentionLayer&>(self);
    if (!want_scores) return std::vector<Tensor>{layer(v[0], v[1], o)};
    auto [output, scores] = layer.call_with_scores(v[0], v[1], o);
    return std::vector<Tensor>{output, scores};
  };
}

/// What a rematerialized call runs: the layer's own computation `run` (a pointer to its member) on query,
/// value and, when the call has one, key, with the call's other arguments.
template <class AttentionLayer, class Run>
auto attention_run_call(Run run, const MultiHeadAttentionCall& call, bool want_scores) {
  return [run, call, want_scores](Layer& self, const std::vector<Tensor>& v, bool training) {
    MultiHeadAttentionCall o = call;
    o.key = v.size() > 2 ? v[2] : Tensor();
    o.training = training;
    const AttentionWithScores r = (static_cast<AttentionLayer&>(self).*run)(v[0], v[1], o, want_scores);
    return want_scores ? std::vector<Tensor>{r.output, r.scores} : std::vector<Tensor>{r.output};
  };
}

/// The shape of the attention scores: [batch, heads, query's attention axes..., value's attention axes...].
Shape attention_scores_shape(const Tensor& query, const Tensor& value, std::int64_t heads);

/// The differentiable tensors of a call, as attention_run_call takes them: query, value and key if given.
std::vector<Tensor> attention_run_inputs(const Tensor& query, const Tensor& value, const MultiHeadAttentionCall& call);

}  // namespace loom::layers::detail
