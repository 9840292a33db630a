#pragma once
// SpatialDropout1D (keras.layers.SpatialDropout1D): Dropout of whole feature maps of temporal data. While
// training, each feature of each sample is dropped at every step together (Dropout's noise_shape
// [batch, 1, features]) with probability `rate`, the kept ones scaled by 1 / (1 - rate); the identity
// otherwise.
//
//   L::SpatialDropout1D drop(0.2, {.seed = 7});
//   Tensor y = drop(x, /*training=*/true);   // x [batch, steps, features]
//
// rate in [0, 1] (1 gives zeros while training), and seeds, as Dropout's.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "layers/regularization/dropout.hpp"

namespace loom::layers {

struct SpatialDropout1DOptions {
  std::optional<std::uint64_t> seed = std::nullopt;
  std::optional<std::string> name = std::nullopt;
};

class SpatialDropout1D : public Dropout {
 public:
  explicit SpatialDropout1D(double rate, SpatialDropout1DOptions options = {});

  /// The seed it was made with (saving a model writes it).
  const std::optional<std::uint64_t>& seed() const { return Dropout::options().seed; }
  Shape compute_output_shape(const Shape& input_shape) const override;
  std::string class_name() const override { return "SpatialDropout1D"; }

 protected:
  Tensor call(const Tensor& x, bool training) override;
  std::shared_ptr<Layer> move_into_shared() && override {
    return std::make_shared<SpatialDropout1D>(std::move(*this));
  }
};

}  // namespace loom::layers
