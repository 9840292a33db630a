#include "layers/pooling/base_pooling.hpp"

#include <algorithm>

#include "framework/ops/ops.hpp"
#include "layers/detail/spatial_layout.hpp"

namespace loom::layers {

namespace {

bool all_positive(const std::vector<std::int64_t>& values) {
  return std::all_of(values.begin(), values.end(), [](std::int64_t v) { return v >= 1; });
}

}  // namespace

BasePooling::BasePooling(std::string_view default_name, const std::optional<std::string>& name, std::size_t rank,
                         Reduction reduction, const std::vector<std::int64_t>& pool_size,
                         const std::optional<std::vector<std::int64_t>>& strides, const std::string& padding,
                         const std::string& data_format)
    : Layer(default_name, name),
      rank_(rank),
      reduction_(reduction),
      pool_size_(ops::per_dimension(pool_size, rank, "pool_size", this->name())),
      strides_(strides ? ops::per_dimension(*strides, rank, "strides", this->name()) : pool_size_),
      padding_(detail::lower_case(padding)),
      data_format_(ops::standardize_data_format(data_format, this->name())),
      axes_(detail::spatial_axes(rank, data_format_)) {
  const std::string& layer = this->name();
  check(all_positive(pool_size_), "{}: pool_size must be positive, got {}", layer, Shape(pool_size_));
  check(all_positive(strides_), "{}: strides must be positive, got {}", layer, Shape(strides_));
  check(padding_ == "valid" || padding_ == "same", "{}: padding must be 'valid' or 'same', got '{}'", layer,
        padding);
}

void BasePooling::check_input(const Shape& input_shape) const {
  const std::string& layer = name();
  detail::check_spatial_rank(input_shape, rank_, data_format_, layer);
  for (std::size_t d = 0; d < rank_; ++d) {
    const std::int64_t size = input_shape[std::size_t(axes_[d])];
    if (size == -1) continue;  // unknown until called on data
    check(size >= 1, "{}: expected at least one position along every spatial axis of the input {}, got shape {}",
          layer, detail::spatial_layout(rank_, data_format_), input_shape);
    check(padding_ != "valid" || size >= pool_size_[d],
          "{}: the pool size {} is larger than the input along spatial axis {} ({} positions; input shape {}, {}, "
          "padding 'valid')",
          layer, Shape(pool_size_), axes_[d], size, input_shape, detail::spatial_layout(rank_, data_format_));
  }
}

Shape BasePooling::compute_output_shape(const Shape& input_shape) const {
  check_input(input_shape);
  // The op's geometry over a channels_last stand-in [1, spatial..., 1]; an unknown size stands in as one pool.
  Shape spatial;
  for (std::size_t d = 0; d < rank_; ++d) {
    const std::int64_t size = input_shape[std::size_t(axes_[d])];
    spatial.push_back(size == -1 ? pool_size_[d] : size);
  }
  const ops::WindowGeometry geometry = ops::window_geometry(spatial, pool_size_, strides_, {1}, padding_, name());
  Shape stand_in{1};
  stand_in.insert(stand_in.end(), spatial.begin(), spatial.end());
  stand_in.push_back(1);
  const Shape sizes = ops::window_output_sizes(stand_in, pool_size_, geometry, name());
  Shape out = input_shape;
  for (std::size_t d = 0; d < rank_; ++d) {
    std::int64_t& size = out[std::size_t(axes_[d])];
    if (size != -1) size = sizes[d];
  }
  return out;
}

std::optional<graph::OutputSpec> BasePooling::compute_output_spec(const Tensor& x) const {
  if (!is_floating(x.dtype())) return std::nullopt;
  return graph::OutputSpec{compute_output_shape(x.shape()), x.dtype()};
}

Tensor BasePooling::call(const Tensor& x, bool) {
  check_input(x.shape());
  detail::check_floating_input(x, name());
  const ops::PoolOptions options{.strides = strides_, .padding = padding_, .data_format = data_format_};
  return reduction_ == Reduction::max ? ops::max_pool(x, pool_size_, options)
                                      : ops::average_pool(x, pool_size_, options);
}

}  // namespace loom::layers
