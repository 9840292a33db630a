#pragma once
// SpatialDropout2D (keras.layers.SpatialDropout2D): Dropout of whole feature maps of images. While training,
// each channel of each sample is dropped over all its pixels together (Dropout's noise_shape
// [batch, 1, 1, channels], channels_first [batch, channels, 1, 1]) with probability `rate`, the kept ones
// scaled by 1 / (1 - rate); the identity otherwise.
//
//   L::SpatialDropout2D drop(0.2, {.data_format = "channels_first", .seed = 7});
//   Tensor y = drop(x, /*training=*/true);   // x [batch, channels, height, width]
//
// rate in [0, 1] (1 gives zeros while training), and seeds, as Dropout's.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "layers/regularization/dropout.hpp"

namespace loom::layers {

struct SpatialDropout2DOptions {
  std::string data_format = "channels_last";
  std::optional<std::uint64_t> seed = std::nullopt;
  std::optional<std::string> name = std::nullopt;
};

class SpatialDropout2D : public Dropout {
 public:
  explicit SpatialDropout2D(double rate, SpatialDropout2DOptions options = {});

  /// The options as Keras stores them: data_format in lower case, and the seed.
  const std::string& data_format() const { return data_format_; }
  const std::optional<std::uint64_t>& seed() const { return Dropout::options().seed; }
  Shape compute_output_shape(const Shape& input_shape) const override;
  std::string class_name() const override { return "SpatialDropout2D"; }

 protected:
  Tensor call(const Tensor& x, bool training) override;
  std::shared_ptr<Layer> move_into_shared() && override {
    return std::make_shared<SpatialDropout2D>(std::move(*this));
  }

 private:
  std::string data_format_;
};

}  // namespace loom::layers
