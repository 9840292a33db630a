// The scalar (width 1) instantiation of the flash attention kernels: the reference path, always available,
// compiled with the project's baseline flags.
#include "framework/kernels/flash_attention_impl.hpp"

namespace loom::flash {
const KernelTable scalar_kernels = make_table<Scalar>();
}  // namespace loom::flash
