#include "framework/ops/attention.hpp"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string_view>

#include "framework/autograd/record.hpp"
#include "framework/autograd/tape.hpp"
#include "framework/graph/symbolic.hpp"
#include "framework/kernels/dispatch.hpp"
#include "framework/kernels/flash_attention.hpp"
#include "framework/kernels/strided.hpp"
#include "framework/ops/elementwise.hpp"
#include "framework/ops/linalg.hpp"
#include "framework/ops/nn.hpp"
#include "framework/ops/shape.hpp"
#include "framework/tensor/detail/tensor_impl.hpp"

namespace loom::ops {

namespace {

/// Rejects anything the math path cannot give a meaningful result for; `v` is undefined for
/// attention_probabilities.
void validate(std::string_view op, const Tensor& q, const Tensor& k, const Tensor* v, const AttentionOptions& o) {
  check(q.defined() && k.defined() && (v == nullptr || v->defined()), "{}: q, k{} must be defined tensors", op,
        v != nullptr ? " and v" : "");
  const Shape none;
  const Shape& v_shape = v != nullptr ? v->shape() : none;
  check(q.ndim() == 4 && k.ndim() == 4 && (v == nullptr || v->ndim() == 4),
        "{}: expected q, k{} of rank 4 [batch, heads, seq, head_dim], got q {}, k {}{}", op,
        v != nullptr ? " and v" : "", q.shape(), k.shape(), v != nullptr ? fmt::format(", v {}", v_shape) : "");
  check(is_differentiable(q.dtype()) && q.dtype() == k.dtype() && (v == nullptr || v->dtype() == q.dtype()),
        "{}: q, k{} must all be float32, all float64 or all bf16, got q {}, k {}{}", op, v != nullptr ? " and v" : "",
        q.dtype(), k.dtype(), v != nullptr ? fmt::format(", v {}", v->dtype()) : "");
  check(q.size(0) == k.size(0), "{}: q {} and k {} must have the same batch (dimension 0; it is not broadcast)", op,
        q.shape(), k.shape());
  check(k.size(1) == q.size(1) || (k.size(1) > 0 && q.size(1) % k.size(1) == 0),
        "{}: the key/value heads must divide the query heads (grouped-query attention): q {} has {} heads, k {} has "
        "{}",
        op, q.shape(), q.size(1), k.shape(), k.size(1));
  check(q.size(3) == k.size(3), "{}: q {} and k {} must have the same head_dim (last dimension): {} != {}", op,
        q.shape(), k.shape(), q.size(3), k.size(3));
  check(q.size(3) > 0, "{}: head_dim must be positive, got q {}", op, q.shape());
  if (v != nullptr)
    check(v->size(0) == k.size(0) && v->size(1) == k.size(1) && v->size(2) == k.size(2),
          "{}: k {} and v {} must have the same batch, heads and key length (dimensions 0, 1 and 2)", op, k.shape(),
          v_shape);
  if (o.mask.defined()) {
    const Shape target{q.size(0), q.size(1), q.size(2), k.size(2)};
    check(o.mask.dtype() == DType::boolean || is_floating(o.mask.dtype()),
          "{}: the mask must be boolean or float (true / nonzero = may attend), got {} of shape {}", op,
          o.mask.dtype(), o.mask.shape());
    check(broadcasts_to(o.mask.shape(), target),
          "{}: mask of shape {} cannot be broadcast to [batch, heads, q_seq, k_seq] = {}", op, o.mask.shape(), target);
  }
  check(o.sliding_window >= 0, "{}: sliding_window must be >= 0 (0 = no window), got {}", op, o.sliding_window);
  if (o.scale)
    check(std::isfinite(*o.scale) && *o.scale > 0.0, "{}: scale must be finite and > 0, got {}", op, *o.scale);
}

/// Which keys each query may attend, as one boolean tensor [mask batch, mask heads, Nq, Nk] (the mask's own
/// batch and heads, 1 where it broadcasts), plus a 0/1 factor [.., Nq, 1] saying whether a row has any.
/// Built with a plain loop: it depends only on the mask and options, never on a differentiated tensor.
struct Allowed {
  Tensor keys;
  Tensor row_has_any;
  bool every_row_has_one = true;
};

Allowed allowed_keys(const AttentionOptions& o, std::int64_t nq, std::int64_t nk, DType dtype) {
  Shape shape{1, 1, nq, nk};
  Strides mask_strides(4, 0);  // 0 where the mask broadcasts, so one loop reads any mask shape
  const std::int64_t mask_rank = o.mask.defined() ? o.mask.ndim() : 0;
  for (std::int64_t i = 1; i <= mask_rank; ++i) {
    const auto axis = std::size_t(4 - i);
    if (o.mask.size(-i) != 1) mask_strides[axis] = o.mask.strides()[std::size_t(mask_rank - i)];
    if (axis < 2) shape[axis] = o.mask.size(-i);
  }
  Allowed out;
  out.keys = Tensor::zeros(shape, DType::boolean);
  out.row_has_any = Tensor::zeros({shape[0], shape[1], nq, 1}, dtype);
  bool* keys = out.keys.data<bool>();
  const std::int64_t w = o.sliding_window;
  auto structural = [&](std::int64_t i, std::int64_t j) {
    return (!o.causal || j <= i) && (w == 0 || std::abs(i - j) < w);
  };
  if (o.mask.defined()) {
    visit_dtype(o.mask.dtype(), [&]<class M>() {
      const M* mask = reinterpret_cast<const M*>(o.mask.impl().storage->data());
      for_each_strided(shape, mask_strides, o.mask.offset(), [&](std::int64_t n, std::int64_t at) {
        keys[n] = mask[at] != M{} && structural(n / nk % nq, n % nk);
      });
    });
  } else {
    for (std::int64_t n = 0; n < nq * nk; ++n) keys[n] = structural(n / nk, n % nk);
  }
  visit_floating(dtype, "scaled_dot_product_attention", [&]<class T>() {
    T* any = out.row_has_any.data<T>();
    for (std::int64_t row = 0; row < out.row_has_any.numel(); ++row) {
      bool found = false;
      for (std::int64_t j = 0; j < nk && !found; ++j) found = keys[row * nk + j];
      any[row] = found ? T(1) : T(0);
      out.every_row_has_one = out.every_row_has_one && found;
    }
  });
  return out;
}

/// x [B, H, N, c] as [B, Hkv, H/Hkv * N, c]: the query heads of each key/value head stacked along the rows (a
/// view when x is contiguous), so one batched matmul against the Hkv heads of K or V serves every query head
/// of its group and K and V are never repeated.
Tensor stack_groups(const Tensor& x, std::int64_t kv_heads) {
  if (x.size(1) == kv_heads) return x;
  return reshape(x, {x.size(0), kv_heads, x.size(1) / kv_heads * x.size(2), x.size(3)});
}

/// The inverse of stack_groups for a result [B, Hkv, H/Hkv * N, c].
Tensor unstack_groups(const Tensor& x, std::int64_t heads, std::int64_t n) {
  if (x.size(1) == heads) return x;
  return reshape(x, {x.size(0), heads, n, x.size(3)});
}

/// Shared by both entry points: the probabilities [B, H, Nq, Nk] with disallowed keys at exactly zero. bf16
/// inputs give float32 probabilities: only the product Q K^T reads bf16.
Tensor probabilities(const Tensor& q, const Tensor& k, const AttentionOptions& o) {
  const std::int64_t batch = q.size(0), heads = q.size(1), nq = q.size(2), nk = k.size(2);
  const bool bf16 = q.dtype() == DType::bf16;
  const DType dtype = compute_dtype(q.dtype());
  const bool masked = o.mask.defined() || o.causal || o.sliding_window > 0;
  if (nk == 0) return Tensor::zeros({batch, heads, nq, nk}, dtype);  // no key at all: every row is empty
  const double scale = o.scale.value_or(1.0 / std::sqrt(double(q.size(3))));
  // Scaling q (Nq*d values) is cheaper than scaling the scores (Nq*Nk); bf16 q is not rounded again.
  auto product = [&](const Tensor& queries) {
    return unstack_groups(matmul(stack_groups(queries, k.size(1)), transpose(k, -2, -1)), heads, nq);
  };
  Tensor scores = bf16 ? product(q) * scale : product(q * scale);
  if (!masked) return softmax(scores, -1);
  const Allowed allowed = allowed_keys(o, nq, nk, dtype);
  // The lowest finite value, not -inf: a row with no allowed key then softmaxes to a uniform row (no
  // -inf - -inf = NaN), which the 0/1 row factor below turns into zeros, with zero gradients.
  const double lowest = visit_floating(dtype, "scaled_dot_product_attention",
                                       [&]<class T>() { return double(std::numeric_limits<T>::lowest()); });
  Tensor p = softmax(where(allowed.keys, scores, Tensor::scalar(lowest, dtype)), -1);
  if (!allowed.every_row_has_one) p = mul(p, allowed.row_has_any);
  return p;
}

/// p [B, H, Nq, Nk] applied to v [B, Hkv, Nk, dv]: [B, H, Nq, dv] (with no key, Nk = 0, matmul's empty sum
/// gives zeros). bf16 v is widened to the probabilities' float32 (exactly).
Tensor apply(const Tensor& p, const Tensor& v) {
  const Tensor values = v.dtype() == DType::bf16 ? cast(v, p.dtype()) : v;
  return unstack_groups(matmul(stack_groups(p, v.size(1)), values), p.size(1), p.size(2));
}

bool use_flash(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) {
  if (o.impl == AttentionImpl::Flash) return true;
  if (o.impl == AttentionImpl::Math) return false;
  return flash_attention::preferred(q.size(2), k.size(2), q.size(3), v.size(3));
}

/// The options with the mask taken from the replayed inputs (it is the last of them when given).
AttentionOptions with_mask(AttentionOptions options, const std::vector<Tensor>& values, std::size_t mask_at) {
  if (options.mask.defined()) options.mask = values[mask_at];
  return options;
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options) {
  if (graph::any_symbolic(q, k, v, options.mask))
    return graph::record_op("dot_product_attention", {q, k, v, options.mask}, [options](const std::vector<Tensor>& t) {
      return scaled_dot_product_attention(t[0], t[1], t[2], with_mask(options, t, 3));
    });
  validate("scaled_dot_product_attention", q, k, &v, options);
  if (use_flash(q, k, v, options)) return flash_attention::forward(q, k, v, options);
  return apply(probabilities(q, k, options), v);
}

Tensor attention_probabilities(const Tensor& q, const Tensor& k, const AttentionOptions& options) {
  if (graph::any_symbolic(q, k, options.mask))
    return graph::record_op("attention_probabilities", {q, k, options.mask}, [options](const std::vector<Tensor>& t) {
      return attention_probabilities(t[0], t[1], with_mask(options, t, 2));
    });
  validate("attention_probabilities", q, k, nullptr, options);
  return probabilities(q, k, options);
}

AttentionOutputs scaled_dot_product_attention_with_probabilities(const Tensor& q, const Tensor& k, const Tensor& v,
                                                                 const AttentionOptions& options) {
  check(!graph::any_symbolic(q, k, v, options.mask), "scaled_dot_product_attention_with_probabilities: symbolic "
        "inputs: this op does not build graphs (call scaled_dot_product_attention and attention_probabilities)");
  validate("scaled_dot_product_attention", q, k, &v, options);
  // Auto keeps differentiable probabilities when a tape watches q or k (flash's are not recorded).
  const bool flash = options.impl == AttentionImpl::Flash ||
                     (use_flash(q, k, v, options) && !autograd::tape_tracks({&q, &k}));
  if (flash) return flash_attention::forward_with_probabilities(q, k, v, options);
  const Tensor p = probabilities(q, k, options);
  return {apply(p, v), p};
}

}  // namespace loom::ops
