#pragma once
// Runtime dtype -> C++ scalar type, once per op. Kernels are templates; an op calls
//   visit_floating(x.dtype(), "exp", [&]<class T>() { ... T ... });
// so one template serves float and double.
#include <cstdint>
#include <string_view>

#include "framework/tensor/dtype.hpp"
#include "framework/tensor/error.hpp"

namespace loom {

/// Calls fn.template operator()<T>() with T = float or double; other dtypes are an error naming `op`.
template <class Fn>
decltype(auto) visit_floating(DType dtype, std::string_view op, Fn&& fn) {
  switch (dtype) {
    case DType::f32: return fn.template operator()<float>();
    case DType::f64: return fn.template operator()<double>();
    default: break;
  }
  throw Error(fmt::format("{}: expected a float32 or float64 tensor, got {}", op, dtype));
}

/// Same for every dtype: float, double, int64_t, bool and bfloat16.
template <class Fn>
decltype(auto) visit_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32: return fn.template operator()<float>();
    case DType::f64: return fn.template operator()<double>();
    case DType::i64: return fn.template operator()<std::int64_t>();
    case DType::bf16: return fn.template operator()<bfloat16>();
    case DType::boolean: break;
  }
  return fn.template operator()<bool>();
}

}  // namespace loom
