#include "framework/tensor/tensor.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "framework/kernels/dispatch.hpp"
#include "framework/kernels/strided.hpp"
#include "framework/ops/ops.hpp"
#include "framework/tensor/detail/buffer_pool.hpp"
#include "framework/tensor/detail/memory_accounting.hpp"
#include "framework/tensor/detail/tensor_impl.hpp"
#include "framework/tensor/memory.hpp"
#include "framework/tensor/random.hpp"

namespace loom {

namespace {

/// Symbolic tensors (framework/graph/symbolic.hpp) have no storage.
void check_has_data(const Tensor& t, std::string_view what) {
  check(t.impl().storage != nullptr, "{}: a symbolic tensor (shape {}, {}) has no data; only ops and layers can be "
        "applied to it (call the model on real data)", what, t.shape(), t.dtype());
}

/// No negative dimension, and a byte count that fits in memory's address range.
void check_shape(const Shape& shape, DType dtype, std::string_view op) {
  check(std::int64_t(shape.size()) <= kMaxRank, "{}: a shape of rank {} has more than {} dimensions", op,
        shape.size(), kMaxRank);
  for (auto d : shape) check(d >= 0, "{}: negative dimension in shape {}", op, shape);
  check(fits_in_int64(shape, std::int64_t(dtype_size(dtype))), "{}: shape {} of {} is too large to allocate", op,
        shape, dtype);
  check_fits_in_memory(numel(shape), dtype_size(dtype), "{}: shape {} of {}", op, shape, dtype);
}

template <class T>
T convert(auto value) {
  if constexpr (std::is_same_v<T, bool>) return value != decltype(value){};
  else return static_cast<T>(value);
}

}  // namespace

Storage::Storage(std::size_t bytes, bool zero) : bytes_(bytes) {
  if (bytes <= kInlineBytes) {
    const auto address = reinterpret_cast<std::uintptr_t>(inline_);
    data_ = inline_ + ((detail::kBufferAlignment - address % detail::kBufferAlignment) % detail::kBufferAlignment);
  } else {
    data_ = detail::allocate_buffer(bytes);
    if (data_ == nullptr) throw Error(fmt::format("Tensor: cannot allocate {} bytes", bytes));
  }
  if (zero) std::memset(data_, 0, bytes);
  detail::note_buffer_allocated(bytes);
}

Storage::~Storage() {
  detail::note_buffer_freed(bytes_);
  if (data_ >= inline_ && data_ < inline_ + sizeof(inline_)) return;
  detail::free_buffer(data_, bytes_);
}

// ---- factories ----

namespace {

/// A new contiguous tensor; `op` names the factory in the error for a negative or oversized shape.
Tensor fresh(const Shape& shape, DType dtype, bool zero, std::string_view op) {
  check_shape(shape, dtype, op);
  auto impl = std::make_shared<TensorImpl>();
  impl->id = next_tensor_id();
  impl->dtype = dtype;
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->offset = 0;
  impl->storage = std::make_shared<Storage>(std::size_t(loom::numel(shape)) * dtype_size(dtype), zero);
  return Tensor(std::move(impl));
}

Tensor filled(const Shape& shape, double value, DType dtype, std::string_view op) {
  Tensor t = fresh(shape, dtype, false, op);
  visit_dtype(dtype, [&]<class T>() { std::fill_n(t.data<T>(), t.numel(), convert<T>(value)); });
  return t;
}

}  // namespace

Tensor Tensor::empty(const Shape& shape, DType dtype) { return fresh(shape, dtype, false, "Tensor::empty"); }

Tensor Tensor::zeros(const Shape& shape, DType dtype) { return fresh(shape, dtype, true, "Tensor::zeros"); }

Tensor Tensor::ones(const Shape& shape, DType dtype) { return filled(shape, 1.0, dtype, "Tensor::ones"); }

Tensor Tensor::full(const Shape& shape, double value, DType dtype) {
  return filled(shape, value, dtype, "Tensor::full");
}

Tensor Tensor::scalar(double value, DType dtype) { return full(Shape{}, value, dtype); }

Tensor Tensor::arange(double start, double stop, double step, DType dtype) {
  check(step != 0.0 && std::isfinite(start) && std::isfinite(stop) && std::isfinite(step),
        "arange: expected finite start, stop and a nonzero step, got start={}, stop={}, step={}", start, stop, step);
  const double count = std::ceil((stop - start) / step);
  // Checked before the conversion: a double beyond int64's range does not convert.
  check(count < 0x1p62, "arange: start={}, stop={}, step={} would give {} values, too many to allocate", start, stop,
        step, count);
  const auto n = std::max<std::int64_t>(0, std::int64_t(count));
  Tensor t = empty(Shape{n}, dtype);
  visit_dtype(dtype, [&]<class T>() {
    T* out = t.data<T>();
    for (std::int64_t i = 0; i < n; ++i) out[i] = convert<T>(start + double(i) * step);
  });
  return t;
}

template <class T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape) {
  check_shape(shape, dtype_of<T>(), "Tensor::from_vector");
  check(std::int64_t(values.size()) == loom::numel(shape),
        "Tensor::from_vector: {} values cannot fill shape {} ({} elements)", values.size(), shape,
        loom::numel(shape));
  Tensor t = empty(shape, dtype_of<T>());
  std::copy(values.begin(), values.end(), t.data<T>());
  return t;
}

template Tensor Tensor::from_vector(const std::vector<float>&, const Shape&);
template Tensor Tensor::from_vector(const std::vector<double>&, const Shape&);
template Tensor Tensor::from_vector(const std::vector<std::int64_t>&, const Shape&);
template Tensor Tensor::from_vector(const std::vector<bool>&, const Shape&);
template Tensor Tensor::from_vector(const std::vector<bfloat16>&, const Shape&);

namespace {
template <class Sample>
Tensor random_tensor(const Shape& shape, DType dtype, std::optional<std::uint64_t> seed, std::string_view op,
                     Sample&& sample) {
  Tensor t = fresh(shape, dtype, false, op);
  random::Generator seeded(seed.value_or(0));
  random::Generator& generator = seed ? seeded : random::thread_generator();
  visit_floating(dtype, op, [&]<class T>() {
    T* out = t.data<T>();
    for (std::int64_t i = 0; i < t.numel(); ++i) out[i] = T(sample(generator));
  });
  return t;
}
}  // namespace

Tensor Tensor::randn(const Shape& shape, DType dtype, std::optional<std::uint64_t> seed) {
  return random_tensor(shape, dtype, seed, "Tensor::randn", [](random::Generator& g) { return g.normal(); });
}

Tensor Tensor::uniform(const Shape& shape, double lo, double hi, DType dtype, std::optional<std::uint64_t> seed) {
  check(lo <= hi, "Tensor::uniform: expected lo <= hi, got lo={}, hi={}", lo, hi);
  return random_tensor(shape, dtype, seed, "Tensor::uniform",
                       [lo, hi](random::Generator& g) { return g.uniform(lo, hi); });
}

// ---- metadata ----

void Tensor::throw_undefined() {
  throw Error("Tensor: this tensor is undefined (default-constructed or an empty gradient)");
}

const Shape& Tensor::shape() const { return impl().shape; }
const Strides& Tensor::strides() const { return impl().strides; }
std::int64_t Tensor::offset() const { return impl().offset; }
DType Tensor::dtype() const { return impl().dtype; }
std::uint64_t Tensor::id() const { return impl().id; }

Tensor Tensor::keras_mask() const { return Tensor(impl().keras_mask); }

Tensor Tensor::with_keras_mask(const Tensor& mask) const {
  if (mask.defined())
    check(mask.dtype() == DType::boolean, "with_keras_mask: the mask must be boolean, got {} (tensor {}, mask {})",
          mask.dtype(), shape(), mask.shape());
  auto alias = std::make_shared<TensorImpl>(impl());
  alias->keras_mask = mask.impl_;
  return Tensor(std::move(alias));
}
std::int64_t Tensor::ndim() const { return std::int64_t(impl().shape.size()); }
std::int64_t Tensor::numel() const { return loom::numel(impl().shape); }

std::int64_t Tensor::size(std::int64_t axis) const {
  return shape()[std::size_t(normalize_axis(axis, ndim(), "Tensor::size"))];
}

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;  // no element to be out of place
  const auto& s = shape();
  const auto& st = strides();
  std::int64_t expected = 1;
  for (std::size_t i = s.size(); i-- > 0;) {
    if (s[i] != 1 && st[i] != expected) return false;
    expected *= s[i];
  }
  return true;
}

bool Tensor::shares_storage_with(const Tensor& other) const {
  return defined() && other.defined() && impl().storage == other.impl().storage;
}

// ---- element access ----

template <class T>
T* Tensor::data() const {
  check(dtype() == dtype_of<T>(), "Tensor::data: the tensor holds {}, not {}", dtype(), dtype_of<T>());
  check_has_data(*this, "Tensor::data");
  return reinterpret_cast<T*>(impl().storage->data()) + impl().offset;
}

template float* Tensor::data<float>() const;
template double* Tensor::data<double>() const;
template std::int64_t* Tensor::data<std::int64_t>() const;
template bool* Tensor::data<bool>() const;
template bfloat16* Tensor::data<bfloat16>() const;

template <class T>
std::vector<T> Tensor::to_vector() const {
  check_has_data(*this, "Tensor::to_vector");
  check_fits_in_memory(numel(), sizeof(T), "Tensor::to_vector of shape {}", shape());
  std::vector<T> out(static_cast<std::size_t>(numel()));
  visit_dtype(dtype(), [&]<class S>() {
    const S* base = reinterpret_cast<const S*>(impl().storage->data());
    for_each_strided(shape(), strides(), offset(),
                     [&](std::int64_t i, std::int64_t at) { out[std::size_t(i)] = convert<T>(base[at]); });
  });
  return out;
}

template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<std::int64_t> Tensor::to_vector<std::int64_t>() const;
template std::vector<bool> Tensor::to_vector<bool>() const;
template std::vector<bfloat16> Tensor::to_vector<bfloat16>() const;

template <class T>
T Tensor::item() const {
  check_has_data(*this, "Tensor::item");
  check(numel() == 1, "Tensor::item: expected a tensor with one element, got shape {}", shape());
  return to_vector<T>()[0];
}

template float Tensor::item<float>() const;
template double Tensor::item<double>() const;
template std::int64_t Tensor::item<std::int64_t>() const;
template bool Tensor::item<bool>() const;

// ---- conversions and views (recorded: they are ops) ----

Tensor Tensor::to(DType dtype) const { return ops::cast(*this, dtype); }
Tensor Tensor::contiguous() const { return ops::contiguous(*this); }
Tensor Tensor::clone() const { return ops::clone(*this); }
Tensor Tensor::reshape(const Shape& shape) const { return ops::reshape(*this, shape); }
Tensor Tensor::permute(const std::vector<std::int64_t>& axes) const { return ops::permute(*this, axes); }
Tensor Tensor::transpose(std::int64_t axis0, std::int64_t axis1) const { return ops::transpose(*this, axis0, axis1); }
Tensor Tensor::slice(std::int64_t axis, std::int64_t start, std::int64_t stop, std::int64_t step) const {
  return ops::slice(*this, axis, start, stop, step);
}
Tensor Tensor::broadcast_to(const Shape& shape) const { return ops::broadcast_to(*this, shape); }

std::uint64_t next_tensor_id() {
  static std::atomic<std::uint64_t> counter{1};
  return counter.fetch_add(1, std::memory_order_relaxed);
}

Tensor make_view(const Tensor& base, Shape shape, Strides strides, std::int64_t offset) {
  check(base.impl().symbolic == nullptr, "a view of a symbolic tensor of shape {}: this op does not build graphs "
        "(use it inside a layer)", base.shape());
  if (std::int64_t(shape.size()) > kMaxRank)
    throw Error(fmt::format("a view of shape {} has {} dimensions, more than {}", shape, shape.size(), kMaxRank));
  auto impl = std::make_shared<TensorImpl>();
  impl->id = next_tensor_id();
  impl->dtype = base.dtype();
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->storage = base.impl().storage;
  return Tensor(std::move(impl));
}

// ---- printing ----

namespace {

constexpr std::int64_t kEdgeItems = 3;      // shown at each end of a long dimension, as NumPy
constexpr std::int64_t kSummaryThreshold = 1000;

std::string format_element(const Tensor& t, std::int64_t storage_index) {
  return visit_dtype(t.dtype(), [&]<class T>() -> std::string {
    const T value = reinterpret_cast<const T*>(t.impl().storage->data())[storage_index];
    if constexpr (std::is_same_v<T, bool>) return value ? "true" : "false";
    else if constexpr (std::is_integral_v<T>) return fmt::format("{}", value);
    else return fmt::format("{:.6g}", static_cast<double>(value));
  });
}

void format_dimension(const Tensor& t, std::size_t dim, std::int64_t position, bool summarize,
                      std::size_t indent, std::string& out) {
  const auto& shape = t.shape();
  const std::int64_t n = shape[dim];
  const bool elide = summarize && n > 2 * kEdgeItems;
  out += '[';
  for (std::int64_t i = 0; i < n; ++i) {
    if (elide && i == kEdgeItems) {
      out += dim + 1 == shape.size() ? "..., " : fmt::format("...,\n{:{}}", "", indent + 1);
      i = n - kEdgeItems;
    }
    const std::int64_t at = position + i * t.strides()[dim];
    if (dim + 1 == shape.size()) out += format_element(t, at);
    else format_dimension(t, dim + 1, at, summarize, indent + 1, out);
    if (i + 1 < n) out += dim + 1 == shape.size() ? ", " : fmt::format(",\n{:{}}", "", indent + 1);
  }
  out += ']';
}

}  // namespace

std::string to_string(const Tensor& t) {
  if (!t.defined()) return "Tensor(undefined)";
  if (t.impl().symbolic) return fmt::format("KerasTensor(shape={}, dtype={})", t.shape(), t.dtype());
  std::string head = fmt::format("Tensor(shape={}, dtype={},", t.shape(), t.dtype());
  std::string values;
  if (t.ndim() == 0) values = format_element(t, t.offset());
  else format_dimension(t, 0, t.offset(), t.numel() > kSummaryThreshold, 7, values);
  return fmt::format("{}\n       {})", head, values);
}

}  // namespace loom
