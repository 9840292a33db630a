#include "layers/attention/group_query_attention.hpp"

#include <cmath>
#include <utility>

#include "framework/autograd/tape.hpp"
#include "framework/graph/symbolic.hpp"
#include "framework/ops/attention.hpp"
#include "framework/ops/ops.hpp"
#include "layers/attention/detail/attention_call.hpp"

namespace loom::layers {

GroupQueryAttention::GroupQueryAttention(GroupQueryAttentionOptions options)
    : Layer("grouped_query_attention", options.name), options_(std::move(options)) {
  if (options_.dtype) set_dtype_policy(*options_.dtype);
  const auto& o = options_;
  check(o.head_dim > 0, "{}: head_dim must be a positive integer, got {}", name(), o.head_dim);
  check(o.num_query_heads > 0, "{}: num_query_heads must be a positive integer, got {}", name(), o.num_query_heads);
  check(o.num_key_value_heads > 0, "{}: num_key_value_heads must be a positive integer, got {}", name(),
        o.num_key_value_heads);
  check(o.num_query_heads % o.num_key_value_heads == 0,
        "{}: num_query_heads must be divisible by num_key_value_heads, got num_query_heads = {} and "
        "num_key_value_heads = {}",
        name(), o.num_query_heads, o.num_key_value_heads);
  check(o.dropout >= 0.0 && o.dropout < 1.0, "{}: dropout must be in [0, 1), got {}", name(), o.dropout);
  check(!o.sliding_window || *o.sliding_window > 0, "{}: sliding_window must be a positive integer or unset, got {}",
        name(), o.sliding_window.value_or(0));
  check(!(o.flash_attention == ops::AttentionImpl::Flash && o.dropout > 0.0),
        "{}: Dropout is not supported when flash attention is enabled. Please set dropout to 0.0 to use flash "
        "attention (got dropout = {}).",
        name(), o.dropout);
  if (o.seed) dropout_seeds_ = random::Generator(*o.seed);
}

Shape GroupQueryAttention::compute_output_shape(const Shape& query_shape) const {
  check(query_shape.size() == 3, "{}: expected a query of rank 3 [batch, seq, features], got {}", name(),
        query_shape);
  return query_shape;
}

void GroupQueryAttention::build(const Shape& input_shape) {
  build_from(input_shape, input_shape, input_shape, dtype());
}

void GroupQueryAttention::build_from(const Shape& query_shape, const Shape& value_shape, const Shape& key_shape,
                                     DType dtype) {
  check(query_shape.size() == 3 && value_shape.size() == 3 && key_shape.size() == 3,
        "{}: expected query, value and key of rank 3 [batch, seq, features], got query {}, value {}, key {}", name(),
        query_shape, value_shape, key_shape);
  check(value_shape[1] == key_shape[1], "{}: value {} and key {} must have the same sequence length", name(),
        value_shape, key_shape);
  query_features_ = query_shape.back();
  value_features_ = value_shape.back();
  key_features_ = key_shape.back();
  const std::int64_t hq = options_.num_query_heads, hkv = options_.num_key_value_heads, dim = options_.head_dim;
  // The children in Keras's order, which is the order of the weights: query, key, [gate], value, output.
  auto projection = [&](const char* child, const char* equation, const char* bias_axes, std::int64_t heads,
                        const Shape& input_shape, const std::string& activation) {
    EinsumDense& dense = add_layer(EinsumDense(
        equation, {-1, heads, dim},
        {.activation = activation,
         .bias_axes = options_.use_bias ? std::optional<std::string>(bias_axes) : std::nullopt,
         .kernel_initializer = options_.kernel_initializer,
         .bias_initializer = options_.bias_initializer,
         .name = child,
         .dtype = dtype_policy().name}));
    dense.maybe_build(input_shape, dtype);
    return &dense;
  };
  query_dense_ = projection("query", "bqm,muh->bquh", "uh", hq, query_shape, "");
  key_dense_ = projection("key", "bkm,mvh->bkvh", "vh", hkv, key_shape, "");
  if (options_.use_gate) gate_dense_ = projection("gate", "bqm,muh->bquh", "uh", hq, query_shape, "sigmoid");
  value_dense_ = projection("value", "bkm,mvh->bkvh", "vh", hkv, value_shape, "");
  output_dense_ = &add_layer(EinsumDense(
      "bquh,uhm->bqm", {-1, query_features_},
      {.bias_axes = options_.use_bias ? std::optional<std::string>("m") : std::nullopt,
       .kernel_initializer = options_.kernel_initializer,
       .bias_initializer = options_.bias_initializer,
       .name = "attention_output",
       .dtype = dtype_policy().name}));
  output_dense_->maybe_build({query_shape[0], query_shape[1], hq, dim}, dtype);
}

void GroupQueryAttention::check_inputs(const Tensor& query, const Tensor& value, const Tensor& key) const {
  check(query.defined() && value.defined() && key.defined(), "{}: query, value and key must be defined tensors",
        name());
  check(is_floating(query.dtype()) && query.dtype() == value.dtype() && query.dtype() == key.dtype(),
        "{}: query, value and key must all be float32 or all float64, got query {} {}, value {} {}, key {} {}",
        name(), query.dtype(), query.shape(), value.dtype(), value.shape(), key.dtype(), key.shape());
  check(query.dtype() == dtype(), "{}: the layer was built for {} inputs, got query {} {}", name(), dtype(),
        query.dtype(), query.shape());
  check(query.ndim() == 3 && value.ndim() == 3 && key.ndim() == 3,
        "{}: expected query, value and key of rank 3 [batch, seq, features], got query {}, value {}, key {}", name(),
        query.shape(), value.shape(), key.shape());
  check(query.size(0) == value.size(0) && query.size(0) == key.size(0),
        "{}: query, value and key must have the same batch size, got query {}, value {}, key {}", name(),
        query.shape(), value.shape(), key.shape());
  check(value.size(1) == key.size(1), "{}: value {} and key {} must have the same sequence length", name(),
        value.shape(), key.shape());
  check(query.size(-1) == query_features_ && value.size(-1) == value_features_ && key.size(-1) == key_features_,
        "{}: the layer was built for feature sizes query {}, value {}, key {}, got query {}, value {}, key {}", name(),
        query_features_, value_features_, key_features_, query.shape(), value.shape(), key.shape());
}

AttentionWithScores GroupQueryAttention::run(const Tensor& query, const Tensor& value_in,
                                             const GroupQueryAttentionCall& given, bool want_scores) {
  check(query.defined() && value_in.defined(), "{}: query and value must be defined tensors", name());
  // As Keras: the masks the inputs carry fill those not given.
  GroupQueryAttentionCall o = given;
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

  const Tensor mask =
      detail::combine_attention_masks(name(), query, value_in, o, options_.num_query_heads, "num_query_heads");
  const Tensor gate = gate_dense_ != nullptr ? (*gate_dense_)(query) : Tensor();
  const std::vector<std::int64_t> heads_first{0, 2, 1, 3};
  const Tensor q = ops::permute((*query_dense_)(query), heads_first);   // [B, Hq, T, h]
  const Tensor k = ops::permute((*key_dense_)(key_in), heads_first);    // [B, Hkv, S, h]
  const Tensor v = ops::permute((*value_dense_)(value_in), heads_first);  // [B, Hkv, S, h]
  // Keras expands a [B, T, S] mask at axis -3 to [B, 1, T, S]; causal and window stay flags so that the
  // tiled kernel can skip whole blocks.
  const ops::AttentionOptions attention{.mask = mask.defined() && mask.ndim() == 3 ? ops::expand_dims(mask, 1) : mask,
                                        .causal = o.use_causal_mask,
                                        .scale = 1.0 / std::sqrt(double(options_.head_dim)),
                                        .sliding_window = options_.sliding_window.value_or(0),
                                        .impl = options_.flash_attention};
  // Under mixed_bfloat16 the attention ops read bf16 q, k and v (and return float32).
  const Tensor qa = matmul_operand(q), ka = matmul_operand(k), va = matmul_operand(v);
  Tensor attended, scores;  // attended [B, Hq, T, h]
  if (options_.dropout > 0.0 && o.training) {
    // Keras's manual path: dropout on the probabilities [B, Hq, T, S], then each group's query heads, stacked
    // along the rows, against their key/value head (the values are not repeated either).
    scores = ops::attention_probabilities(qa, ka, attention);
    const Tensor dropped = ops::dropout(scores, options_.dropout, /*training=*/true,
                                        options_.seed ? std::optional(dropout_seeds_.next()) : std::nullopt);
    const std::int64_t batch = q.size(0), hq = q.size(1), hkv = k.size(1), t = q.size(2), s = k.size(2);
    attended = ops::reshape(
        ops::matmul(matmul_operand(ops::reshape(dropped, {batch, hkv, hq / hkv * t, s})), va),
        {batch, hq, t, options_.head_dim});
  } else if (want_scores) {
    auto both = ops::scaled_dot_product_attention_with_probabilities(qa, ka, va, attention);
    attended = both.output;
    scores = both.probabilities;
  } else {
    attended = detail::attend_uniformly_where_fully_masked(ops::scaled_dot_product_attention(qa, ka, va, attention),
                                                            v, attention);
  }
  attended = ops::permute(attended, heads_first);  // [B, T, Hq, h]
  if (gate.defined()) attended = attended * gate;
  const Tensor output = (*output_dense_)(attended).with_keras_mask(query.keras_mask());
  note_output(output);
  return {output, scores};
}

std::vector<Tensor> GroupQueryAttention::record_attention(const Tensor& query, const Tensor& value,
                                                          const GroupQueryAttentionCall& options, bool want_scores,
                                                          std::shared_ptr<Layer> owner) {
  return record_call(detail::attention_node_inputs(query, value, options),
                     detail::attention_node_call<GroupQueryAttention>(options, want_scores), std::move(owner),
                     {{"use_causal_mask", options.use_causal_mask}});
}

Tensor GroupQueryAttention::operator()(const Tensor& query, const Tensor& value,
                                       const GroupQueryAttentionCall& options) & {
  if (detail::any_symbolic_input(query, value, options))
    return record_attention(query, value, options, false, nullptr)[0];
  return run_rematerialized(query, value, options, false).output;
}

Tensor GroupQueryAttention::operator()(const Tensor& query, const Tensor& value,
                                       const GroupQueryAttentionCall& options) && {
  if (!detail::any_symbolic_input(query, value, options)) return (*this)(query, value, options);
  std::shared_ptr<Layer> owned = std::move(*this).move_into_shared();
  auto& self = static_cast<GroupQueryAttention&>(*owned);
  return self.record_attention(query, value, options, false, std::move(owned))[0];
}

AttentionWithScores GroupQueryAttention::call_with_scores(const Tensor& query, const Tensor& value,
                                                          const GroupQueryAttentionCall& options) {
  if (detail::any_symbolic_input(query, value, options)) {
    auto outputs = record_attention(query, value, options, true, nullptr);
    return {outputs[0], outputs[1]};
  }
  return run_rematerialized(query, value, options, true);
}

AttentionWithScores GroupQueryAttention::run_rematerialized(const Tensor& query, const Tensor& value,
                                          const GroupQueryAttentionCall& options, bool want_scores) {
  if (!remat_mode()) return run(query, value, options, want_scores);
  const auto output_shapes = [&] {
    std::vector<Shape> shapes{compute_output_shape(query.shape())};
    if (want_scores) shapes.push_back(detail::attention_scores_shape(query, value, options_.num_query_heads));
    return shapes;
  };
  const std::vector<Tensor> out = rematerialized_call(detail::attention_run_inputs(query, value, options), options.training, output_shapes,
                                                      detail::attention_run_call<GroupQueryAttention>(&GroupQueryAttention::run, options, want_scores));
  return {out[0], want_scores ? out[1] : Tensor()};
}

Tensor GroupQueryAttention::call(const Tensor& x, bool training) {
  return run(x, x, {.training = training}, false).output;
}

}  // namespace loom::layers
