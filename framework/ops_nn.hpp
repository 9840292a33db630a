#pragma once
// Neural-network ops: softmax family, one_hot, dropout.
#include <cstdint>
#include <optional>

#include "framework/tensor.hpp"

namespace loom::ops {

Tensor softmax(const Tensor& x, std::int64_t axis = -1);       // stable: shifted by the max
Tensor log_softmax(const Tensor& x, std::int64_t axis = -1);
/// Integer labels (i64, any shape) -> f32/f64 one-hot with a new last axis of `depth`. Out-of-range labels
/// are an error.
Tensor one_hot(const Tensor& labels, std::int64_t depth, DType dtype = DType::f32);
/// Inverted dropout: when training, zeroes each element with probability `rate` and scales the rest by
/// 1/(1-rate); identity otherwise. With a seed the mask depends only on the seed; without, on this thread's
/// generator.
Tensor dropout(const Tensor& x, double rate, bool training, std::optional<std::uint64_t> seed = {});

}  // namespace loom::ops
