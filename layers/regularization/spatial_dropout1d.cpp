#include "layers/regularization/spatial_dropout1d.hpp"

#include "layers/detail/spatial_layout.hpp"

namespace loom::layers {

SpatialDropout1D::SpatialDropout1D(double rate, SpatialDropout1DOptions options)
    : Dropout("spatial_dropout1d", rate,
              {.noise_shape = Shape{-1, 1, -1}, .seed = options.seed, .name = options.name}) {}

Shape SpatialDropout1D::compute_output_shape(const Shape& input_shape) const {
  detail::check_spatial_rank(input_shape, 1, "channels_last", name());
  return input_shape;
}

Tensor SpatialDropout1D::call(const Tensor& x, bool training) {
  compute_output_shape(x.shape());  // Keras checks the rank in inference too
  return Dropout::call(x, training);
}

}  // namespace loom::layers
