#include "layers/regularization/spatial_dropout2d.hpp"

#include "framework/ops/window.hpp"
#include "layers/detail/spatial_layout.hpp"

namespace loom::layers {

namespace {

/// One mask entry per sample and channel (an unknown data_format is refused once the layer has its name).
Shape channel_noise_shape(const std::string& data_format) {
  return detail::lower_case(data_format) == "channels_last" ? Shape{-1, 1, 1, -1} : Shape{-1, -1, 1, 1};
}

}  // namespace

SpatialDropout2D::SpatialDropout2D(double rate, SpatialDropout2DOptions options)
    : Dropout("spatial_dropout2d", rate,
              {.noise_shape = channel_noise_shape(options.data_format), .seed = options.seed, .name = options.name}),
      data_format_(ops::standardize_data_format(options.data_format, name())) {}

Shape SpatialDropout2D::compute_output_shape(const Shape& input_shape) const {
  detail::check_spatial_rank(input_shape, 2, data_format_, name());
  return input_shape;
}

Tensor SpatialDropout2D::call(const Tensor& x, bool training) {
  compute_output_shape(x.shape());  // Keras checks the rank in inference too
  return Dropout::call(x, training);
}

}  // namespace loom::layers
