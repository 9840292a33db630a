#pragma once
// check_numerics: an opt-in debugging mode that stops at the first op whose result holds a NaN or an
// infinity and names it (TensorFlow's tf.debugging.enable_check_numerics).
//
//   loom::set_check_numerics(true);
//   Tensor y = ops::log(x);   // x holds a 0: throws loom::Error
//   // check_numerics: op 'log' produced -inf at element [1] of its output of shape [3] (inputs: f32 [3])
//
// While it is on, every op with a float32/float64 input checks its outputs, on every thread, with or
// without a GradientTape, under NoGradGuard too (optimizer updates are checked); GradientTape::gradient
// checks the gradients each backward rule returns. When the NaN or infinity was already in one of the op's
// inputs (data, or a tensor made without an op), the message says it came in with that input instead. The
// ops that are not checked are those that never produce floats from floats: comparisons, argmax/argmin,
// sign, one_hot, and the tensor factories (zeros, randn, from_vector, ...).
//
// Off (the default), an op pays one relaxed atomic load. On, each op's output is read once more.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "framework/tensor/tensor.hpp"

namespace loom {

/// Turns check_numerics on or off for the whole process (every thread).
void set_check_numerics(bool enabled);
/// True while the mode is on and no numerics::SuspendChecks is alive on this thread.
bool check_numerics_enabled();

namespace numerics {

/// Suspends the checks on this thread while alive: for computations on made-up values (the stand-in runs
/// that learn a graph node's output shapes).
class SuspendChecks {
 public:
  SuspendChecks();
  ~SuspendChecks();
  SuspendChecks(const SuspendChecks&) = delete;
  SuspendChecks& operator=(const SuspendChecks&) = delete;
};

/// Where a check runs. backward_rule: `outputs` are the gradients a backward rule returned for its op's
/// inputs and `inputs` the output gradients it was given. gradient_of: the op whose backward rule is
/// running, when an op is checked inside one (named in the message).
struct CheckSite {
  bool backward_rule = false;
  std::string_view gradient_of = {};
};

/// The first NaN or infinity of a tensor: its flat (row-major) index and its value.
struct NonFinite {
  std::int64_t index;
  double value;
};
/// The first non-finite element of `t`, or nothing when every element is finite (or `t` is undefined or not a
/// float tensor). One read of `t`, whatever its strides.
std::optional<NonFinite> first_non_finite(const Tensor& t);
/// How messages name a non-finite value: "NaN", "inf" or "-inf".
std::string non_finite_name(double value);

/// The check each op's outputs get while check_numerics is on, callable on its own (tf.debugging.check_numerics).
/// Throws loom::Error when an output of `op` holds a NaN or an infinity, naming the op, the element, the
/// output's shape and the inputs; when an input already held one, names that input instead (the op is then
/// the first checked op to see it). Undefined tensors and non-float ones are skipped.
void check_finite(std::string_view op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                  const CheckSite& site = {});

}  // namespace numerics

}  // namespace loom
