#include "layers/pooling/max_pooling1d.hpp"

namespace loom::layers {

MaxPooling1D::MaxPooling1D(MaxPooling1DOptions options)
    : BasePooling("max_pooling1d", options.name, 1, Reduction::max, options.pool_size, options.strides,
                  options.padding, options.data_format) {}

}  // namespace loom::layers
