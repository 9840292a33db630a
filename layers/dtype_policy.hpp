#pragma once
// Keras's dtype policies (keras.DTypePolicy, keras.mixed_precision): in which dtype a layer keeps its variables
// and in which it computes. A layer takes the global policy when it is constructed (or its options' `.dtype`).
//
//   mixed_precision::set_global_policy("mixed_bfloat16");   // layers made from now on
//   L::Dense d(64);                                           // kernel float32; x @ kernel in bf16
//   L::Dense e(64, {.dtype = "float32"});                     // this one in float32
//
// The names loom runs:
//   "float32"         the default: variables and computations in the dtype of the layer's first input
//                     (float32, or float64 when it gets float64), as loom always did; "float64" is the same;
//   "mixed_bfloat16"  variables float32; the matmuls of Dense, EinsumDense and the attention layers'
//                     projections run on bf16 operands with float32 accumulation and give float32 results;
//                     everything else (activations, normalizations, softmax, losses) computes in float32.
// Unlike Keras, a mixed_bfloat16 layer's output is float32, not bfloat16: loom has no bf16 arithmetic outside
// matmul. bfloat16 keeps float32's exponent range, so no loss scaling is needed (docs/mixed_precision.md).
// "bfloat16", "float16" and "mixed_float16" are Keras names loom does not run: a loom::Error says so.
#include <string>
#include <string_view>

namespace loom {

struct DTypePolicy {
  std::string name = "float32";
  /// Matmuls on bf16 operands (variables stay float32).
  bool mixed_bfloat16 = false;

  /// The policy of a Keras name; `what` (a layer or a function) begins the error for a name loom does not run.
  static DTypePolicy from_name(const std::string& name, std::string_view what);
};

namespace mixed_precision {

/// The policy layers constructed from now on take (process-wide; Keras's is global too).
void set_global_policy(const std::string& name);
DTypePolicy global_policy();

}  // namespace mixed_precision

}  // namespace loom
