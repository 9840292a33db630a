#pragma once
// How a window slides over the spatial dimensions of an image or a sequence: the geometry shared by the
// convolutions (framework/ops/convolution.hpp) and the pooling ops (framework/ops/pooling.hpp).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "framework/tensor/shape.hpp"

namespace loom::ops {

/// Per spatial dimension (1 or 2 of them): the step between windows, the step between the taps of one
/// window, and the positions added before and after the input (zeros for a convolution, left out of a pool).
/// The output has floor((in + pad_before + pad_after - (window - 1) * dilation - 1) / stride) + 1 positions.
/// pad_before is >= 0; pad_after may be negative, leaving trailing input positions out (the transposed
/// convolutions' output_padding needs it).
struct WindowGeometry {
  std::vector<std::int64_t> strides;
  std::vector<std::int64_t> dilation;
  std::vector<std::int64_t> pad_before;
  std::vector<std::int64_t> pad_after;
};

/// Keras's padding names as a geometry for an input of `spatial` sizes and a window of `window` taps: "valid"
/// (none), "same" (ceil(in / stride) outputs; an odd total puts the extra position after, as TensorFlow and
/// JAX), "causal" (one spatial dimension; (window - 1) * dilation before). `strides` and `dilation` hold one
/// value per dimension or one for all. Names are case-insensitive; anything else is a loom::Error naming `op`.
WindowGeometry window_geometry(const Shape& spatial, const std::vector<std::int64_t>& window,
                               const std::vector<std::int64_t>& strides, const std::vector<std::int64_t>& dilation,
                               const std::string& padding, std::string_view op);

/// Output spatial sizes of `geometry` over a channels_last `input` [batch, spatial..., channels] with
/// `window` taps; a loom::Error naming `op` and the shapes when a field has the wrong length or a
/// non-positive stride or dilation, or the window is longer than the padded input.
Shape window_output_sizes(const Shape& input, const std::vector<std::int64_t>& window,
                          const WindowGeometry& geometry, std::string_view op);

/// `values` with one entry per spatial dimension: itself when it has `rank` entries, its one value repeated
/// when it has one (Keras's int-or-tuple arguments); else a loom::Error naming `op` and `what`.
std::vector<std::int64_t> per_dimension(const std::vector<std::int64_t>& values, std::size_t rank,
                                        std::string_view what, std::string_view op);

/// Keras's data_format in lower case: "channels_last" or "channels_first"; anything else is a loom::Error.
std::string standardize_data_format(const std::string& data_format, std::string_view op);

}  // namespace loom::ops
