#include "layers/attention/detail/attention_call.hpp"

#include <cstdlib>

#include "framework/autograd/tape.hpp"
#include "framework/graph/symbolic.hpp"
#include "framework/ops/ops.hpp"

namespace loom::layers::detail {

namespace {

/// A query, value or key mask: boolean or numeric, of exactly `expected`'s shape, as a boolean.
Tensor checked_input_mask(const std::string& layer, const Tensor& mask, const char* what, const Shape& expected) {
  check(mask.dtype() == DType::boolean || mask.dtype() == DType::i64 || is_floating(mask.dtype()),
        "{}: {} must be boolean or numeric (nonzero = may attend), got {} of shape {}", layer, what, mask.dtype(),
        mask.shape());
  check(mask.shape() == expected, "{}: {} must have shape {}, got {}", layer, what, expected, mask.shape());
  return ops::cast(mask, DType::boolean);
}

}  // namespace

void check_attention_mask_dtype(const std::string& layer, const Tensor& mask) {
  check(mask.dtype() == DType::boolean || mask.dtype() == DType::i64 || is_floating(mask.dtype()),
        "{}: attention_mask must be boolean or numeric (nonzero = may attend), got {} of shape {}", layer,
        mask.dtype(), mask.shape());
}

Tensor combine_attention_masks(const std::string& layer, const Tensor& query, const Tensor& value,
                               const MultiHeadAttentionCall& o, std::int64_t heads, const char* heads_name) {
  Tensor mask;  // Keras's auto mask: [B, T, 1] & [B, 1, S] & [B, 1, S]
  auto both = [&](const Tensor& m) { mask = mask.defined() ? ops::logical_and(mask, m) : m; };
  const std::int64_t batch = query.size(0), t = query.size(1), s = value.size(1);
  if (o.query_mask.defined())
    both(ops::expand_dims(checked_input_mask(layer, o.query_mask, "query_mask", {batch, t}), -1));
  if (o.value_mask.defined())
    both(ops::expand_dims(checked_input_mask(layer, o.value_mask, "value_mask", {batch, s}), -2));
  if (o.key_mask.defined()) both(ops::expand_dims(checked_input_mask(layer, o.key_mask, "key_mask", {batch, s}), -2));
  if (!o.attention_mask.defined()) return mask;

  const Tensor& a = o.attention_mask;
  check_attention_mask_dtype(layer, a);
  const bool per_head = a.ndim() == 4;
  check((a.ndim() >= 2 && a.ndim() <= 3 && broadcasts_to(a.shape(), {batch, t, s})) ||
            (per_head && broadcasts_to(a.shape(), {batch, heads, t, s})),
        "{}: attention_mask of shape {} must broadcast to [batch, T, S] = {} (or [batch, {}, T, S] = {}), for "
        "query {} and value {}",
        layer, a.shape(), Shape{batch, t, s}, heads_name, Shape{batch, heads, t, s}, query.shape(), value.shape());
  Tensor attention = ops::cast(a, DType::boolean);
  if (!mask.defined()) return attention;
  // The auto mask is [B, T, S]-like: put it under a per-head mask's heads axis (Keras would align it
  // right-to-left there, misplacing the batch axis).
  return ops::logical_and(attention, per_head ? ops::expand_dims(mask, 1) : mask);
}

Tensor structural_mask(std::int64_t t, std::int64_t s, bool causal, std::int64_t window) {
  Tensor structural = Tensor::zeros({1, 1, t, s}, DType::boolean);
  bool* allowed = structural.data<bool>();
  for (std::int64_t i = 0; i < t; ++i)
    for (std::int64_t j = 0; j < s; ++j)
      allowed[i * s + j] = (!causal || j <= i) && (window == 0 || std::abs(i - j) < window);
  return structural;
}

Tensor attend_uniformly_where_fully_masked(const Tensor& attended, const Tensor& v,
                                           const ops::AttentionOptions& attention) {
  if (!attention.mask.defined() || v.size(2) == 0) return attended;
  const Tensor has_key = [&] {  // [.., T, 1]: which rows may attend a key; depends on the mask alone
    NoGradGuard no_grad;
    Tensor allowed = ops::cast(attention.mask, DType::boolean);
    if (attention.causal || attention.sliding_window > 0)
      allowed = ops::logical_and(allowed, structural_mask(attended.size(2), v.size(2), attention.causal,
                                                          attention.sliding_window));
    return ops::greater(ops::max(ops::cast(allowed, DType::f32), {-1}, /*keepdims=*/true),
                        Tensor::scalar(0.0, DType::f32));
  }();
  if (ops::min(ops::cast(has_key, DType::f32)).item<double>() > 0.0) return attended;
  const std::int64_t batch = v.size(0), kv_heads = v.size(1), heads = attended.size(1), dv = v.size(3);
  Tensor mean = ops::mean(v, {2}, /*keepdims=*/true);  // [B, Hkv, 1, dv]
  if (kv_heads != heads)  // each key/value head serves its group of query heads
    mean = ops::reshape(ops::broadcast_to(ops::reshape(mean, {batch, kv_heads, 1, 1, dv}),
                                          {batch, kv_heads, heads / kv_heads, 1, dv}),
                        {batch, heads, 1, dv});
  return ops::where(has_key, attended, mean);
}

bool any_symbolic_input(const Tensor& query, const Tensor& value, const MultiHeadAttentionCall& o) {
  return graph::any_symbolic(query, value, o.key, o.query_mask, o.value_mask, o.key_mask, o.attention_mask);
}

std::vector<Tensor> attention_node_inputs(const Tensor& query, const Tensor& value, const MultiHeadAttentionCall& o) {
  return {query, value, o.key, o.query_mask, o.value_mask, o.key_mask, o.attention_mask};
}

Shape attention_scores_shape(const Tensor& query, const Tensor& value, std::int64_t heads) {
  Shape shape{query.ndim() > 0 ? query.size(0) : 1, heads};
  for (const Tensor* t : {&query, &value})
    for (std::int64_t i = 1; i + 1 < t->ndim(); ++i) shape.push_back(t->size(i));
  return shape;
}

std::vector<Tensor> attention_run_inputs(const Tensor& query, const Tensor& value, const MultiHeadAttentionCall& o) {
  if (o.key.defined()) return {query, value, o.key};
  return {query, value};
}

}  // namespace loom::layers::detail
