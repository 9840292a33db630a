#pragma once
// gradcheck: compares the tape's gradients with central finite differences, in float64 (the defaults are
// torch.autograd.gradcheck's). gradgradcheck does the same for the gradient of the gradient.
//
//   auto r = gradcheck([](const std::vector<Tensor>& in) { return ops::tanh(ops::matmul(in[0], in[1])); },
//                      {x, w});
//   REQUIRE(r.ok);   // r.message names the input, the element, the analytic and numeric values
#include <functional>
#include <string>
#include <vector>

#include "framework/tensor/tensor.hpp"

namespace loom {

using TensorFn = std::function<Tensor(const std::vector<Tensor>&)>;

struct GradcheckOptions {
  double eps = 1e-6;   // finite-difference step
  double atol = 1e-5;  // pass when |analytic - numeric| <= atol + rtol * |numeric|
  double rtol = 1e-3;
};

struct GradcheckResult {
  bool ok = true;
  std::string message;  // empty when ok
  explicit operator bool() const { return ok; }
};

/// Every input must be float64. Checks every element of the Jacobian of fn at `inputs`, and that a zero
/// output gradient gives zero input gradients of the right shape and dtype.
GradcheckResult gradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});

/// gradcheck of  inputs -> sum(grad(fn)(inputs) * v)  for a fixed random cotangent v: checks the second
/// derivatives produced by nested tapes.
GradcheckResult gradgradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs,
                              const GradcheckOptions& options = {});

}  // namespace loom
