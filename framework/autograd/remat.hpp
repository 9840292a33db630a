#pragma once
// Rematerialization (Keras 3's keras.remat): a function whose intermediate results no tape keeps. Its forward
// pass runs without recording (each activation is freed once the next op has used it); the tapes record one
// node whose backward rule runs the function again on the same inputs, with the same random draws, under a tape
// of its own, and returns that pass's gradients. The gradients are those without remat, bit for bit (the same
// ops in the same order), at the price of a second forward pass; higher orders work, since the recomputation
// and its backward pass are loom ops that outer tapes record. Variables the function reads (a layer's weights)
// get their gradients as without remat.
//
//   auto block = loom::remat([&](const std::vector<Tensor>& x) { return std::vector<Tensor>{ffn(x[0])}; });
//   Tensor y = block({x})[0];
//
// What the function assigns to Variables (BatchNormalization's moving statistics) is assigned once, by the
// forward pass; the recomputation's assignments are undone. An output that is one of the inputs passes
// through (the node has only the outputs the function computed).
//
// RematScope (Keras's keras.RematScope) chooses what layers rematerialize: a layer takes the scope active on its
// thread when it is constructed (not when it is called), and its calls then follow the mode:
//   "full"            every call of the layer is rematerialized;
//   "larger_than"     a call whose output has more than output_size_threshold elements (unknown sizes
//                     counted as 1, from the layer's compute_output_shape);
//   "activations"     only the layer's activation function (Dense, EinsumDense, the convolutions, Activation);
//   "list_of_layers"  every call of the layers whose names are in layer_names;
//   none (nullopt)    nothing, also inside an outer scope.
// Layers made inside a layer made in a scope (a TransformerEncoder's Dense layers) take the scope too, so a
// "full" scope rematerializes them again inside their parent's recomputation, as Keras does.
//
//   { loom::RematScope scope({.mode = "larger_than", .output_size_threshold = 4096});
//     block = std::make_unique<L::TransformerEncoder>(...); }
//
// Random draws replay: the thread's generator (unseeded ops::dropout) is put back to its state at the first
// pass, and seeded layers (Dropout with a seed) take their seeds through random::draw_seed, which replays them.
// A first call that builds layers (creates the Variables it reads) runs the function twice, and the second
// pass is the one the backward pass replays. The function must compute the same thing twice: outputs of
// another count, shape or dtype on the second run are a loom::Error, as are undefined outputs and new
// Variables on every call.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "framework/tensor/tensor.hpp"

namespace loom {

using RematFunction = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;

/// `fn`, rematerialized; a loom::Error if `fn` is empty. With no tape recording, the result simply calls `fn`.
RematFunction remat(RematFunction fn);
/// The same for a function of one tensor to one tensor: remat([&](const Tensor& t) { return block(t); })(x).
using UnaryRematFunction = std::function<Tensor(const Tensor& input)>;
UnaryRematFunction remat(UnaryRematFunction fn);

/// A RematScope's settings, as Keras's (mode "full", threshold 1024, no names).
struct RematMode {
  std::optional<std::string> mode = "full";  // or "activations", "larger_than", "list_of_layers"; nullopt: none
  std::int64_t output_size_threshold = 1024;
  std::vector<std::string> layer_names = {};
};

/// While alive, the remat mode of the layers constructed on this thread (the innermost scope's). An unknown
/// mode or a negative threshold is a loom::Error.
class RematScope {
 public:
  explicit RematScope(RematMode mode = {});
  ~RematScope();
  RematScope(const RematScope&) = delete;
  RematScope& operator=(const RematScope&) = delete;
  const RematMode& mode() const { return mode_; }

 private:
  RematMode mode_;
};

/// The innermost RematScope's mode on this thread; nullopt outside every scope.
std::optional<RematMode> current_remat_mode();

}  // namespace loom
