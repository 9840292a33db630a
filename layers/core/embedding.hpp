#pragma once
// Embedding (keras.layers.Embedding): looks up rows of a [input_dim, output_dim] table by integer id.
//
//   L::Embedding tokens(10000, 64);
//   Tensor h = tokens(ids);   // ids: int64 of any shape [...] -> [..., 64]
//
// The table is float32 unless the layer is built for another dtype first:
// `tokens.maybe_build(ids.shape(), DType::f64)`. Ids must lie in [0, input_dim). The gradient with respect to
// the table scatter-adds into the rows looked up. With mask_zero, the output carries the Keras mask ids != 0
// (Tensor::keras_mask), which MultiHeadAttention and the pooling layers downstream honour.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "layers/layer.hpp"

namespace loom::layers {

struct EmbeddingOptions {
  Initializer embeddings_initializer = "uniform";  // Keras: random_uniform(-0.05, 0.05)
  Regularizer embeddings_regularizer = {};  // none by default; a Keras name ("l2"), an object or a callable
  Constraint embeddings_constraint = {};    // applied by the optimizer after each update
  bool mask_zero = false;
  Regularizer activity_regularizer = {};    // Keras's keyword argument of every layer: of the output / batch size
  std::optional<std::string> name = std::nullopt;
};

class Embedding : public Layer {
 public:
  Embedding(std::int64_t input_dim, std::int64_t output_dim, EmbeddingOptions options = {});

  Shape compute_output_shape(const Shape& input_shape) const override;
  bool supports_masking() const override { return options_.mask_zero; }
  /// With mask_zero: ids != 0; otherwise none.
  Tensor compute_mask(const Tensor& ids, const Tensor& mask) const override;

  std::int64_t input_dim() const { return input_dim_; }
  std::int64_t output_dim() const { return output_dim_; }
  /// The options it was made with (saving a model writes them as Keras's config).
  const EmbeddingOptions& options() const { return options_; }
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

 protected:
  std::shared_ptr<Layer> move_into_shared() && override { return std::make_shared<Embedding>(std::move(*this)); }
};

}  // namespace loom::layers
