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
// Random draws replay: the thread's generator (unseeded ops::dropout) is put back to its state at the first
// pass, and seeded layers (Dropout with a seed) take their seeds through random::draw_seed, which replays them.
// A first call that builds layers (creates the Variables it reads) runs the function twice, and the second
// pass is the one the backward pass replays. The function must compute the same thing twice: outputs of
// another count, shape or dtype on the second run are a loom::Error, as are undefined outputs, an output that
// is one of the inputs, and new Variables on every call.
#include <functional>
#include <vector>

#include "framework/tensor/tensor.hpp"

namespace loom {

using RematFunction = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;

/// `fn`, rematerialized; a loom::Error if `fn` is empty. With no tape recording, the result simply calls `fn`.
RematFunction remat(RematFunction fn);

}  // namespace loom
