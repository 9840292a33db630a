#pragma once
// Pooling over one or two spatial dimensions, as keras.ops.max_pool and average_pool.
//
//   Tensor y = ops::max_pool(x, {2, 2});                                 // x [N, H, W, C] -> [N, H/2, W/2, C]
//   Tensor a = ops::average_pool(x, {3, 3}, {.strides = {{1, 1}}, .padding = "same"});
//
// Inputs [batch, spatial..., channels] (channels_last) or [batch, channels, spatial...]. Positions a "same"
// window reaches beyond the input take no part: max_pool ignores them and average_pool divides by the count
// of real positions, as Keras. max_pool's gradient goes to the first maximum of each window (row-major) and
// a NaN in a window is its maximum; both ops are differentiable to any order.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "framework/tensor/tensor.hpp"

namespace loom::ops {

/// keras.ops.max_pool / average_pool's arguments; strides hold one value per spatial dimension or one for all,
/// and default to the pool size.
struct PoolOptions {
  std::optional<std::vector<std::int64_t>> strides = std::nullopt;
  std::string padding = "valid";  // "valid" or "same"
  std::string data_format = "channels_last";
};

/// pool_size holds one value per spatial dimension or one for all.
Tensor max_pool(const Tensor& x, const std::vector<std::int64_t>& pool_size, const PoolOptions& options = {});
Tensor average_pool(const Tensor& x, const std::vector<std::int64_t>& pool_size, const PoolOptions& options = {});

}  // namespace loom::ops
