#include "layers/core/embedding.hpp"

#include "framework/ops/ops.hpp"

namespace loom::layers {

Embedding::Embedding(std::int64_t input_dim, std::int64_t output_dim, EmbeddingOptions options)
    : Layer("embedding", options.name), input_dim_(input_dim), output_dim_(output_dim), options_(std::move(options)) {
  check(input_dim > 0, "{}: input_dim must be positive, got {}", name(), input_dim);
  check(output_dim > 0, "{}: output_dim must be positive, got {}", name(), output_dim);
  set_activity_regularizer(options_.activity_regularizer);
}

Shape Embedding::compute_output_shape(const Shape& input_shape) const {
  Shape out = input_shape;
  out.push_back(output_dim_);
  return out;
}

void Embedding::build(const Shape&) {
  embeddings_ = add_weight("embeddings", {input_dim_, output_dim_}, options_.embeddings_initializer, true, std::nullopt,
                           options_.embeddings_regularizer, options_.embeddings_constraint);
}

Tensor Embedding::call(const Tensor& ids, bool) {
  check(ids.dtype() == DType::i64, "{}: expected int64 ids, got {} of shape {}", name(), ids.dtype(), ids.shape());
  // Checked here (ops::take checks too) so that the message names the layer and the table size.
  const std::vector<std::int64_t> v = ids.to_vector<std::int64_t>();
  for (std::size_t i = 0; i < v.size(); ++i)
    check(v[i] >= 0 && v[i] < input_dim_, "{}: id {} (element {} of ids of shape {}) is out of range [0, {})", name(),
          v[i], i, ids.shape(), input_dim_);
  return ops::take(embeddings_, ids, 0);
}

Tensor Embedding::compute_mask(const Tensor& ids, const Tensor&) const {
  if (!options_.mask_zero) return {};
  return ops::not_equal(ids, Tensor::scalar(0, ids.dtype()));
}

}  // namespace loom::layers
