#include "layers/pooling/global_max_pooling1d.hpp"

namespace loom::layers {

GlobalMaxPooling1D::GlobalMaxPooling1D(GlobalMaxPooling1DOptions options)
    : BaseGlobalPooling("global_max_pooling1d", options.name, 1, Reduction::max, options.data_format,
                        options.keepdims) {}

}  // namespace loom::layers
