#pragma once
// NumPy .npy files (format 1.0-3.0): float32 and float64 (plus int64 and bool), little-endian, C order.
#include <string>

#include "framework/tensor/tensor.hpp"

namespace loom::io {

/// Writes atomically: to a temporary file in the same folder, renamed over `path` once complete.
void save_npy(const std::string& path, const Tensor& t);
/// Reads a .npy file; anything else (big-endian, Fortran order, other dtypes, truncated data) is a
/// loom::Error naming the file and the problem. Bytes after the data are ignored, as np.load does.
Tensor load_npy(const std::string& path);

}  // namespace loom::io
