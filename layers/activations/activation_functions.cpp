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

}  // namespace loom::layers::activations
