#pragma once
// The internals behind a Tensor handle, for the framework's own code (ops, kernels, file readers): the shared
// buffer and the geometry. Not installed; users see only framework/tensor/tensor.hpp.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "framework/tensor/dtype.hpp"
#include "framework/tensor/shape.hpp"
#include "framework/tensor/tensor.hpp"

namespace loom {

namespace graph {
struct Origin;
}  // namespace graph

/// One 64-byte aligned, zero-initialised buffer (left uninitialised with zero = false, for
/// Tensor::empty). Never resized; shared by a tensor and its views. Small buffers live inside the
/// Storage object itself, so a small tensor costs one allocation fewer (the fixed cost of an op on tiny
/// tensors is mostly allocation).
class Storage {
 public:
  explicit Storage(std::size_t bytes, bool zero = true);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  std::byte* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  static constexpr std::size_t kInlineBytes = 256;
  std::byte* data_;
  std::size_t bytes_;
  // Aligned by hand inside the object: an alignas(64) member would send every Storage through the slow
  // aligned-allocation path of malloc.
  std::byte inline_[kInlineBytes + 63];
};

/// What a Tensor handle points to. `id` is unique for the life of the process and never reused: tapes and
/// optimizer slots key on it.
struct TensorImpl {
  std::uint64_t id;
  DType dtype;
  Shape shape;
  Strides strides;       // in elements
  std::int64_t offset;   // in elements, into storage
  std::shared_ptr<Storage> storage;
  bool trainable = false;  // the value of a trainable Variable: tapes watch it automatically
  std::shared_ptr<TensorImpl> keras_mask;  // Tensor::keras_mask
  /// Set for a symbolic tensor (framework/graph/symbolic.hpp), which has no storage.
  std::shared_ptr<const graph::Origin> symbolic;
};

/// A fresh tensor id (ids are never reused).
std::uint64_t next_tensor_id();

/// A view onto `base`'s storage with new geometry (no copy, not recorded). Used by the view ops.
Tensor make_view(const Tensor& base, Shape shape, Strides strides, std::int64_t offset);

}  // namespace loom
