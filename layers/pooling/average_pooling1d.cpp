#include "layers/pooling/average_pooling1d.hpp"

namespace loom::layers {

AveragePooling1D::AveragePooling1D(AveragePooling1DOptions options)
    : BasePooling("average_pooling1d", options.name, 1, Reduction::average, options.pool_size, options.strides,
                  options.padding, options.data_format) {}

}  // namespace loom::layers
