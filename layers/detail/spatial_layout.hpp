#pragma once
// The layouts of the image and sequence layers (pooling, padding, upsampling, spatial dropout): where the
// spatial axes are for a data_format, and the input checks they share. Not installed.
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>

#include "framework/tensor/error.hpp"
#include "framework/tensor/shape.hpp"
#include "framework/tensor/tensor.hpp"

namespace loom::layers::detail {

/// `text` in lower case (Keras lower-cases padding, data_format and interpolation names).
inline std::string lower_case(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return text;
}

/// "[batch, steps, features] (channels_last)", "[batch, channels, height, width] (channels_first)": the
/// input layout of a layer over `rank` (1 or 2) spatial dimensions, for messages.
inline std::string spatial_layout(std::size_t rank, const std::string& data_format) {
  const bool last = data_format == "channels_last";
  const char* spatial = rank == 1 ? "steps" : "height, width";
  const char* channels = rank == 1 ? "features" : "channels";
  return last ? fmt::format("[batch, {}, {}] (channels_last)", spatial, channels)
              : fmt::format("[batch, {}, {}] (channels_first)", channels, spatial);
}

/// The spatial axes of an input: 1..rank for channels_last, 2..rank + 1 for channels_first.
inline Axes spatial_axes(std::size_t rank, const std::string& data_format) {
  Axes axes;
  const std::int64_t first = data_format == "channels_last" ? 1 : 2;
  for (std::size_t d = 0; d < rank; ++d) axes.push_back(first + std::int64_t(d));
  return axes;
}

/// A loom::Error naming `layer`, the shape and the layout unless the input has rank + 2 axes.
inline void check_spatial_rank(const Shape& input_shape, std::size_t rank, const std::string& data_format,
                               std::string_view layer) {
  check(input_shape.size() == rank + 2, "{}: expected a rank-{} input {}, got shape {}", layer, rank + 2,
        spatial_layout(rank, data_format), input_shape);
}

/// A loom::Error naming `layer` unless x is float32 or float64.
inline void check_floating_input(const Tensor& x, std::string_view layer) {
  check(is_floating(x.dtype()), "{}: expected a float32 or float64 input, got {} of shape {}", layer, x.dtype(),
        x.shape());
}

}  // namespace loom::layers::detail
