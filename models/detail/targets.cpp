#include "models/detail/targets.hpp"

#include <cmath>
#include <vector>

#include "framework/ops/ops.hpp"

namespace loom::models::detail {

std::pair<Tensor, Tensor> squeeze_or_expand_to_same_rank(Tensor a, Tensor b) {
  if (a.ndim() == b.ndim() + 1 && a.shape().back() == 1) {
    if (b.ndim() == 1) b = ops::expand_dims(b, -1);
    else a = ops::squeeze(a, -1);
  } else if (b.ndim() == a.ndim() + 1 && b.shape().back() == 1) {
    if (a.ndim() == 1) a = ops::expand_dims(a, -1);
    else b = ops::squeeze(b, -1);
  }
  return {a, b};
}

Tensor class_ids(const Tensor& y_true, std::string_view fn) {
  if (y_true.dtype() == DType::i64) return y_true;
  check(is_floating(y_true.dtype()), "{}: y_true must hold class ids (int64, or whole numbers in float32/float64), "
        "got {} of shape {}", fn, y_true.dtype(), y_true.shape());
  const std::vector<double> values = y_true.to_vector<double>();
  for (std::size_t i = 0; i < values.size(); ++i)
    check(std::isfinite(values[i]) && values[i] == std::trunc(values[i]) && std::fabs(values[i]) < 9.0e15,
          "{}: y_true must hold class ids, got {} at flat index {} of a {} y_true of shape {}", fn, values[i], i,
          y_true.dtype(), y_true.shape());
  return ops::cast(y_true, DType::i64);
}

}  // namespace loom::models::detail
