#include "layers/pooling/max_pooling2d.hpp"

namespace loom::layers {

MaxPooling2D::MaxPooling2D(MaxPooling2DOptions options)
    : BasePooling("max_pooling2d", options.name, 2, Reduction::max, options.pool_size, options.strides,
                  options.padding, options.data_format) {}

}  // namespace loom::layers
