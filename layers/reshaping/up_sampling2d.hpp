#pragma once
// UpSampling2D (keras.layers.UpSampling2D): images enlarged by integer factors.
//
//   L::UpSampling2D up;                                         // [B, H, W, C] -> [B, 2H, 2W, C]
//   L::UpSampling2D({.size = {2, 3}, .interpolation = "bilinear"});   // [B, H, W, C] -> [B, 2H, 3W, C]
//
// size: one factor for both dimensions or (rows, columns), each >= 1. interpolation (case-insensitive):
// "nearest" repeats every row and column (Keras's ops.repeat), "bilinear" is jax.image.resize's triangle
// filter with half-pixel centers: output position o samples the input at (o + 0.5) / size - 0.5, the edge
// rows and columns repeated beyond the border. Keras's "bicubic", "lanczos3" and "lanczos5" are not
// implemented (a loom::Error). Both modes are composed of differentiable ops (any order); "nearest" takes
// any dtype, "bilinear" float32 or float64.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "layers/layer.hpp"

namespace loom::layers {

struct UpSampling2DOptions {
  std::vector<std::int64_t> size = {2, 2};
  std::string data_format = "channels_last";
  std::string interpolation = "nearest";  // or "bilinear"
  std::optional<std::string> name = std::nullopt;
};

class UpSampling2D : public Layer {
 public:
  explicit UpSampling2D(UpSampling2DOptions options = {});

  /// Unknown sizes (-1) stay unknown.
  Shape compute_output_shape(const Shape& input_shape) const override;
  /// The options as Keras stores them: two factors, data_format and interpolation in lower case.
  const std::vector<std::int64_t>& size() const { return size_; }
  const std::string& data_format() const { return data_format_; }
  const std::string& interpolation() const { return interpolation_; }
  std::string class_name() const override { return "UpSampling2D"; }

 protected:
  Tensor call(const Tensor& x, bool training) override;
  std::shared_ptr<Layer> move_into_shared() && override { return std::make_shared<UpSampling2D>(std::move(*this)); }

 private:
  std::vector<std::int64_t> size_;
  std::string data_format_;
  std::string interpolation_;
};

}  // namespace loom::layers
