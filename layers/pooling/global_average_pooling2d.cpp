#include "layers/pooling/global_average_pooling2d.hpp"

namespace loom::layers {

GlobalAveragePooling2D::GlobalAveragePooling2D(GlobalAveragePooling2DOptions options)
    : BaseGlobalPooling("global_average_pooling2d", options.name, 2, Reduction::mean, options.data_format,
                        options.keepdims) {}

}  // namespace loom::layers
