#pragma once
// Tensor: a cheap, shallow-copy handle to an n-dimensional array with a runtime dtype.
//
//   Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, Shape{2, 3});
//   Tensor b = a.transpose();            // a view: shares a's storage, strides swapped
//   Tensor c = b.contiguous();           // a fresh row-major copy
//   fmt::print("{}\n", c);               // shape, dtype and values, NumPy style
//
// Copies of a Tensor share everything; clone() is the deep copy. Compute ops always return fresh contiguous
// tensors; view ops (reshape of contiguous data, transpose/permute, slice, broadcast_to) share storage.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "framework/tensor/dtype.hpp"
#include "framework/tensor/error.hpp"
#include "framework/tensor/shape.hpp"

namespace loom {

class Storage;      // the buffer a tensor and its views share (framework/tensor/detail/tensor_impl.hpp)
struct TensorImpl;  // what a handle points to, internal to the framework (same file)

class Tensor {
 public:
  /// An undefined tensor (no storage): what gradient() returns for unconnected sources with the `none` option.
  Tensor() = default;

  // ---- factories (all return contiguous tensors with fresh storage) ----
  /// NumPy's empty: the elements are not initialised (write every one before reading any).
  static Tensor empty(const Shape& shape, DType dtype = DType::f32);
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32);
  static Tensor ones(const Shape& shape, DType dtype = DType::f32);
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32);
  static Tensor scalar(double value, DType dtype = DType::f32);  // rank 0
  /// Values start, start+step, ... < stop (NumPy arange).
  static Tensor arange(double start, double stop, double step = 1.0, DType dtype = DType::f32);
  static Tensor arange(std::int64_t stop, DType dtype = DType::i64) { return arange(0.0, double(stop), 1.0, dtype); }
  /// Copies `values`; the shape defaults to 1-D. Element type picks the dtype (float, double, int64_t, bool).
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape);
  template <class T>
  static Tensor from_vector(const std::vector<T>& values) { return from_vector(values, Shape{std::int64_t(values.size())}); }
  /// Standard normal / uniform [lo, hi) samples. With a seed the result depends only on (seed, shape, dtype);
  /// without one it draws from this thread's generator (see random.hpp).
  static Tensor randn(const Shape& shape, DType dtype = DType::f32, std::optional<std::uint64_t> seed = {});
  static Tensor uniform(const Shape& shape, double lo = 0.0, double hi = 1.0, DType dtype = DType::f32,
                        std::optional<std::uint64_t> seed = {});
  static Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype()); }
  static Tensor ones_like(const Tensor& t) { return ones(t.shape(), t.dtype()); }

  // ---- metadata ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  const Strides& strides() const;
  std::int64_t offset() const;  // in elements, into the shared storage
  DType dtype() const;
  /// Unique for the life of the process and never reused: tapes and optimizer slots key on it.
  std::uint64_t id() const;
  std::int64_t ndim() const;
  std::int64_t numel() const;
  /// Size of one dimension; negative axes count from the end.
  std::int64_t size(std::int64_t axis) const;
  bool is_contiguous() const;
  /// True when both handles refer to the same storage (a view and its base do).
  bool shares_storage_with(const Tensor& other) const;

  // ---- element access ----
  /// Pointer to the first element (storage + offset). T must match the dtype exactly.
  template <class T>
  T* data() const;
  /// All elements in row-major order, converted to T.
  template <class T>
  std::vector<T> to_vector() const;
  /// The single element of a tensor with numel() == 1, converted to T.
  template <class T>
  T item() const;

  // ---- conversions and views: differentiable, they record on active tapes like any op ----
  Tensor to(DType dtype) const;                   // ops::cast
  Tensor contiguous() const;                      // itself when already contiguous, else a copy
  Tensor clone() const;                           // always a deep copy
  Tensor reshape(const Shape& shape) const;       // one dimension may be -1
  Tensor permute(const std::vector<std::int64_t>& axes) const;
  Tensor transpose(std::int64_t axis0 = -2, std::int64_t axis1 = -1) const;
  Tensor slice(std::int64_t axis, std::int64_t start, std::int64_t stop, std::int64_t step = 1) const;
  Tensor broadcast_to(const Shape& shape) const;

  // ---- Keras's mask (a layer's output may carry one: Embedding with mask_zero; docs/layers.md, "Masks") ----
  /// The boolean mask attached to this tensor, undefined when none.
  Tensor keras_mask() const;
  /// The same tensor (same id, data and geometry, so tapes see one tensor) carrying `mask` instead (undefined:
  /// none). This handle is unchanged.
  Tensor with_keras_mask(const Tensor& mask) const;

  /// The internals (defined in framework/tensor/detail/tensor_impl.hpp, for the framework's own code).
  TensorImpl& impl() const {
    if (!impl_) throw_undefined();
    return *impl_;
  }
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

 private:
  [[noreturn]] static void throw_undefined();
  std::shared_ptr<TensorImpl> impl_;
};

/// NumPy-style text: "Tensor(shape=[2, 3], dtype=f32,\n       [[1, 2, 3],\n        [4, 5, 6]])".
std::string to_string(const Tensor& t);

}  // namespace loom

template <>
struct fmt::formatter<loom::Tensor> : fmt::formatter<std::string> {
  auto format(const loom::Tensor& t, fmt::format_context& ctx) const {
    return fmt::formatter<std::string>::format(loom::to_string(t), ctx);
  }
};
