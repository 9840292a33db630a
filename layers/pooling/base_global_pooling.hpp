#pragma once
// What the global pooling layers share (Keras's BaseGlobalPooling): the data_format and keepdims options,
// the input checks, the output shape and the call, a mean or a maximum over every spatial axis.
// GlobalAveragePooling1D/2D and GlobalMaxPooling1D/2D are thin classes over it.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "layers/layer.hpp"

namespace loom::layers {

class BaseGlobalPooling : public Layer {
 public:
  /// [batch, spatial..., channels] (channels_last) or [batch, channels, spatial...] -> [batch, channels], or
  /// with keepdims the input's shape with every spatial axis 1.
  Shape compute_output_shape(const Shape& input_shape) const override;
  /// The arguments it was made with: data_format in lower case, as Keras stores it.
  const std::string& data_format() const { return data_format_; }
  bool keepdims() const { return keepdims_; }

 protected:
  enum class Reduction { mean, max };
  /// `rank` spatial dimensions (1 or 2); an unknown data_format is a loom::Error naming the layer.
  BaseGlobalPooling(std::string_view default_name, const std::optional<std::string>& name, std::size_t rank,
                    Reduction reduction, const std::string& data_format, bool keepdims);

  Tensor call(const Tensor& x, bool training) override;
  /// The rank and the dtype (float32 or float64), each failure naming the layer, the shape and the layout.
  void check_input(const Tensor& x) const;
  /// The spatial axes of an input.
  const Axes& spatial_axes() const { return axes_; }

 private:
  std::size_t rank_;
  Reduction reduction_;
  std::string data_format_;
  bool keepdims_;
  Axes axes_;
};

}  // namespace loom::layers
