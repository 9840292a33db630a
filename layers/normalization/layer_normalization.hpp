#pragma once
// LayerNormalization (keras.layers.LayerNormalization): normalizes each sample over `axis` (one axis or
// several) to zero mean and unit (biased) variance, then scales by gamma and shifts by beta.
//
//   L::LayerNormalization ln({.axis = -1, .epsilon = 1e-3, .center = true, .scale = true});
//   L::LayerNormalization ln2({.axis = {1, 2}});     // over two axes; gamma/beta [d1, d2]
//
// y = (x - mean) / sqrt(var + epsilon) * gamma + beta, through the fused ops::layer_norm. Weights: gamma
// (if scale) then beta (if center), shaped like the normalized dimensions in increasing axis order. Keras
// defaults: epsilon 1e-3 (PyTorch 1e-5). No difference between training and inference.
//
// rms_scaling (Keras 3's deprecated option, taken from its **kwargs, so it comes after the named options):
// y = x / sqrt(var + epsilon) * gamma, the variance around the mean but x itself not centered (not the RMS;
// RMSNormalization is that). As in Keras it always creates gamma (even with scale = false) and never beta
// (center is ignored). Keras warns that the option is deprecated; loom does not.
//   L::LayerNormalization scaled({.rms_scaling = true});   // weights: gamma only
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "framework/tensor/shape.hpp"
#include "layers/layer.hpp"

namespace loom::layers {

struct LayerNormalizationOptions {
  Axes axis = -1;
  double epsilon = 1e-3;
  bool center = true;
  bool scale = true;
  Initializer beta_initializer = "zeros";
  Initializer gamma_initializer = "ones";
  bool rms_scaling = false;
  std::optional<std::string> name = std::nullopt;
};

class LayerNormalization : public Layer {
 public:
  explicit LayerNormalization(LayerNormalizationOptions options = {});
  /// Passes the input's Keras mask on, as Keras.
  bool supports_masking() const override { return true; }
  std::string class_name() const override { return "LayerNormalization"; }

  /// The normalized axes, non-negative and sorted, once built.
  const std::vector<std::int64_t>& axes() const { return axes_; }
  /// The options it was made with (saving a model writes them as Keras's config).
  const LayerNormalizationOptions& options() const { return options_; }
  bool rms_scaling() const { return options_.rms_scaling; }

 protected:
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& x, bool training) override;

 private:
  LayerNormalizationOptions options_;
  std::vector<std::int64_t> axes_;
  Shape built_shape_;
  Variable gamma_, beta_;

 protected:
  std::shared_ptr<Layer> move_into_shared() && override {
    return std::make_shared<LayerNormalization>(std::move(*this));
  }
};

}  // namespace loom::layers
