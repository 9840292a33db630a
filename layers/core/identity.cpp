#include "layers/core/identity.hpp"

namespace loom::layers {

Identity::Identity(IdentityOptions options) : Layer("identity", options.name) {}

Tensor Identity::call(const Tensor& x, bool) { return x; }

}  // namespace loom::layers
