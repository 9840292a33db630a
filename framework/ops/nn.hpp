#pragma once
// Neural-network ops: softmax family, one_hot, dropout.
// softmax/log_softmax accept -inf entries (masked positions). A lane that is entirely -inf has no
// distribution: softmax gives zeros there and log_softmax -inf (NumPy would give NaN), so a fully masked row
// does not poison the rest of a batch. +inf or NaN entries give NaN, as in NumPy.
#include <cstdint>
#include <optional>
#include <string_view>

#include "framework/tensor/tensor.hpp"

namespace loom::ops {

Tensor softmax(const Tensor& x, std::int64_t axis = -1);       // stable: shifted by the max
Tensor log_softmax(const Tensor& x, std::int64_t axis = -1);
/// log(sigmoid(x)) = -softplus(-x), computed stably for large |x| (keras.ops.log_sigmoid).
Tensor log_sigmoid(const Tensor& x);
/// Integer labels (i64, any shape) -> f32/f64 one-hot with a new last axis of `depth`. Out-of-range labels
/// are an error.
Tensor one_hot(const Tensor& labels, std::int64_t depth, DType dtype = DType::f32);
/// Throws loom::Error naming `op` unless `labels` is int64 with every value in [0, depth); the message names
/// the first bad label and its index. Shared by one_hot and the sparse losses and metrics.
void check_class_labels(const Tensor& labels, std::int64_t depth, std::string_view op);
/// Inverted dropout: when training, zeroes each element with probability `rate` and scales the rest by
/// 1/(1-rate); identity otherwise. With a seed the mask depends only on the seed; without, on this thread's
/// generator.
Tensor dropout(const Tensor& x, double rate, bool training, std::optional<std::uint64_t> seed = {});

}  // namespace loom::ops
