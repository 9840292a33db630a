#include "layers/activations/activation_functions.hpp"

#include <limits>
#include <map>

#include "framework/ops/ops.hpp"

namespace loom::layers::activations {

Tensor linear(const Tensor& x) { return x; }

Tensor silu(const Tensor& x) { return x * ops::sigmoid(x); }

Tensor elu(const Tensor& x, double alpha) {
  // exp only of min(x, 0): exp of a large positive x would be inf, and 0 * inf in the backward pass is NaN.
  const Tensor negative_part = ops::exp(ops::clip(x, -std::numeric_limits<double>::infinity(), 0.0)) - 1.0;
  return ops::relu(x) + alpha * negative_part;
}

Tensor selu(const Tensor& x) {
  // The constants of Klambauer et al. (2017), as jax.nn.selu and torch.nn.SELU.
  constexpr double alpha = 1.6732632423543772848170429916717;
  constexpr double scale = 1.0507009873554804934193349852946;
  return scale * elu(x, alpha);
}

Tensor softplus(const Tensor& x) { return -ops::log_sigmoid(-x); }  // log_sigmoid is the stable form

Tensor softsign(const Tensor& x) { return x / (ops::abs(x) + 1.0); }

Tensor leaky_relu(const Tensor& x, double negative_slope) {
  // where() rather than max(x, slope * x), which would be wrong for slopes above 1; gradient 1 at 0, as jax.
  return ops::where(ops::greater_equal(x, Tensor::zeros({}, x.dtype())), x, x * negative_slope);
}

Tensor relu6(const Tensor& x) { return ops::clip(x, 0.0, 6.0); }

Tensor hard_sigmoid(const Tensor& x) { return relu6(x + 3.0) / 6.0; }

Tensor hard_silu(const Tensor& x) { return x * hard_sigmoid(x); }

Tensor mish(const Tensor& x) { return x * ops::tanh(softplus(x)); }

Tensor exponential(const Tensor& x) { return ops::exp(x); }

namespace {
Tensor scalar_like(double value, const Tensor& x) { return Tensor::full({}, value, x.dtype()); }
}  // namespace

Tensor celu(const Tensor& x, double alpha) {
  // As elu: exp only of min(x, 0).
  const Tensor negative_part = ops::exp(ops::clip(x, -std::numeric_limits<double>::infinity(), 0.0) / alpha) - 1.0;
  return ops::relu(x) + alpha * negative_part;
}

Tensor squareplus(const Tensor& x, double b) { return (x + ops::sqrt(ops::square(x) + b)) / 2.0; }

Tensor sparse_plus(const Tensor& x) {
  // (c + 1)^2 / 4 with c = clip(x, -1, 1) is 0 below -1 and 1 at 1, where x - 1 continues it.
  const Tensor c = ops::clip(x, -1.0, 1.0);
  return ops::square(c + 1.0) / 4.0 + ops::relu(x - 1.0);
}

Tensor sparse_sigmoid(const Tensor& x) { return (ops::clip(x, -1.0, 1.0) + 1.0) / 2.0; }

Tensor hard_tanh(const Tensor& x) { return ops::clip(x, -1.0, 1.0); }

Tensor tanh_shrink(const Tensor& x) { return x - ops::tanh(x); }

Tensor soft_shrink(const Tensor& x, double threshold) { return x - ops::clip(x, -threshold, threshold); }

Tensor hard_shrink(const Tensor& x, double threshold) {
  return ops::where(ops::greater(ops::abs(x), scalar_like(threshold, x)), x, scalar_like(0.0, x));
}

Tensor threshold(const Tensor& x, double threshold, double default_value) {
  return ops::where(ops::greater(x, scalar_like(threshold, x)), x, scalar_like(default_value, x));
}

Tensor glu(const Tensor& x, std::int64_t axis) {
  const std::int64_t rank = static_cast<std::int64_t>(x.shape().size());
  check(rank > 0, "glu: needs an input of rank >= 1");
  const std::int64_t a = axis < 0 ? axis + rank : axis;
  check(a >= 0 && a < rank, "glu: axis {} is out of range for rank {}", axis, rank);
  check(x.shape()[a] % 2 == 0, "glu: the dimension {} of axis {} must be even to split into halves", x.shape()[a],
        axis);
  const auto halves = ops::split(x, 2, a);
  return halves[0] * ops::sigmoid(halves[1]);
}

Tensor sparsemax(const Tensor& x, std::int64_t axis) {
  const std::int64_t rank = static_cast<std::int64_t>(x.shape().size());
  check(rank > 0, "sparsemax: needs an input of rank >= 1");
  const std::int64_t a = axis < 0 ? axis + rank : axis;
  check(a >= 0 && a < rank, "sparsemax: axis {} is out of range for rank {}", axis, rank);
  // Entry i is in the support iff 1 + k_i x_i > s_i, with k_i the count and s_i the sum of the entries
  // x_j >= x_i: pairwise over a new axis a + 1 (j along a, i along a + 1) rather than by sorting.
  const Tensor xj = ops::expand_dims(x, a + 1);
  const Tensor xi = ops::expand_dims(x, a);
  const Tensor above = ops::cast(ops::greater_equal(xj, xi), x.dtype());
  const Tensor k = ops::sum(above, {a}, /*keepdims=*/false);
  const Tensor s = ops::sum(above * xj, {a}, /*keepdims=*/false);
  const Tensor support = ops::greater(k * x + 1.0, s);
  const Tensor support_size = ops::sum(ops::cast(support, x.dtype()), {a}, /*keepdims=*/true);
  const Tensor support_sum = ops::sum(ops::where(support, x, scalar_like(0.0, x)), {a}, /*keepdims=*/true);
  return ops::relu(x - (support_sum - 1.0) / support_size);
}

namespace {
const std::map<std::string, ActivationFn, std::less<>>& table() {
  static const std::map<std::string, ActivationFn, std::less<>> functions = {
      {"", linear},
      {"linear", linear},
      {"relu", [](const Tensor& x) { return ops::relu(x); }},
      {"gelu", [](const Tensor& x) { return ops::gelu(x, /*approximate=*/false); }},
      {"tanh", [](const Tensor& x) { return ops::tanh(x); }},
      {"sigmoid", [](const Tensor& x) { return ops::sigmoid(x); }},
      {"softmax", [](const Tensor& x) { return ops::softmax(x, -1); }},
      {"log_softmax", [](const Tensor& x) { return ops::log_softmax(x, -1); }},
      {"log_sigmoid", [](const Tensor& x) { return ops::log_sigmoid(x); }},
      {"silu", silu},
      {"swish", silu},
      {"elu", [](const Tensor& x) { return elu(x); }},
      {"selu", selu},
      {"softplus", softplus},
      {"softsign", softsign},
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x); }},
      {"relu6", relu6},
      {"hard_sigmoid", hard_sigmoid},
      {"hard_silu", hard_silu},
      {"hard_swish", hard_silu},
      {"mish", mish},
      {"exponential", exponential},
      {"celu", [](const Tensor& x) { return celu(x); }},
      {"squareplus", [](const Tensor& x) { return squareplus(x); }},
      {"sparse_plus", sparse_plus},
      {"sparse_sigmoid", sparse_sigmoid},
      {"hard_tanh", hard_tanh},
      {"tanh_shrink", tanh_shrink},
      {"soft_shrink", [](const Tensor& x) { return soft_shrink(x); }},
      {"hard_shrink", [](const Tensor& x) { return hard_shrink(x); }},
      {"glu", [](const Tensor& x) { return glu(x); }},
      {"sparsemax", [](const Tensor& x) { return sparsemax(x); }},
  };
  return functions;
}
}  // namespace

std::vector<std::string> names() {
  std::vector<std::string> out;
  for (const auto& [name, fn] : table())
    if (!name.empty()) out.push_back(name);
  return out;
}

ActivationFn get(const std::string& name, std::string_view caller) {
  const auto it = table().find(name);
  check(it != table().end(), "{}: unknown activation '{}'; known names: {}", caller, name, fmt::join(names(), ", "));
  return it->second;
}

ActivationFn Activation::function(std::string_view caller) const { return fn_ ? fn_ : get(name_, caller); }

}  // namespace loom::layers::activations
