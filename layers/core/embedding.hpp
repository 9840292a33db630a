#pragma once
// Embedding (keras.layers.Embedding): looks up rows of a [input_dim, output_dim] table by integer id.
//
//   L::Embedding tokens(10000, 64);
//   Tensor h = tokens(ids);   // ids: int64 of any shape [...] -> [..., 64]
//
// The table is float32 unless the layer is built for another dtype first:
// `tokens.maybe_build(ids.shape(), DType::f64)`. Ids must lie in [0, input_dim). The gradient with respect to
// the table scatter-adds into the rows looked up. Keras's mask_zero is not supported.
#include <cstdint>
#include <optional>
#include <string>

#include "layers/layer.hpp"

namespace loom::layers {

struct EmbeddingOptions {
  Initializer embeddings_initializer = "uniform";  // Keras: random_uniform(-0.05, 0.05)
  std::optional<std::string> name = std::nullopt;
};

class Embedding : public Layer {
 public:
  Embedding(std::int64_t input_dim, std::int64_t output_dim, EmbeddingOptions options = {});

  Shape compute_output_shape(const Shape& input_shape) const override;

  std::int64_t input_dim() const { return input_dim_; }
  std::int64_t output_dim() const { return output_dim_; }
  /// The table; undefined until the layer is built.
  const Variable& embeddings() const { return embeddings_; }

 protected:
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& ids, bool training) override;

 private:
  std::int64_t input_dim_;
  std::int64_t output_dim_;
  EmbeddingOptions options_;
  Variable embeddings_;
};

}  // namespace loom::layers
