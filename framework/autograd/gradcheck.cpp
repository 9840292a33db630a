#include "framework/autograd/gradcheck.hpp"

#include <cmath>
#include <set>
#include <string_view>

#include "framework/autograd/tape.hpp"
#include "framework/kernels/strided.hpp"
#include "framework/ops/ops.hpp"
#include "framework/tensor/detail/tensor_impl.hpp"

namespace loom {

namespace {

/// Storage positions of every element of a float64 tensor, row-major; rejects overlapping views (a
/// broadcast input), where perturbing one position would move several elements at once.
std::vector<std::int64_t> element_positions(const Tensor& t, std::size_t input) {
  std::vector<std::int64_t> positions(std::size_t(t.numel()));
  for_each_strided(t.shape(), t.strides(), t.offset(),
                   [&](std::int64_t i, std::int64_t at) { positions[std::size_t(i)] = at; });
  check(std::set<std::int64_t>(positions.begin(), positions.end()).size() == positions.size(),
        "gradcheck: input {} (shape {}, strides {}) has overlapping memory, e.g. from broadcast_to; "
        "pass a contiguous copy", input, t.shape(), t.strides());
  return positions;
}

std::string element_name(const Shape& shape, std::int64_t flat) {
  return fmt::format("({})", fmt::join(unravel_index(flat, shape), ", "));
}

/// Float64 inputs and usable tolerances, before anything runs; `op` names the check in the error.
void check_arguments(const std::vector<Tensor>& inputs, const GradcheckOptions& options, std::string_view op) {
  check(!inputs.empty(), "{}: expected at least one input", op);
  for (std::size_t k = 0; k < inputs.size(); ++k)
    check(inputs[k].defined() && inputs[k].dtype() == DType::f64,
          "{}: input {} must be float64 (finite differences in float32 are too coarse), got {}", op, k,
          inputs[k].defined() ? fmt::format("{} of shape {}", inputs[k].dtype(), inputs[k].shape()) : "undefined");
  check(std::isfinite(options.eps) && options.eps > 0.0, "{}: eps must be finite and > 0, got {}", op, options.eps);
  check(options.atol >= 0.0 && options.rtol >= 0.0, "{}: atol and rtol must be >= 0, got atol={}, rtol={}", op,
        options.atol, options.rtol);
}

Tensor evaluate(const TensorFn& fn, const std::vector<Tensor>& inputs, std::string_view op) {
  Tensor y = fn(inputs);
  check(y.defined() && y.dtype() == DType::f64, "{}: the function must return a float64 tensor, got {}", op,
        y.defined() ? fmt::format("{} of shape {}", y.dtype(), y.shape()) : "an undefined tensor");
  return y;
}

}  // namespace

GradcheckResult gradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs, const GradcheckOptions& options) {
  check_arguments(inputs, options, "gradcheck");

  // Analytic Jacobian: one forward pass on a persistent tape, one backward pass per output element.
  GradientTape tape({.persistent = true});
  tape.watch(inputs);
  const Tensor y = evaluate(fn, inputs, "gradcheck");
  const std::int64_t outputs = y.numel();
  std::vector<std::vector<std::vector<double>>> analytic(inputs.size());  // [input][output][element]
  for (std::int64_t i = 0; i < outputs; ++i) {
    std::vector<double> seed(std::size_t(outputs), 0.0);
    seed[std::size_t(i)] = 1.0;
    const auto grads = tape.gradient(y, inputs, Tensor::from_vector(seed, y.shape()));
    for (std::size_t k = 0; k < inputs.size(); ++k) analytic[k].push_back(grads[k].to_vector<double>());
  }

  // A zero cotangent must give zero gradients of the inputs' shapes and dtypes.
  const auto zero_grads = tape.gradient(y, inputs, Tensor::zeros_like(y));
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& g = zero_grads[k];
    if (g.shape() != inputs[k].shape() || g.dtype() != inputs[k].dtype())
      return {false, fmt::format("gradcheck: input {}: gradient has shape {} and dtype {}, expected {} and {}", k,
                                 g.shape(), g.dtype(), inputs[k].shape(), inputs[k].dtype())};
    for (double value : g.to_vector<double>())
      if (value != 0.0)
        return {false, fmt::format("gradcheck: input {}: a zero output gradient gave a nonzero input gradient ({})",
                                   k, value)};
  }

  // Numeric Jacobian by central differences, perturbing each input element in place and restoring it.
  double worst = 0.0;
  std::string worst_message;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const auto positions = element_positions(inputs[k], k);
    double* base = reinterpret_cast<double*>(inputs[k].impl().storage->data());
    for (std::size_t j = 0; j < positions.size(); ++j) {
      double& x = base[positions[j]];
      const double original = x;
      x = original + options.eps;
      const auto plus = evaluate(fn, inputs, "gradcheck").to_vector<double>();
      x = original - options.eps;
      const auto minus = evaluate(fn, inputs, "gradcheck").to_vector<double>();
      x = original;
      for (std::int64_t i = 0; i < outputs; ++i) {
        const double numeric = (plus[std::size_t(i)] - minus[std::size_t(i)]) / (2.0 * options.eps);
        const double a = analytic[k][std::size_t(i)][j];
        const double excess = std::abs(a - numeric) - (options.atol + options.rtol * std::abs(numeric));
        if (!(excess <= 0.0) && (worst_message.empty() || excess > worst || std::isnan(excess))) {
          worst = excess;
          worst_message = fmt::format(
              "gradcheck: Jacobian mismatch for input {} element {} and output element {}: analytic {:.10g} vs "
              "numeric {:.10g} (allowed difference {:.3g})",
              k, element_name(inputs[k].shape(), std::int64_t(j)), element_name(y.shape(), i), a, numeric,
              options.atol + options.rtol * std::abs(numeric));
        }
      }
    }
  }
  if (!worst_message.empty()) return {false, worst_message};
  return {true, {}};
}

GradcheckResult gradgradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs, const GradcheckOptions& options) {
  check_arguments(inputs, options, "gradgradcheck");
  const Tensor y = [&] {
    NoGradGuard no_grad;
    return evaluate(fn, inputs, "gradgradcheck");
  }();
  const Tensor cotangent = Tensor::randn(y.shape(), DType::f64, /*seed=*/12345);
  // The first-order gradient as a function of the inputs; the inner tape's backward ops are recorded on
  // gradcheck's tape, which differentiates them.
  const TensorFn first_order = [&](const std::vector<Tensor>& xs) {
    GradientTape inner;
    inner.watch(xs);
    const Tensor out = fn(xs);
    std::vector<Tensor> flat;
    for (const Tensor& g : inner.gradient(out, xs, cotangent)) flat.push_back(ops::reshape(g, {-1}));
    return ops::concat(flat, 0);
  };
  GradcheckResult result = gradcheck(first_order, inputs, options);
  if (!result.ok) result.message = "gradgradcheck (second order): " + result.message;
  return result;
}

}  // namespace loom
