#pragma once
// DType: the runtime element type of a Tensor, and the mapping to and from C++ scalar types.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include <fmt/format.h>

namespace loom {

/// f32 and f64 carry arithmetic; i64 holds indices and labels; boolean holds masks (one byte per element).
enum class DType : std::uint8_t { f32, f64, i64, boolean };

std::string_view dtype_name(DType dtype);  // "f32", "f64", "i64", "bool"
std::size_t dtype_size(DType dtype);       // bytes per element
inline bool is_floating(DType dtype) { return dtype == DType::f32 || dtype == DType::f64; }

/// The DType of a C++ scalar type: dtype_of<float> == DType::f32.
template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::f32;
  else if constexpr (std::is_same_v<T, double>) return DType::f64;
  else if constexpr (std::is_same_v<T, std::int64_t>) return DType::i64;
  else if constexpr (std::is_same_v<T, bool>) return DType::boolean;
  else static_assert(sizeof(T) == 0, "loom tensors hold float, double, int64_t or bool");
}

}  // namespace loom

template <>
struct fmt::formatter<loom::DType> : fmt::formatter<std::string_view> {
  auto format(loom::DType dtype, fmt::format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(loom::dtype_name(dtype), ctx);
  }
};
