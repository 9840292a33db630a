#pragma once
// The input checks most ops begin with, so that every op words the same fault the same way and names the
// offending shape.
#include <string_view>

#include "framework/tensor/error.hpp"
#include "framework/tensor/tensor.hpp"

namespace loom {

inline void check_defined(const Tensor& x, std::string_view op) {
  check(x.defined(), "{}: the input tensor is undefined", op);
}

/// Defined and float32 or float64: the dtypes every differentiable op computes in.
inline void check_floating(const Tensor& x, std::string_view op) {
  check_defined(x, op);
  check(is_floating(x.dtype()), "{}: expected a float32 or float64 tensor, got {} of shape {}", op, x.dtype(),
        x.shape());
}

}  // namespace loom
