#pragma once
// TransformerEncoder: one encoder block, self-attention then a position-wise feed-forward network, each with
// a residual connection and layer normalization (modelled on KerasHub's TransformerEncoder):
//
//   L::TransformerEncoder block({.num_heads = 8, .ff_dim = 1024, .dropout = 0.1, .norm_first = true});
//   Tensor y = block(x, /*training=*/true);                        // x [B, T, d_model] -> [B, T, d_model]
//   Tensor z = block(x, {.padding_mask = keep, .use_causal_mask = true});
//
//   norm_first (pre-norm):   h = x + Dropout(MHA(LN1(x)));   y = h + Dropout(FFN(LN2(h)))
//   post-norm (the default): h = LN1(x + Dropout(MHA(x)));   y = LN2(h + Dropout(FFN(h)))
//   FFN(x) = Dense(d_model)(activation(Dense(ff_dim)(x)))
//
// Children, in this order (so the weights are in it): self_attention_layer (MultiHeadAttention, key_dim per
// head), self_attention_layer_norm, self_attention_dropout, feedforward_layer_norm,
// feedforward_intermediate_dense [d_model, ff_dim], feedforward_output_dense [ff_dim, d_model],
// feedforward_dropout. `dropout` is the residual dropout; the attention probabilities get
// `attention_dropout` (0 by default, which keeps the attention on its fused / flash path).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "layers/attention/multi_head_attention.hpp"
#include "layers/core/dense.hpp"
#include "layers/layer.hpp"
#include "layers/normalization/layer_normalization.hpp"
#include "layers/regularization/dropout.hpp"

namespace loom::layers {

struct TransformerEncoderOptions {
  std::int64_t num_heads = 0;  // required, > 0
  /// The size of each attention head; defaults to d_model / num_heads.
  std::optional<std::int64_t> key_dim = std::nullopt;
  /// The model width; defaults to the input's last dimension, which it must equal when given.
  std::optional<std::int64_t> d_model = std::nullopt;
  std::int64_t ff_dim = 0;  // required, > 0: the feed-forward network's hidden width
  /// Dropout on each residual branch (after attention and after the feed-forward network), in [0, 1).
  double dropout = 0.0;
  /// Dropout on the attention probabilities, in [0, 1); above 0 the attention runs composed from ops.
  double attention_dropout = 0.0;
  /// true: pre-norm (LayerNormalization before each sub-block); false: post-norm (after each residual add).
  bool norm_first = false;
  /// The feed-forward activation, a Keras name ("relu", "gelu", ...).
  std::string activation = "relu";
  /// The LayerNormalization epsilon (KerasHub's and PyTorch's 1e-5, not the layer's default 1e-3).
  double epsilon = 1e-5;
  /// Passed to the MultiHeadAttention: std::nullopt / Auto, true / Flash, false / Math.
  ops::AttentionImpl flash_attention = std::nullopt;
  std::optional<std::string> name = std::nullopt;
};

/// The call arguments besides the input.
struct TransformerEncoderCall {
  /// [B, T]: false marks padding tokens, which no query attends (KerasHub's padding_mask).
  Tensor padding_mask = {};
  /// [B, T, T] (or broadcastable), true = may attend.
  Tensor attention_mask = {};
  bool training = false;
  bool use_causal_mask = false;
};

class TransformerEncoder : public Layer {
 public:
  explicit TransformerEncoder(TransformerEncoderOptions options);

  using Layer::operator();
  /// x [B, T, d_model] -> [B, T, d_model], with masks.
  Tensor operator()(const Tensor& x, const TransformerEncoderCall& options) &;
  Tensor operator()(const Tensor& x, const TransformerEncoderCall& options) &&;

  /// The children; null until the layer is built.
  MultiHeadAttention* attention() const { return attention_; }
  LayerNormalization* attention_norm() const { return attention_norm_; }
  LayerNormalization* feedforward_norm() const { return feedforward_norm_; }
  Dense* intermediate_dense() const { return intermediate_; }
  Dense* output_dense() const { return output_; }

 protected:
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& x, bool training) override;

 private:
  std::vector<Tensor> record_encoder(const Tensor& x, const TransformerEncoderCall& options,
                                     std::shared_ptr<Layer> owner);
  Tensor forward(const Tensor& x, const TransformerEncoderCall& options);

  TransformerEncoderOptions options_;
  MultiHeadAttention* attention_ = nullptr;
  LayerNormalization* attention_norm_ = nullptr;
  Dropout* attention_dropout_ = nullptr;
  LayerNormalization* feedforward_norm_ = nullptr;
  Dense* intermediate_ = nullptr;
  Dense* output_ = nullptr;
  Dropout* feedforward_dropout_ = nullptr;

 protected:
  std::shared_ptr<Layer> move_into_shared() && override {
    return std::make_shared<TransformerEncoder>(std::move(*this));
  }
};

}  // namespace loom::layers
