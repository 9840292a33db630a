#include "layers/pooling/average_pooling2d.hpp"

namespace loom::layers {

AveragePooling2D::AveragePooling2D(AveragePooling2DOptions options)
    : BasePooling("average_pooling2d", options.name, 2, Reduction::average, options.pool_size, options.strides,
                  options.padding, options.data_format) {}

}  // namespace loom::layers
