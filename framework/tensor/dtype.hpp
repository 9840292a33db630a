#pragma once
// DType: the runtime element type of a Tensor, and the mapping to and from C++ scalar types.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include <fmt/format.h>

#include "framework/tensor/bfloat16.hpp"

namespace loom {

/// f32 and f64 carry arithmetic; i64 holds indices and labels; boolean holds masks (one byte per element);
/// bf16 (bfloat16) is storage for mixed precision: cast to and from it, copy, reshape, and multiply with matmul
/// (a float32 result), but no other arithmetic.
enum class DType : std::uint8_t { f32, f64, i64, boolean, bf16 };

std::string_view dtype_name(DType dtype);  // "f32", "f64", "i64", "bool", "bf16"
std::size_t dtype_size(DType dtype);       // bytes per element
/// The dtypes arithmetic is defined on.
inline bool is_floating(DType dtype) { return dtype == DType::f32 || dtype == DType::f64; }
/// The dtypes gradients flow through: the floating ones and bf16.
inline bool is_differentiable(DType dtype) { return is_floating(dtype) || dtype == DType::bf16; }
/// The dtype values of `dtype` are computed in, and their gradients carried in: float32 for bf16 (a storage
/// type with no arithmetic of its own), the dtype itself otherwise.
inline DType compute_dtype(DType dtype) { return dtype == DType::bf16 ? DType::f32 : dtype; }

/// The DType of a C++ scalar type: dtype_of<float> == DType::f32.
template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::f32;
  else if constexpr (std::is_same_v<T, double>) return DType::f64;
  else if constexpr (std::is_same_v<T, std::int64_t>) return DType::i64;
  else if constexpr (std::is_same_v<T, bool>) return DType::boolean;
  else if constexpr (std::is_same_v<T, bfloat16>) return DType::bf16;
  else static_assert(sizeof(T) == 0, "loom tensors hold float, double, int64_t, bool or bfloat16");
}

}  // namespace loom

template <>
struct fmt::formatter<loom::DType> : fmt::formatter<std::string_view> {
  auto format(loom::DType dtype, fmt::format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(loom::dtype_name(dtype), ctx);
  }
};
