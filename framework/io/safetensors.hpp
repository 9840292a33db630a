#pragma once
// safetensors files (https://github.com/huggingface/safetensors): an 8-byte little-endian header length N,
// N bytes of UTF-8 JSON naming each tensor's dtype, shape and byte range, then the tensors' bytes.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "framework/tensor/tensor.hpp"

namespace loom::io {

/// The whole content of a safetensors file.
struct SafetensorsFile {
  std::vector<std::pair<std::string, Tensor>> tensors;  // in order of their data in the file
  std::map<std::string, std::string> metadata;           // the "__metadata__" entry; empty when absent
};

/// Writes f32, f64, i64 and bool tensors as "F32", "F64", "I64" and "BOOL", in the given order, with
/// `metadata` as "__metadata__" (omitted when empty). The header is padded with spaces to a multiple of 8
/// bytes, as the reference writer does. Atomic: written to a temporary file in the same folder, then renamed
/// over `path`. Empty, repeated or non-UTF-8 names (and the reserved name "__metadata__") are a loom::Error.
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

/// Reads and strictly validates a safetensors file: the JSON header (no duplicate keys, no unknown fields),
/// the dtypes, and that the tensors' byte ranges match their shapes and tile the data exactly (no overlap,
/// gap or trailing byte). F32, F64, I64 and BOOL load as they are; F16 and BF16 are converted to f32. Any
/// problem is a loom::Error naming the file and the problem.
SafetensorsFile read_safetensors(const std::string& path);

/// The tensors of read_safetensors(path), in order of their data in the file.
std::vector<std::pair<std::string, Tensor>> load_safetensors(const std::string& path);

}  // namespace loom::io
