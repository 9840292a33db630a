#pragma once
// The model and data of the distributed example and benchmark: a small pre-norm Transformer encoder that
// learns to reverse token sequences (only attention can move a token to its mirrored position).
#include <cstdint>
#include <utility>
#include <vector>

#include "loom.hpp"

namespace loom::examples {

struct ReversalConfig {
  std::int64_t vocabulary = 16, seq_len = 16, d_model = 64, heads = 4, ff_dim = 128;
  int blocks = 2;
};

/// Token and position embeddings, pre-norm TransformerEncoder blocks, a final LayerNormalization and
/// per-token logits over the vocabulary: ids [batch, seq] -> logits [batch, seq, vocabulary].
class ReversalEncoder : public layers::Model {
 public:
  explicit ReversalEncoder(const ReversalConfig& c)
      : Model("reversal_encoder"),
        tokens_(add_layer(layers::Embedding(c.vocabulary, c.d_model))),
        positions_(add_layer(layers::Embedding(c.seq_len, c.d_model))) {
    for (int i = 0; i < c.blocks; ++i)
      blocks_.push_back(&add_layer(layers::TransformerEncoder({.num_heads = c.heads, .ff_dim = c.ff_dim,
                                                               .norm_first = true})));
    norm_ = &add_layer(layers::LayerNormalization());
    head_ = &add_layer(layers::Dense(c.vocabulary));
  }

 protected:
  Tensor call(const Tensor& ids, bool training) override {
    const Tensor positions = Tensor::arange(0.0, double(ids.size(1)), 1.0, DType::i64);
    Tensor h = tokens_(ids, training) + positions_(positions, training);
    for (layers::TransformerEncoder* block : blocks_) h = (*block)(h, training);
    return (*head_)((*norm_)(h, training), training);
  }

 private:
  layers::Embedding& tokens_;
  layers::Embedding& positions_;
  std::vector<layers::TransformerEncoder*> blocks_;
  layers::LayerNormalization* norm_ = nullptr;
  layers::Dense* head_ = nullptr;
};

/// n sequences of ids in [1, vocabulary) and the same sequences reversed; the same for a seed on every rank.
inline std::pair<Tensor, Tensor> reversal_data(std::int64_t n, const ReversalConfig& c, std::uint64_t seed) {
  random::Generator rng(seed);
  const std::int64_t t = c.seq_len;
  std::vector<std::int64_t> x(std::size_t(n * t)), y(std::size_t(n * t));
  for (std::int64_t& id : x) id = 1 + std::int64_t(rng.next() % std::uint64_t(c.vocabulary - 1));
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < t; ++j) y[std::size_t(i * t + j)] = x[std::size_t(i * t + (t - 1 - j))];
  return {Tensor::from_vector(x, {n, t}), Tensor::from_vector(y, {n, t})};
}

/// The loss for ids against logits.
inline Tensor reversal_loss(const Tensor& ids, const Tensor& logits) {
  return losses::sparse_categorical_crossentropy(ids, logits, {.from_logits = true});
}

}  // namespace loom::examples
