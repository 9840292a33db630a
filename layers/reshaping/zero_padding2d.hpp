#pragma once
// ZeroPadding2D (keras.layers.ZeroPadding2D): rows and columns of zeros around images.
//
//   L::ZeroPadding2D pad;                             // one on every side: [B, H, W, C] -> [B, H + 2, W + 2, C]
//   L::ZeroPadding2D({.padding = {1, 2}});            // (symmetric height, symmetric width): [B, H + 2, W + 4, C]
//   L::ZeroPadding2D({.padding = {0, 1, 2, 3}});      // (top, bottom, left, right): [B, H + 1, W + 5, C]
//
// Keras's padding is an int, (sym_h, sym_w) or ((top, bottom), (left, right)): here 1, 2 or 4 values, each
// >= 0. channels_first inputs are [batch, channels, height, width]. Any dtype pads (ops::pad); the gradient
// is the slice of the output's gradient where the input sits.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "layers/layer.hpp"

namespace loom::layers {

struct ZeroPadding2DOptions {
  std::vector<std::int64_t> padding = {1, 1};
  std::string data_format = "channels_last";
  std::optional<std::string> name = std::nullopt;
};

class ZeroPadding2D : public Layer {
 public:
  explicit ZeroPadding2D(ZeroPadding2DOptions options = {});

  /// Unknown sizes (-1) stay unknown.
  Shape compute_output_shape(const Shape& input_shape) const override;
  /// {top, bottom, left, right}, as Keras stores it ((top, bottom), (left, right)).
  const std::vector<std::int64_t>& padding() const { return padding_; }
  /// channels_last or channels_first (Keras lower-cases it).
  const std::string& data_format() const { return data_format_; }
  std::string class_name() const override { return "ZeroPadding2D"; }

 protected:
  Tensor call(const Tensor& x, bool training) override;
  std::shared_ptr<Layer> move_into_shared() && override { return std::make_shared<ZeroPadding2D>(std::move(*this)); }

 private:
  std::vector<std::int64_t> padding_;
  std::string data_format_;
};

}  // namespace loom::layers
