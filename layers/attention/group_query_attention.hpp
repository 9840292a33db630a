#pragma once
// GroupQueryAttention with Keras 3's arguments, weights and semantics (keras.layers.GroupQueryAttention, the
// class keras.layers.GroupedQueryAttention): num_query_heads query heads share num_key_value_heads key/value
// heads (Ainslie et al., 2023); one key/value head is multi-query attention, as many as the query heads is
// multi-head attention.
//
//   L::GroupQueryAttention gqa({.head_dim = 8, .num_query_heads = 4, .num_key_value_heads = 2});
//   Tensor y = gqa(x, x);                                            // self-attention, [B, T, D] -> [B, T, D]
//   Tensor c = gqa(query, value, {.key = key, .attention_mask = m, .use_causal_mask = true});
//   auto [out, scores] = gqa.call_with_scores(query, value);         // scores [B, num_query_heads, T, S]
//
// The projections are EinsumDense children named query ("bqm,muh->bquh"), key and value ("bkm,mvh->bkvh"),
// [gate,] and attention_output ("bquh,uhm->bqm"), so the weights are, in Keras's order, "<name>/query/kernel"
// [Dq, Hq, head_dim], "<name>/query/bias" [Hq, head_dim], key/kernel [Dk, Hkv, head_dim], key/bias
// [Hkv, head_dim], [gate/kernel [Dq, Hq, head_dim], gate/bias,] value/kernel [Dv, Hkv, head_dim], value/bias,
// attention_output/kernel [Hq, head_dim, Dq], attention_output/bias [Dq]. The output has the query's shape.
//
// Keras repeats the projected keys and values num_query_heads / num_key_value_heads times along the heads
// before attending; here they are not repeated: ops::scaled_dot_product_attention takes the key/value heads
// as they are (grouped-query attention), its flash kernels reading each key/value head for its group of
// query heads, so the keys and values (and their gradients) take 1 / (Hq / Hkv) of the memory Keras's take.
// Query head h attends with key/value head h / (Hq / Hkv), as Keras's repeat gives.
//
// Masks are boolean (or numbers, nonzero = true) and true means "may attend", combined as Keras's
// _compute_attention_mask does (query_mask [B, T], value_mask and key_mask [B, S], attention_mask [B, T, S]
// or broadcastable to it, or [B, Hq, T, S]; use_causal_mask and sliding_window). As Keras, the Keras masks
// the inputs carry (Tensor::keras_mask) fill query_mask, value_mask and key_mask where those are not given,
// and the output carries the query's mask.
//
// Where loom differs from Keras: a query row with no key it may attend gets zero weights on every path (Keras's
// manual path; its fused path averages every value); scores work with flash (recomputed tile by tile from
// the kernel's saved logsumexp; Keras refuses); flash_attention = false does force the math path; inputs must
// have rank 3 [batch, seq, features] (as Keras's equations require), and value's features may differ from the
// query's (Keras's call accepts that, its compute_output_shape for symbolic inputs does not). Regularizers and
// constraints are not supported.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "framework/ops/attention.hpp"
#include "framework/tensor/random.hpp"
#include "layers/attention/multi_head_attention.hpp"
#include "layers/core/einsum_dense.hpp"
#include "layers/layer.hpp"

namespace loom::layers {

/// Keras's constructor arguments, in its order (regularizers and constraints are not supported).
struct GroupQueryAttentionOptions {
  std::int64_t head_dim = 0;             // required, > 0: the size of each query, key and value head
  std::int64_t num_query_heads = 0;      // required, > 0
  std::int64_t num_key_value_heads = 0;  // required, > 0, dividing num_query_heads
  /// Dropout rate on the attention probabilities, in [0, 1).
  double dropout = 0.0;
  bool use_bias = true;
  /// Query i may attend key j only when |i - j| < sliding_window.
  std::optional<std::int64_t> sliding_window = std::nullopt;
  /// The attention op's implementation, as MultiHeadAttention's: true / AttentionImpl::Flash the flash kernel
  /// (an error with dropout, as Keras), false / Math the reference, std::nullopt / Auto the op's choice.
  ops::AttentionImpl flash_attention = std::nullopt;
  Initializer kernel_initializer = "glorot_uniform";
  Initializer bias_initializer = "zeros";
  /// Keras's gate: output = attention_output(attention * sigmoid(gate(query))), with an EinsumDense "gate"
  /// [Dq, Hq, head_dim] between key and value.
  bool use_gate = false;
  /// Seeds the dropout: each call draws a new mask, the sequence reproducible from the seed.
  std::optional<std::uint64_t> seed = std::nullopt;
  std::optional<std::string> name = std::nullopt;
  /// A dtype policy's name (layers/dtype_policy.hpp), given to the projections too; none: the global one.
  std::optional<std::string> dtype = std::nullopt;
};

/// The call arguments after query and value, in Keras's order, as MultiHeadAttention's (key [B, S, Dk];
/// query_mask [B, T]; value_mask, key_mask [B, S]; attention_mask; training; use_causal_mask).
using GroupQueryAttentionCall = MultiHeadAttentionCall;

class GroupQueryAttention : public Layer {
 public:
  explicit GroupQueryAttention(GroupQueryAttentionOptions options);

  /// x alone: self-attention (so the layer fits in a Sequential).
  using Layer::operator();
  /// query [B, T, Dq], value [B, S, Dv] -> [B, T, Dq]. Builds the weights from the shapes on the first call.
  Tensor operator()(const Tensor& query, const Tensor& value, const GroupQueryAttentionCall& options = {}) &;
  Tensor operator()(const Tensor& query, const Tensor& value, const GroupQueryAttentionCall& options = {}) &&;
  /// The output and the attention scores [B, Hq, T, S] (after the masks, before dropout; with flash they are
  /// not recorded on the tape).
  AttentionWithScores call_with_scores(const Tensor& query, const Tensor& value,
                                       const GroupQueryAttentionCall& options = {});

  bool supports_masking() const override { return true; }
  /// The query's shape.
  Shape compute_output_shape(const Shape& query_shape) const override;
  std::string class_name() const override { return "GroupQueryAttention"; }

  std::int64_t head_dim() const { return options_.head_dim; }
  std::int64_t num_query_heads() const { return options_.num_query_heads; }
  std::int64_t num_key_value_heads() const { return options_.num_key_value_heads; }
  double dropout() const { return options_.dropout; }
  bool use_bias() const { return options_.use_bias; }
  std::optional<std::int64_t> sliding_window() const { return options_.sliding_window; }
  ops::AttentionImpl flash_attention() const { return options_.flash_attention; }
  bool use_gate() const { return options_.use_gate; }
  /// The options it was made with (saving a model writes them as Keras's config).
  const GroupQueryAttentionOptions& options() const { return options_; }
  /// The projections; null until the layer is built (gate_dense stays null without use_gate).
  EinsumDense* query_dense() const { return query_dense_; }
  EinsumDense* key_dense() const { return key_dense_; }
  EinsumDense* gate_dense() const { return gate_dense_; }
  EinsumDense* value_dense() const { return value_dense_; }
  EinsumDense* output_dense() const { return output_dense_; }

 protected:
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& x, bool training) override;

 private:
  /// Records the call on symbolic inputs as a graph node (with the scores as a second output when asked).
  std::vector<Tensor> record_attention(const Tensor& query, const Tensor& value,
                                       const GroupQueryAttentionCall& options, bool want_scores,
                                       std::shared_ptr<Layer> owner);
  /// run() under the layer's remat mode (Layer::rematerialized_call).
  AttentionWithScores run_rematerialized(const Tensor& query, const Tensor& value, const GroupQueryAttentionCall& options,
                                         bool want_scores);
  AttentionWithScores run(const Tensor& query, const Tensor& value, const GroupQueryAttentionCall& options,
                          bool want_scores);
  void build_from(const Shape& query_shape, const Shape& value_shape, const Shape& key_shape, DType dtype);
  void check_inputs(const Tensor& query, const Tensor& value, const Tensor& key) const;

  GroupQueryAttentionOptions options_;
  // Set by build: the feature sizes the kernels were made for.
  std::int64_t query_features_ = 0, value_features_ = 0, key_features_ = 0;
  EinsumDense* query_dense_ = nullptr;
  EinsumDense* key_dense_ = nullptr;
  EinsumDense* gate_dense_ = nullptr;
  EinsumDense* value_dense_ = nullptr;
  EinsumDense* output_dense_ = nullptr;
  random::Generator dropout_seeds_{0};

 protected:
  std::shared_ptr<Layer> move_into_shared() && override {
    return std::make_shared<GroupQueryAttention>(std::move(*this));
  }
};

}  // namespace loom::layers
