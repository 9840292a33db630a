#pragma once
// BatchNormalization (keras.layers.BatchNormalization): normalizes each channel (the dimension at `axis`)
// over every other axis.
//
//   L::BatchNormalization bn({.axis = -1, .momentum = 0.99, .epsilon = 1e-3});
//   Tensor y = bn(x, /*training=*/true);   // batch statistics; updates the moving ones
//   Tensor z = bn(x);                      // inference: the moving statistics
//
// Training (training = true and the layer trainable): y = (x - mean) / sqrt(var + epsilon) * gamma + beta
// with the batch's mean and biased variance (fused ops::batch_norm), and, not recorded on any tape,
//   moving_mean = moving_mean * momentum + mean * (1 - momentum)     (the same for moving_variance, with the
// biased batch variance). Otherwise (inference, or a frozen layer, as in Keras) the moving statistics are
// used (ops::batch_norm_inference). Keras conventions that differ from PyTorch: momentum 0.99 weighs the old
// value (PyTorch's momentum 0.1 weighs the new one), epsilon 1e-3 (PyTorch 1e-5), and the moving variance is
// updated with the biased variance (PyTorch: unbiased).
// Weights, all [channels]: gamma (if scale), beta (if center), then the non-trainable moving_mean and
// moving_variance.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "layers/layer.hpp"

namespace loom::layers {

struct BatchNormalizationOptions {
  std::int64_t axis = -1;
  double momentum = 0.99;
  double epsilon = 1e-3;
  bool center = true;
  bool scale = true;
  Initializer beta_initializer = "zeros";
  Initializer gamma_initializer = "ones";
  Initializer moving_mean_initializer = "zeros";
  Initializer moving_variance_initializer = "ones";
  std::optional<std::string> name = std::nullopt;
};

class BatchNormalization : public Layer {
 public:
  explicit BatchNormalization(BatchNormalizationOptions options = {});
  /// Passes the input's Keras mask on, as Keras (whose training statistics also skip masked steps: loom's
  /// do not yet).
  bool supports_masking() const override { return true; }

  /// The channel axis, non-negative, once built.
  std::int64_t axis() const { return axis_; }
  /// The options it was made with (saving a model writes them as Keras's config).
  const BatchNormalizationOptions& options() const { return options_; }

 protected:
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& x, bool training) override;

 private:
  BatchNormalizationOptions options_;
  std::int64_t axis_ = -1;
  Shape built_shape_;
  Variable gamma_, beta_, moving_mean_, moving_variance_;

 protected:
  std::shared_ptr<Layer> move_into_shared() && override {
    return std::make_shared<BatchNormalization>(std::move(*this));
  }
};

}  // namespace loom::layers
