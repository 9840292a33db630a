#include "layers/pooling/global_max_pooling2d.hpp"

namespace loom::layers {

GlobalMaxPooling2D::GlobalMaxPooling2D(GlobalMaxPooling2DOptions options)
    : BaseGlobalPooling("global_max_pooling2d", options.name, 2, Reduction::max, options.data_format,
                        options.keepdims) {}

}  // namespace loom::layers
