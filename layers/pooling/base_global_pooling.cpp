#include "layers/pooling/base_global_pooling.hpp"

#include "framework/ops/ops.hpp"
#include "layers/detail/spatial_layout.hpp"

namespace loom::layers {

BaseGlobalPooling::BaseGlobalPooling(std::string_view default_name, const std::optional<std::string>& name,
                                     std::size_t rank, Reduction reduction, const std::string& data_format,
                                     bool keepdims)
    : Layer(default_name, name),
      rank_(rank),
      reduction_(reduction),
      data_format_(ops::standardize_data_format(data_format, this->name())),
      keepdims_(keepdims),
      axes_(detail::spatial_axes(rank, data_format_)) {}

Shape BaseGlobalPooling::compute_output_shape(const Shape& input_shape) const {
  detail::check_spatial_rank(input_shape, rank_, data_format_, name());
  Shape out = input_shape;
  for (auto it = axes_.rbegin(); it != axes_.rend(); ++it) {
    if (keepdims_) out[std::size_t(*it)] = 1;
    else out.erase(out.begin() + *it);
  }
  return out;
}

void BaseGlobalPooling::check_input(const Tensor& x) const {
  compute_output_shape(x.shape());
  detail::check_floating_input(x, name());
}

Tensor BaseGlobalPooling::call(const Tensor& x, bool) {
  check_input(x);
  // max: the gradient is split equally between tied maxima (ops::max, as JAX).
  return reduction_ == Reduction::mean ? ops::mean(x, axes_, keepdims_) : ops::max(x, axes_, keepdims_);
}

}  // namespace loom::layers
