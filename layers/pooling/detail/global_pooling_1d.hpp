#pragma once
// What GlobalAveragePooling1D and GlobalMaxPooling1D share (Keras's BaseGlobalPooling with one pooled
// dimension): the data_format option, the rank-3 input check and the output shape. Not installed.
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>

#include "framework/tensor/error.hpp"
#include "framework/tensor/shape.hpp"

namespace loom::layers::detail {

/// Keras's standardize_data_format: `data_format` in lower case, which must be channels_last or
/// channels_first (else a loom::Error naming `layer`).
inline std::string standardize_data_format(const std::string& data_format, std::string_view layer) {
  std::string lower = data_format;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  check(lower == "channels_last" || lower == "channels_first",
        "{}: data_format must be channels_last or channels_first, got '{}'", layer, data_format);
  return lower;
}

/// The steps axis for a standardized data_format: 1 for channels_last, 2 for channels_first.
inline std::int64_t steps_axis(const std::string& data_format) { return data_format == "channels_last" ? 1 : 2; }

/// [batch, steps, features] (channels_last) or [batch, features, steps] -> [batch, features], or with
/// keepdims the input's shape with the steps axis 1; a rank other than 3 is a loom::Error naming `layer`.
inline Shape global_pooling_1d_shape(const Shape& input_shape, std::int64_t steps_axis, bool keepdims,
                                     std::string_view layer) {
  check(input_shape.size() == 3,
        "{}: expected a rank-3 input ([batch, steps, features] for channels_last, [batch, features, steps] for "
        "channels_first), got shape {}",
        layer, input_shape);
  Shape out = input_shape;
  if (keepdims) out[std::size_t(steps_axis)] = 1;
  else out.erase(out.begin() + steps_axis);
  return out;
}

}  // namespace loom::layers::detail
