#pragma once
// bfloat16: the upper half of an IEEE float32 (1 sign, 8 exponent, 7 mantissa bits), the element type of
// DType::bf16. Same range as float, about 3 significant decimal digits; what the CPU's bf16 dot-product
// instructions read. Converting to it rounds to nearest, ties to even; NaN stays a (quiet) NaN. Converting
// from it is exact.
//
//   bfloat16 h(0.1f);   float(h) == 0.10009765625f
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace loom {

class bfloat16 {
 public:
  constexpr bfloat16() = default;
  /// Rounds `value` to the nearest bfloat16 (ties to even). A double is first narrowed to float by rounding
  /// to odd, so that the two roundings together equal one rounding of the double.
  template <class T>
    requires std::is_arithmetic_v<T>
  explicit bfloat16(T value) : bits_(round_to_bf16(to_float(value))) {}

  constexpr operator float() const { return std::bit_cast<float>(std::uint32_t(bits_) << 16); }

  static constexpr bfloat16 from_bits(std::uint16_t bits) {
    bfloat16 h;
    h.bits_ = bits;
    return h;
  }
  constexpr std::uint16_t bits() const { return bits_; }

 private:
  template <class T>
  static float to_float(T value) {
    if constexpr (!std::is_same_v<T, double>) {
      return static_cast<float>(value);
    } else {
      const float nearest = static_cast<float>(value);
      if (!std::isfinite(nearest) || double(nearest) == value) return nearest;
      // Inexact: the float toward zero of the two around `value`, with its last bit set (round to odd).
      auto bits = std::bit_cast<std::uint32_t>(nearest);
      if (std::fabs(double(nearest)) > std::fabs(value)) --bits;
      return std::bit_cast<float>(bits | 1u);
    }
  }

  static std::uint16_t round_to_bf16(float value) {
    const auto bits = std::bit_cast<std::uint32_t>(value);
    if (std::isnan(value)) return std::uint16_t((bits >> 16) | 0x0040u);  // keep the sign, set the quiet bit
    const std::uint32_t round_bit_and_tie = 0x7fffu + ((bits >> 16) & 1u);
    return std::uint16_t((bits + round_bit_and_tie) >> 16);
  }

  std::uint16_t bits_ = 0;
};

}  // namespace loom
