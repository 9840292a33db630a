#pragma once
// Exchanging data with xtensor code: copies between loom::Tensor and xt::xarray<T>.
#include <xtensor/xarray.hpp>

#include "framework/tensor/tensor.hpp"

namespace loom {

/// A row-major copy of `t` as an xarray<T>; the values are converted to T.
template <class T>
xt::xarray<T> to_xarray(const Tensor& t) {
  std::vector<std::size_t> shape(t.shape().begin(), t.shape().end());
  xt::xarray<T> out(shape);
  const std::vector<T> values = t.to_vector<T>();
  std::copy(values.begin(), values.end(), out.begin());
  return out;
}

/// A contiguous Tensor holding a copy of `a` (any xtensor expression that evaluates to float, double,
/// int64_t or bool).
template <class T>
Tensor from_xarray(const xt::xarray<T>& a) {
  Shape shape(a.shape().begin(), a.shape().end());
  Tensor t = Tensor::zeros(shape, dtype_of<T>());
  std::copy(a.begin(), a.end(), t.data<T>());  // row-major iteration order
  return t;
}

}  // namespace loom
