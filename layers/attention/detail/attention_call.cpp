#include "layers/attention/detail/attention_call.hpp"

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

bool any_symbolic_input(const Tensor& query, const Tensor& value, const MultiHeadAttentionCall& o) {
  return graph::any_symbolic(query, value, o.key, o.query_mask, o.value_mask, o.key_mask, o.attention_mask);
}

std::vector<Tensor> attention_node_inputs(const Tensor& query, const Tensor& value, const MultiHeadAttentionCall& o) {
  return {query, value, o.key, o.query_mask, o.value_mask, o.key_mask, o.attention_mask};
}

}  // namespace loom::layers::detail
