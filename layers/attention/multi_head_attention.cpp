#include "layers/attention/multi_head_attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <tuple>
#include <utility>

#include "framework/autograd/tape.hpp"
#include "framework/graph/symbolic.hpp"
#include "framework/ops/attention.hpp"
#include "framework/ops/ops.hpp"
#include "layers/attention/detail/attention_call.hpp"

namespace loom::layers {

namespace {

char letter(std::int64_t i) { return char('a' + i); }

struct ProjectionEquation {
  std::string equation;
  std::string bias_axes;
  std::int64_t output_rank;
};

/// Keras's _build_proj_equation: `free` batch-like axes kept, `bound` axes contracted with the kernel,
/// `output` new axes from the kernel (which carry the bias).
ProjectionEquation projection_equation(std::int64_t free, std::int64_t bound, std::int64_t output) {
  std::string input, kernel, out, bias;
  for (std::int64_t i = 0; i < free; ++i) {
    input += letter(i);
    out += letter(i);
  }
  for (std::int64_t i = 0; i < bound; ++i) {
    input += letter(free + i);
    kernel += letter(free + i);
  }
  for (std::int64_t i = 0; i < output; ++i) {
    kernel += letter(free + bound + i);
    out += letter(free + bound + i);
    bias += letter(free + bound + i);
  }
  return {input + "," + kernel + "->" + out, bias, std::int64_t(out.size())};
}

/// Keras's _get_output_shape: EinsumDense's output shape without the batch axis, -1 where the input decides.
Shape projection_output_shape(std::int64_t output_rank, const Shape& known_last) {
  Shape shape(std::size_t(output_rank - 1) - known_last.size(), -1);
  shape.insert(shape.end(), known_last.begin(), known_last.end());
  return shape;
}

/// Keras's _build_attention_equation for projected tensors of `rank` [B, <other>, <attention axes>, heads,
/// dim]: scores = einsum(dot, key, query), output = einsum(combine, probabilities, value).
std::pair<std::string, std::string> attention_equations(std::int64_t rank, const std::vector<std::int64_t>& axes) {
  auto is_attention = [&](std::int64_t i) { return std::find(axes.begin(), axes.end(), i) != axes.end(); };
  std::string target, source;
  std::int64_t offset = rank;
  for (std::int64_t i = 0; i < rank; ++i) target += letter(i);
  for (std::int64_t i = 0; i < rank; ++i) source += is_attention(i) ? letter(offset++) : target[std::size_t(i)];
  std::string product;
  for (std::int64_t i = 0; i < rank - 1; ++i)
    if (!is_attention(i)) product += target[std::size_t(i)];  // the batch axes, the heads included
  for (auto a : axes) product += target[std::size_t(a)];
  for (auto a : axes) product += source[std::size_t(a)];
  return {source + "," + target + "->" + product, product + "," + source + "->" + target};
}

Shape with_last(Shape shape, std::int64_t last) {
  shape.back() = last;
  return shape;
}

}  // namespace

MultiHeadAttention::MultiHeadAttention(MultiHeadAttentionOptions options)
    : Layer("multi_head_attention", options.name),
      options_(std::move(options)),
      value_dim_(options_.value_dim.value_or(options_.key_dim)) {
  if (options_.dtype) set_dtype_policy(*options_.dtype);
  const auto& o = options_;
  check(o.num_heads > 0, "{}: num_heads must be a positive integer, got {}", name(), o.num_heads);
  check(o.key_dim > 0, "{}: key_dim must be a positive integer, got {}", name(), o.key_dim);
  check(!o.value_dim || *o.value_dim > 0, "{}: value_dim must be a positive integer or unset, got {}", name(),
        o.value_dim.value_or(0));
  check(o.dropout >= 0.0 && o.dropout < 1.0, "{}: dropout must be in [0, 1), got {}", name(), o.dropout);
  if (o.output_shape) {
    output_shape_ = o.output_shape->dims;
    check(!output_shape_.empty() && std::all_of(output_shape_.begin(), output_shape_.end(),
                                                [](std::int64_t d) { return d > 0; }),
          "{}: output_shape must be positive sizes, got {}", name(), output_shape_);
  }
  if (o.attention_axes) check(!o.attention_axes->empty(), "{}: attention_axes must not be empty", name());
  check(!o.sliding_window || *o.sliding_window > 0, "{}: sliding_window must be a positive integer or unset, got {}",
        name(), o.sliding_window.value_or(0));
  check(!(o.flash_attention == ops::AttentionImpl::Flash && o.dropout > 0.0),
        "{}: Dropout is not supported when flash attention is enabled. Please set dropout to 0.0 to use flash "
        "attention (got dropout = {}).",
        name(), o.dropout);
  if (o.seed) dropout_seeds_ = random::Generator(*o.seed);
}

Shape MultiHeadAttention::compute_output_shape(const Shape& query_shape) const {
  check(query_shape.size() >= 3, "{}: expected a query of rank >= 3 [batch, seq..., features], got {}", name(),
        query_shape);
  if (output_shape_.empty()) return query_shape;
  Shape out(query_shape.begin(), query_shape.end() - 1);
  out.insert(out.end(), output_shape_.begin(), output_shape_.end());
  return out;
}

void MultiHeadAttention::build(const Shape& input_shape) {
  build_from(input_shape, input_shape, input_shape, dtype());
}

void MultiHeadAttention::build_from(const Shape& query_shape, const Shape& value_shape, const Shape& key_shape,
                                    DType dtype) {
  const auto rank = std::int64_t(query_shape.size());
  check(rank >= 3, "{}: expected a query of rank >= 3 [batch, seq..., features], got {}", name(), query_shape);
  check(std::int64_t(value_shape.size()) == rank && std::int64_t(key_shape.size()) == rank,
        "{}: query, value and key must have the same rank, got query {}, value {}, key {}", name(), query_shape,
        value_shape, key_shape);
  check(Shape(value_shape.begin() + 1, value_shape.end() - 1) == Shape(key_shape.begin() + 1, key_shape.end() - 1),
        "{}: all dimensions of value and key except the batch and the last must be equal, got value {} and key {}",
        name(), value_shape, key_shape);

  // The projected tensors are [B, <input axes 1..rank-2>, heads, dim]; attention runs over some of the input's
  // middle axes (Keras normalizes a negative axis against the projected rank).
  const std::int64_t projected_rank = rank + 1;
  std::vector<std::int64_t> axes;
  if (options_.attention_axes) {
    for (auto a : *options_.attention_axes) {
      const std::int64_t axis = a >= 0 ? a : projected_rank - 1 + a;
      check(axis >= 1 && axis <= rank - 2 && std::find(axes.begin(), axes.end(), axis) == axes.end(),
            "{}: attention_axes {} must be distinct axes of the query {} other than the batch and feature axes "
            "(1 .. {})",
            name(), *options_.attention_axes, query_shape, rank - 2);
      axes.push_back(axis);
    }
  } else {
    for (std::int64_t i = 1; i <= rank - 2; ++i) axes.push_back(i);
  }

  rank_ = rank;
  query_features_ = query_shape.back();
  value_features_ = value_shape.back();
  key_features_ = key_shape.back();
  attention_axes_ = axes;
  std::tie(dot_product_equation_, combine_equation_) = attention_equations(projected_rank, axes);
  const auto score_rank = std::int64_t(dot_product_equation_.size() - dot_product_equation_.find('>') - 1);
  softmax_axes_.clear();
  for (std::int64_t i = score_rank - std::int64_t(axes.size()); i < score_rank; ++i) softmax_axes_.push_back(i);

  // The children in Keras's order, which is the order of the weights: query, key, [gate], value, output.
  const ProjectionEquation proj = projection_equation(rank - 1, 1, 2);
  auto projection = [&](const char* child, std::int64_t head_size, const Shape& input_shape,
                        const std::string& activation) {
    EinsumDense& dense = add_layer(EinsumDense(
        proj.equation, projection_output_shape(proj.output_rank, {options_.num_heads, head_size}),
        {.activation = activation,
         .bias_axes = options_.use_bias ? std::optional(proj.bias_axes) : std::nullopt,
         .kernel_initializer = options_.kernel_initializer,
         .bias_initializer = options_.bias_initializer,
         .name = child,
         .dtype = dtype_policy().name}));
    dense.maybe_build(input_shape, dtype);
    return &dense;
  };
  query_dense_ = projection("query", options_.key_dim, query_shape, "");
  key_dense_ = projection("key", options_.key_dim, key_shape, "");
  if (options_.use_gate) gate_dense_ = projection("gate", value_dim_, query_shape, "sigmoid");
  value_dense_ = projection("value", value_dim_, value_shape, "");

  const Shape out_dims = output_shape_.empty() ? Shape{query_shape.back()} : output_shape_;
  const ProjectionEquation out = projection_equation(rank - 1, 2, std::int64_t(out_dims.size()));
  output_dense_ = &add_layer(EinsumDense(
      out.equation, projection_output_shape(out.output_rank, out_dims),
      {.bias_axes = options_.use_bias ? std::optional(out.bias_axes) : std::nullopt,
       .kernel_initializer = options_.kernel_initializer,
       .bias_initializer = options_.bias_initializer,
       .name = "attention_output",
       .dtype = dtype_policy().name}));
  Shape attended = with_last(query_dense_->compute_output_shape(query_shape), value_dim_);
  output_dense_->maybe_build(attended, dtype);
}

void MultiHeadAttention::check_inputs(const Tensor& query, const Tensor& value, const Tensor& key) const {
  check(query.defined() && value.defined() && key.defined(), "{}: query, value and key must be defined tensors",
        name());
  check(is_floating(query.dtype()) && query.dtype() == value.dtype() && query.dtype() == key.dtype(),
        "{}: query, value and key must all be float32 or all float64, got query {} {}, value {} {}, key {} {}",
        name(), query.dtype(), query.shape(), value.dtype(), value.shape(), key.dtype(), key.shape());
  check(query.dtype() == dtype(), "{}: the layer was built for {} inputs, got query {} {}", name(), dtype(),
        query.dtype(), query.shape());
  check(query.ndim() == rank_ && value.ndim() == rank_ && key.ndim() == rank_,
        "{}: expected query, value and key of rank {} (as when the layer was built), got query {}, value {}, key {}",
        name(), rank_, query.shape(), value.shape(), key.shape());
  check(query.size(0) == value.size(0) && query.size(0) == key.size(0),
        "{}: query, value and key must have the same batch size, got query {}, value {}, key {}", name(),
        query.shape(), value.shape(), key.shape());
  check(Shape(value.shape().begin() + 1, value.shape().end() - 1) ==
            Shape(key.shape().begin() + 1, key.shape().end() - 1),
        "{}: value {} and key {} must have the same sequence dimensions", name(), value.shape(), key.shape());
  check(query.size(-1) == query_features_ && value.size(-1) == value_features_ && key.size(-1) == key_features_,
        "{}: the layer was built for feature sizes query {}, value {}, key {}, got query {}, value {}, key {}", name(),
        query_features_, value_features_, key_features_, query.shape(), value.shape(), key.shape());
}

Tensor MultiHeadAttention::explicit_mask(const Tensor& query, const Tensor& value,
                                         const MultiHeadAttentionCall& o) const {
  const bool input_masks = o.query_mask.defined() || o.value_mask.defined() || o.key_mask.defined();
  check(rank_ == 3 || !(input_masks || o.use_causal_mask || options_.sliding_window),
        "{}: query_mask, value_mask, key_mask, use_causal_mask and sliding_window need inputs of rank 3 "
        "[batch, seq, features], got query {} and value {}; use attention_mask",
        name(), query.shape(), value.shape());
  if (rank_ == 3) return detail::combine_attention_masks(name(), query, value, o, options_.num_heads, "heads");
  if (!o.attention_mask.defined()) return Tensor();
  const Tensor& a = o.attention_mask;
  detail::check_attention_mask_dtype(name(), a);
  // Other ranks: Keras inserts axes at -2*len(attention_axes)-1 up to the scores' rank; checked there.
  const auto axes = std::int64_t(attention_axes_.size());
  check(a.ndim() >= 2 * axes && a.ndim() <= rank_ + axes,
        "{}: attention_mask of shape {} must have between {} and {} dimensions for query {}", name(), a.shape(),
        2 * axes, rank_ + axes, query.shape());
  return ops::cast(a, DType::boolean);
}

namespace {


}  // namespace

Tensor MultiHeadAttention::masked_softmax(const Tensor& scores, const Tensor& mask) const {
  auto softmax = [&](const Tensor& x) {
    if (softmax_axes_.size() == 1) return ops::softmax(x, -1);
    return ops::exp(x - ops::logsumexp(x, softmax_axes_, /*keepdims=*/true));
  };
  if (!mask.defined()) return softmax(scores);
  // Keras's Softmax with a mask: masked logits become -1e9, and masked probabilities exactly 0, so a row
  // with no key left is all zeros instead of uniform.
  const DType dtype = scores.dtype();
  const Tensor p = softmax(ops::where(mask, scores, Tensor::scalar(-1e9, dtype)));
  return ops::where(mask, p, Tensor::scalar(0.0, dtype));
}

AttentionWithScores MultiHeadAttention::run(const Tensor& query, const Tensor& value_in,
                                            const MultiHeadAttentionCall& given, bool want_scores) {
  check(query.defined() && value_in.defined(), "{}: query and value must be defined tensors", name());
  // As Keras: the masks the inputs carry fill those not given.
  MultiHeadAttentionCall o = given;
  if (!o.query_mask.defined()) o.query_mask = query.keras_mask();
  if (!o.value_mask.defined()) o.value_mask = value_in.keras_mask();
  if (!o.key_mask.defined() && o.key.defined()) o.key_mask = o.key.keras_mask();
  const Tensor& key_in = o.key.defined() ? o.key : value_in;
  if (!built()) {
    check(is_floating(query.dtype()), "{}: query must be float32 or float64, got {} of shape {}", name(),
          query.dtype(), query.shape());
    NoGradGuard no_grad;
    build_from(query.shape(), value_in.shape(), key_in.shape(), query.dtype());
    mark_built(query.dtype());
  }
  check_inputs(query, value_in, key_in);

  const Tensor mask = explicit_mask(query, value_in, o);
  const Tensor gate = gate_dense_ != nullptr ? (*gate_dense_)(query) : Tensor();
  const Tensor q = (*query_dense_)(query);    // [B, T, N, H]
  const Tensor k = (*key_dense_)(key_in);     // [B, S, N, H]
  const Tensor v = (*value_dense_)(value_in);  // [B, S, N, Hv]
  const double scale = 1.0 / std::sqrt(double(options_.key_dim));
  const std::int64_t window = options_.sliding_window.value_or(0);

  Tensor attended, scores;
  if (options_.dropout == 0.0 && rank_ == 3) {
    // Keras's fused path: the op on [B, N, T, d] views; causal and window stay flags so a tiled kernel can
    // skip whole blocks. Scores come from the same op (with flash: recomputed from its saved logsumexp).
    const std::vector<std::int64_t> heads_first{0, 2, 1, 3};
    const ops::AttentionOptions attention{.mask = mask.defined() && mask.ndim() == 3 ? ops::expand_dims(mask, 1) : mask,
                                          .causal = o.use_causal_mask,
                                          .scale = scale,
                                          .sliding_window = window,
                                          .impl = options_.flash_attention};
    // Under mixed_bfloat16 the op reads bf16 q, k and v (and returns float32).
    const Tensor qh = matmul_operand(ops::permute(q, heads_first)), kh = matmul_operand(ops::permute(k, heads_first));
    const Tensor vh = matmul_operand(ops::permute(v, heads_first));
    Tensor o4;
    if (want_scores) {
      auto both = ops::scaled_dot_product_attention_with_probabilities(qh, kh, vh, attention);
      o4 = both.output;
      scores = both.probabilities;
    } else {
      o4 = detail::attend_uniformly_where_fully_masked(ops::scaled_dot_product_attention(qh, kh, vh, attention),
                                                       ops::permute(v, heads_first), attention);
    }
    attended = ops::permute(o4, heads_first);  // [B, T, N, Hv]
  } else {
    // Keras's manual path: the query scaled, einsum scores, masked softmax, dropout, einsum combine.
    scores = ops::einsum(dot_product_equation_, matmul_operand(k), matmul_operand(q * scale));  // [B, N, T, S] for rank 3
    const auto score_rank = scores.ndim();
    Tensor full = mask;
    if (full.defined()) {
      const auto at = -2 * std::int64_t(attention_axes_.size()) - 1;
      while (full.ndim() < score_rank) full = ops::expand_dims(full, at);
      check(broadcasts_to(full.shape(), scores.shape()),
            "{}: attention_mask of shape {} does not broadcast to the attention scores {} (after Keras's expansion "
            "to {})",
            name(), o.attention_mask.defined() ? o.attention_mask.shape() : mask.shape(), scores.shape(),
            full.shape());
    }
    if (o.use_causal_mask || window > 0) {
      const Tensor structural = detail::structural_mask(scores.size(-2), scores.size(-1), o.use_causal_mask, window);
      full = full.defined() ? ops::logical_and(full, structural) : structural;
    }
    scores = masked_softmax(scores, full);
    Tensor dropped = scores;
    if (options_.dropout > 0.0 && o.training)  // a seed is drawn only for a mask actually drawn, as Keras
      dropped = ops::dropout(scores, options_.dropout, /*training=*/true,
                             options_.seed ? std::optional(dropout_seeds_.next()) : std::nullopt);
    attended = ops::einsum(combine_equation_, matmul_operand(dropped), matmul_operand(v));
  }
  if (gate.defined()) attended = attended * gate;
  const Tensor output = (*output_dense_)(attended).with_keras_mask(query.keras_mask());
  note_output(output);
  return {output, scores};
}

std::vector<Tensor> MultiHeadAttention::record_attention(const Tensor& query, const Tensor& value,
                                                         const MultiHeadAttentionCall& options, bool want_scores,
                                                         std::shared_ptr<Layer> owner) {
  return record_call(detail::attention_node_inputs(query, value, options),
                     detail::attention_node_call<MultiHeadAttention>(options, want_scores), std::move(owner),
                     {{"use_causal_mask", options.use_causal_mask}});
}

Tensor MultiHeadAttention::operator()(const Tensor& query, const Tensor& value,
                                      const MultiHeadAttentionCall& options) & {
  if (detail::any_symbolic_input(query, value, options))
    return record_attention(query, value, options, false, nullptr)[0];
  return run_rematerialized(query, value, options, false).output;
}

Tensor MultiHeadAttention::operator()(const Tensor& query, const Tensor& value,
                                      const MultiHeadAttentionCall& options) && {
  if (!detail::any_symbolic_input(query, value, options)) return (*this)(query, value, options);
  std::shared_ptr<Layer> owned = std::move(*this).move_into_shared();
  auto& self = static_cast<MultiHeadAttention&>(*owned);
  return self.record_attention(query, value, options, false, std::move(owned))[0];
}

AttentionWithScores MultiHeadAttention::call_with_scores(const Tensor& query, const Tensor& value,
                                                         const MultiHeadAttentionCall& options) {
  if (detail::any_symbolic_input(query, value, options)) {
    auto outputs = record_attention(query, value, options, true, nullptr);
    return {outputs[0], outputs[1]};
  }
  return run_rematerialized(query, value, options, true);
}

AttentionWithScores MultiHeadAttention::run_rematerialized(const Tensor& query, const Tensor& value,
                                          const MultiHeadAttentionCall& options, bool want_scores) {
  if (!remat_mode()) return run(query, value, options, want_scores);
  const auto output_shapes = [&] {
    std::vector<Shape> shapes{compute_output_shape(query.shape())};
    if (want_scores) shapes.push_back(detail::attention_scores_shape(query, value, options_.num_heads));
    return shapes;
  };
  const std::vector<Tensor> out = rematerialized_call(detail::attention_run_inputs(query, value, options), options.training, output_shapes,
                                                      detail::attention_run_call<MultiHeadAttention>(&MultiHeadAttention::run, options, want_scores));
  return {out[0], want_scores ? out[1] : Tensor()};
}

Tensor MultiHeadAttention::call(const Tensor& x, bool training) {
  return run(x, x, {.training = training}, false).output;
}

}  // namespace loom::layers
