#pragma once
// MultiHeadAttention with Keras 3's arguments, weights and semantics (keras.layers.MultiHeadAttention):
//
//   L::MultiHeadAttention mha({.num_heads = 8, .key_dim = 64});
//   Tensor y = mha(x, x);                                           // self-attention, [B, T, D] -> [B, T, D]
//   Tensor c = mha(query, value, {.key = key, .attention_mask = m, .use_causal_mask = true});
//   auto [out, scores] = mha.call_with_scores(query, value);        // scores [B, heads, T, S]
//
// key_dim is the size of each head (Keras's convention; PyTorch's embed_dim is the total). The projections are
// EinsumDense children named query, key, [gate,] value and attention_output, so the weights are
// "<name>/query/kernel" [D, heads, key_dim], "<name>/query/bias" [heads, key_dim], key/..., value/kernel
// [D, heads, value_dim], value/bias, attention_output/kernel [heads, value_dim, E], attention_output/bias [E].
//
// Masks are boolean (or numbers, nonzero = true) and true means "may attend". A query row with no key it may
// attend gets zero weights (Keras's manual path), on every path here.
//
// The attention itself runs through ops::scaled_dot_product_attention whenever dropout is 0 and the inputs
// have rank 3, so the flash implementation speeds the layer up without it changing; scores then come from
// the same op (with flash, recomputed tile by tile from the saved logsumexp: unlike Keras, flash and scores
// work together). Otherwise (dropout > 0, rank > 3 inputs) it is composed from ops as Keras's manual path.
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "framework/ops/attention.hpp"
#include "framework/tensor/random.hpp"
#include "layers/core/einsum_dense.hpp"
#include "layers/layer.hpp"

namespace loom::layers {

/// MultiHeadAttention's output_shape: one size (`.output_shape = 32`) or a shape (`.output_shape = {4, 8}`).
struct AttentionOutputShape {
  Shape dims;
  AttentionOutputShape(std::int64_t size) : dims{size} {}  // NOLINT: an int is a 1-D output shape, as Keras
  AttentionOutputShape(Shape shape) : dims(std::move(shape)) {}  // NOLINT
  AttentionOutputShape(std::initializer_list<std::int64_t> shape) : dims(shape) {}
};

/// Keras's constructor arguments, in its order (regularizers and constraints are not supported).
struct MultiHeadAttentionOptions {
  std::int64_t num_heads = 0;  // required, > 0
  std::int64_t key_dim = 0;    // required, > 0: the size of each query and key head
  /// The size of each value head; defaults to key_dim.
  std::optional<std::int64_t> value_dim = std::nullopt;
  /// Dropout rate on the attention probabilities, in [0, 1).
  double dropout = 0.0;
  bool use_bias = true;
  /// The output's trailing shape; defaults to the query's last dimension.
  std::optional<AttentionOutputShape> output_shape = std::nullopt;
  /// The axes attention runs over, as axes of the input (1 .. rank-2; negative ones count from the end of
  /// the projected [B, ..., heads, dim] tensor, as Keras); default all of them.
  std::optional<std::vector<std::int64_t>> attention_axes = std::nullopt;
  /// Query i may attend key j only when |i - j| < sliding_window.
  std::optional<std::int64_t> sliding_window = std::nullopt;
  /// The attention op's implementation, spelled as the op's `.impl` (ops::AttentionImpl) or as Keras does:
  /// true / AttentionImpl::Flash the flash kernel (an error with dropout, as Keras; scores are fine, unlike
  /// Keras); false / Math the reference; std::nullopt / Auto the op's choice by size. Unlike Keras, a
  /// per-layer false does force the math path.
  ops::AttentionImpl flash_attention = std::nullopt;
  Initializer kernel_initializer = "glorot_uniform";
  Initializer bias_initializer = "zeros";
  /// Keras 3.14's gate: output = attention_output(attention * sigmoid(gate(query))), with an EinsumDense
  /// "gate" [D, heads, value_dim] between key and value.
  bool use_gate = false;
  /// Seeds the dropout: each call draws a new mask, the sequence reproducible from the seed.
  std::optional<std::uint64_t> seed = std::nullopt;
  std::optional<std::string> name = std::nullopt;
  /// A dtype policy's name (layers/dtype_policy.hpp), given to the projections too; none: the global one.
  std::optional<std::string> dtype = std::nullopt;
};

/// The call arguments after query and value, in Keras's order (return_attention_scores is call_with_scores).
struct MultiHeadAttentionCall {
  /// [B, S, Dk]; defaults to value.
  Tensor key = {};
  /// [B, T]: false marks padding queries (their rows attend nothing).
  Tensor query_mask = {};
  /// [B, S]: false marks padding keys/values.
  Tensor value_mask = {};
  /// [B, S], ANDed with value_mask.
  Tensor key_mask = {};
  /// [B, T, S] or broadcastable to it ([T, S], [B, 1, S], ...), or [B, heads, T, S].
  Tensor attention_mask = {};
  /// Dropout on the attention probabilities only when true.
  bool training = false;
  /// Query i attends keys j <= i (top-left aligned when T != S).
  bool use_causal_mask = false;
};

/// What call_with_scores returns: the output and the attention probabilities [B, heads, T, S] (after the
/// masks, before dropout).
struct AttentionWithScores {
  Tensor output;
  Tensor scores;
};

class MultiHeadAttention : public Layer {
 public:
  explicit MultiHeadAttention(MultiHeadAttentionOptions options);

  /// x alone: self-attention (so the layer fits in a Sequential).
  using Layer::operator();
  /// query [B, T, Dq], value [B, S, Dv] -> [B, T, E]. Builds the weights from the shapes on the first call.
  /// As Keras, the Keras masks the inputs carry (Tensor::keras_mask) fill query_mask, value_mask and key_mask
  /// where those are not given, and the output carries the query's mask.
  Tensor operator()(const Tensor& query, const Tensor& value, const MultiHeadAttentionCall& options = {}) &;
  Tensor operator()(const Tensor& query, const Tensor& value, const MultiHeadAttentionCall& options = {}) &&;
  /// The output and the attention scores (with flash they are not recorded on the tape).
  AttentionWithScores call_with_scores(const Tensor& query, const Tensor& value,
                                       const MultiHeadAttentionCall& options = {});

  bool supports_masking() const override { return true; }
  /// The query's shape with its last dimension replaced by output_shape.
  Shape compute_output_shape(const Shape& query_shape) const override;

  std::int64_t num_heads() const { return options_.num_heads; }
  std::int64_t key_dim() const { return options_.key_dim; }
  std::int64_t value_dim() const { return value_dim_; }
  double dropout() const { return options_.dropout; }
  bool use_bias() const { return options_.use_bias; }
  /// The options it was made with (saving a model writes them as Keras's config).
  const MultiHeadAttentionOptions& options() const { return options_; }
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
  std::vector<Tensor> record_attention(const Tensor& query, const Tensor& value, const MultiHeadAttentionCall& options,
                                       bool want_scores, std::shared_ptr<Layer> owner);
  /// run() under the layer's remat mode (Layer::rematerialized_call).
  AttentionWithScores run_rematerialized(const Tensor& query, const Tensor& value, const MultiHeadAttentionCall& options,
                                         bool want_scores);
  AttentionWithScores run(const Tensor& query, const Tensor& value, const MultiHeadAttentionCall& options,
                          bool want_scores);
  void build_from(const Shape& query_shape, const Shape& value_shape, const Shape& key_shape, DType dtype);
  void check_inputs(const Tensor& query, const Tensor& value, const Tensor& key) const;
  /// Keras's _compute_attention_mask without the causal and window parts: [B, T, S] (or the attention mask's
  /// own broadcastable / [B, heads, T, S] shape), undefined when there is no mask.
  Tensor explicit_mask(const Tensor& query, const Tensor& value, const MultiHeadAttentionCall& options) const;
  Tensor masked_softmax(const Tensor& scores, const Tensor& mask) const;

  MultiHeadAttentionOptions options_;
  std::int64_t value_dim_;
  Shape output_shape_;  // empty: the query's last dimension
  // Set by build: the input ranks and feature sizes the kernels were made for, and Keras's equations.
  std::int64_t rank_ = 0;
  std::int64_t query_features_ = 0, value_features_ = 0, key_features_ = 0;
  std::vector<std::int64_t> attention_axes_;  // axes of the projected [B, ..., heads, dim] tensors
  std::string dot_product_equation_, combine_equation_;
  std::vector<std::int64_t> softmax_axes_;
  EinsumDense* query_dense_ = nullptr;
  EinsumDense* key_dense_ = nullptr;
  EinsumDense* gate_dense_ = nullptr;
  EinsumDense* value_dense_ = nullptr;
  EinsumDense* output_dense_ = nullptr;
  random::Generator dropout_seeds_{0};

 protected:
  std::shared_ptr<Layer> move_into_shared() && override {
    return std::make_shared<MultiHeadAttention>(std::move(*this));
  }
};

}  // namespace loom::layers
