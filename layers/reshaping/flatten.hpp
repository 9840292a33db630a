#pragma once
// Flatten (keras.layers.Flatten): [batch, d1, d2, ...] -> [batch, d1 * d2 * ...]; the batch axis stays.
// A rank-1 input [batch] becomes [batch, 1]. With data_format "channels_first" the channel axis (axis 1) is
// moved last before flattening, so the order of the features matches a channels_last model (as Keras).
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "layers/layer.hpp"

namespace loom::layers {

struct FlattenOptions {
  std::string data_format = "channels_last";  // or "channels_first"
  std::optional<std::string> name = std::nullopt;
};

class Flatten : public Layer {
 public:
  explicit Flatten(FlattenOptions options = {});

  Shape compute_output_shape(const Shape& input_shape) const override;
  /// "channels_last" or "channels_first".
  std::string data_format() const { return channels_first_ ? "channels_first" : "channels_last"; }

 protected:
  Tensor call(const Tensor& x, bool training) override;

 private:
  bool channels_first_;

 protected:
  std::shared_ptr<Layer> move_into_shared() && override { return std::make_shared<Flatten>(std::move(*this)); }
};

}  // namespace loom::layers
