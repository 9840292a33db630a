#pragma once
// How a differentiable op reaches the tapes: after computing its outputs, an op calls autograd::record() with
// its backward rule. This is also the way to write a custom differentiable op:
//
//   Tensor square(const Tensor& x) {
//     Tensor y = x * x;
//     if (autograd::needs_recording({&x}))
//       autograd::record("square", {x}, {y}, [x](const std::vector<Tensor>& g) {   // d/dx x^2 = 2x
//         return std::vector<Tensor>{g[0] * x * 2.0};
//       });
//     return y;
//   }
#include <functional>
#include <initializer_list>
#include <vector>

#include "framework/tensor/tensor.hpp"

namespace loom {

/// Gradient of each of a node's inputs given the gradients of its outputs (zeros for outputs that got
/// none). An undefined Tensor means "no gradient" (an integer index, a mask). A result may have the
/// broadcast output shape: the tape sums it down to the input's shape.
using BackwardFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& output_grads)>;

namespace autograd {
/// True when some tape on this thread would record an op with these inputs, or when check_numerics is on
/// (framework/autograd/numerics.hpp) and one of them is a float tensor. Ops check it before building their
/// backward closure and calling record(), so untaped code pays almost nothing.
bool needs_recording(std::initializer_list<const Tensor*> inputs);
bool needs_recording(const std::vector<Tensor>& inputs);
/// True when some tape on this thread would record an op with these inputs, whatever check_numerics says:
/// for choices that depend on whether gradients can be asked for (not for guarding record()).
bool tape_tracks(std::initializer_list<const Tensor*> inputs);
/// With check_numerics on, first throws loom::Error if an output holds a NaN or an infinity. Then records
/// `op` on every active tape that tracks one of `inputs`. `op` must outlive the tapes (a string literal).
void record(const char* op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
            BackwardFn backward);
}  // namespace autograd

}  // namespace loom
