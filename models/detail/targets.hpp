#pragma once
// How every loss and metric lines up y_true with y_pred before computing (Keras's rules). Not installed.
#include <string_view>
#include <utility>

#include "framework/tensor/tensor.hpp"

namespace loom::models::detail {

/// Keras's squeeze_or_expand_to_same_rank, applied by every loss and metric: when the ranks differ by one and
/// the longer shape ends in 1, a rank-1 partner gains a trailing 1 ([N] with [N, 1]); otherwise the trailing
/// 1 is dropped ([N, T, 1] with [N, T]). Other pairs are returned as they are.
std::pair<Tensor, Tensor> squeeze_or_expand_to_same_rank(Tensor a, Tensor b);

/// Class ids for the sparse losses and metrics: int64 as they are; floating values (NumPy's default dtype,
/// which Keras casts) as int64 when every one is a whole number, else a loom::Error naming `fn`, the shape and
/// the first value that is not.
Tensor class_ids(const Tensor& y_true, std::string_view fn);

}  // namespace loom::models::detail
