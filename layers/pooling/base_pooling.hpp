#pragma once
// What the pooling layers share (Keras's BasePooling): the options and their checks, the input checks, the
// output shape and the call, ops::max_pool or ops::average_pool. MaxPooling1D/2D and AveragePooling1D/2D are
// thin classes over it.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "layers/layer.hpp"

namespace loom::layers {

class BasePooling : public Layer {
 public:
  /// Unknown sizes (-1: the batch, or a length known only at the call) stay unknown.
  Shape compute_output_shape(const Shape& input_shape) const override;
  /// The exact output shape on symbolic inputs (a stand-in size cannot show a free size through the
  /// strides); none for an input the call refuses, whose stand-in run then reports it.
  std::optional<graph::OutputSpec> compute_output_spec(const Tensor& x) const override;

  /// The options as Keras stores them: one value per spatial dimension (strides = pool_size when not
  /// given), padding and data_format in lower case.
  const std::vector<std::int64_t>& pool_size() const { return pool_size_; }
  const std::vector<std::int64_t>& strides() const { return strides_; }
  const std::string& padding() const { return padding_; }
  const std::string& data_format() const { return data_format_; }

 protected:
  enum class Reduction { max, average };
  /// Checks the options as Keras does (pool_size and strides positive, one per dimension or one for all;
  /// padding "valid" or "same", data_format channels_last or channels_first, both case-insensitive), naming
  /// the layer. `rank` is the number of spatial dimensions, 1 or 2.
  BasePooling(std::string_view default_name, const std::optional<std::string>& name, std::size_t rank,
              Reduction reduction, const std::vector<std::int64_t>& pool_size,
              const std::optional<std::vector<std::int64_t>>& strides, const std::string& padding,
              const std::string& data_format);

  Tensor call(const Tensor& x, bool training) override;

 private:
  /// Rank, and every known spatial size against the pool ("valid"); failures name the layer, the input's
  /// shape and the layout expected.
  void check_input(const Shape& input_shape) const;

  std::size_t rank_;
  Reduction reduction_;
  std::vector<std::int64_t> pool_size_;
  std::vector<std::int64_t> strides_;
  std::string padding_;
  std::string data_format_;
  Axes axes_;  // the spatial axes of an input
};

}  // namespace loom::layers
