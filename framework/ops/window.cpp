#include "framework/ops/window.hpp"

#include <algorithm>
#include <cctype>

#include "framework/tensor/error.hpp"

namespace loom::ops {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

}  // namespace

std::vector<std::int64_t> per_dimension(const std::vector<std::int64_t>& values, std::size_t rank,
                                        std::string_view what, std::string_view op) {
  if (values.size() == rank) return values;
  check(values.size() == 1, "{}: {} must have 1 or {} values (one per spatial dimension), got {}", op, what, rank,
        Shape(values));
  return std::vector<std::int64_t>(rank, values[0]);
}

std::string standardize_data_format(const std::string& data_format, std::string_view op) {
  const std::string l = lower(data_format);
  check(l == "channels_last" || l == "channels_first",
        "{}: data_format must be channels_last or channels_first, got '{}'", op, data_format);
  return l;
}

WindowGeometry window_geometry(const Shape& spatial, const std::vector<std::int64_t>& window,
                               const std::vector<std::int64_t>& strides, const std::vector<std::int64_t>& dilation,
                               const std::string& padding, std::string_view op) {
  const std::size_t rank = spatial.size();
  check(window.size() == rank, "{}: expected a window of {} sizes for spatial dimensions {}, got {}", op, rank,
        spatial, Shape(window));
  WindowGeometry g{per_dimension(strides, rank, "strides", op), per_dimension(dilation, rank, "dilation_rate", op),
                   std::vector<std::int64_t>(rank, 0), std::vector<std::int64_t>(rank, 0)};
  const std::string mode = lower(padding);
  check(mode == "valid" || mode == "same" || mode == "causal",
        "{}: padding must be 'valid', 'same' or 'causal', got '{}'", op, padding);
  check(mode != "causal" || rank == 1, "{}: 'causal' padding is for one spatial dimension, got spatial sizes {}", op,
        spatial);
  for (std::size_t d = 0; d < rank; ++d) {
    check(g.strides[d] >= 1 && g.dilation[d] >= 1 && window[d] >= 1,
          "{}: window sizes, strides and dilation rates must be positive, got window {}, strides {}, dilation {}", op,
          Shape(window), Shape(g.strides), Shape(g.dilation));
    const std::int64_t extent =
        checked_add(checked_mul(window[d] - 1, g.dilation[d], op), 1, op);  // the dilated window
    if (mode == "same") {
      const std::int64_t outputs = spatial[d] / g.strides[d] + (spatial[d] % g.strides[d] != 0);
      const std::int64_t total =
          std::max<std::int64_t>(checked_add(checked_mul(std::max<std::int64_t>(outputs - 1, 0), g.strides[d], op),
                                             extent - spatial[d], op),
                                 0);
      g.pad_before[d] = total / 2;
      g.pad_after[d] = total - total / 2;
    } else if (mode == "causal") {
      g.pad_before[d] = extent - 1;
    }
  }
  return g;
}

Shape window_output_sizes(const Shape& input, const std::vector<std::int64_t>& window,
                          const WindowGeometry& geometry, std::string_view op) {
  check(input.size() >= 3, "{}: expected an input [batch, spatial..., channels], got shape {}", op, input);
  const Shape spatial(input.begin() + 1, input.end() - 1);
  const std::size_t rank = spatial.size();
  check(window.size() == rank && geometry.strides.size() == rank && geometry.dilation.size() == rank &&
            geometry.pad_before.size() == rank && geometry.pad_after.size() == rank,
        "{}: the window {}, strides {}, dilation {} and paddings {} / {} must each have one value per spatial "
        "dimension of the input {}",
        op, Shape(window), Shape(geometry.strides), Shape(geometry.dilation), Shape(geometry.pad_before),
        Shape(geometry.pad_after), input);
  Shape out(rank);
  for (std::size_t d = 0; d < rank; ++d) {
    check(window[d] >= 1 && geometry.strides[d] >= 1 && geometry.dilation[d] >= 1 && geometry.pad_before[d] >= 0,
          "{}: window sizes, strides and dilation rates must be positive and padding before non-negative, got "
          "window {}, strides {}, dilation {}, padding before {}",
          op, Shape(window), Shape(geometry.strides), Shape(geometry.dilation), Shape(geometry.pad_before));
    const std::int64_t extent = checked_add(checked_mul(window[d] - 1, geometry.dilation[d], op), 1, op);
    const std::int64_t padded =
        checked_add(checked_add(spatial[d], geometry.pad_before[d], op), geometry.pad_after[d], op);
    check(padded >= extent,
          "{}: the window ({} taps{}, spanning {}) is larger than the padded input along spatial dimension {} ({} + "
          "{} + {} = {}) of the input {} (channels last)",
          op, window[d], geometry.dilation[d] > 1 ? fmt::format(" dilated by {}", geometry.dilation[d]) : "", extent,
          d, spatial[d], geometry.pad_before[d], geometry.pad_after[d], padded, input);
    out[d] = (padded - extent) / geometry.strides[d] + 1;
  }
  return out;
}

}  // namespace loom::ops
