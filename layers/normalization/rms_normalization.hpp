#pragma once
// RMSNormalization (keras.layers.RMSNormalization): scales each sample by the reciprocal root mean square
// over `axis` (one axis or several), then by a learned `scale`; no centering, no offset.
//
//   L::RMSNormalization rms({.axis = -1, .epsilon = 1e-6});
//
// y = x / sqrt(mean(x^2) + epsilon) * scale, through the fused ops::rms_norm. Weight: scale (initialized to
// ones), shaped like the normalized dimensions. Keras's epsilon 1e-6 (PyTorch's RMSNorm: machine epsilon).
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "framework/tensor/shape.hpp"
#include "layers/layer.hpp"

namespace loom::layers {

struct RMSNormalizationOptions {
  Axes axis = -1;
  double epsilon = 1e-6;
  std::optional<std::string> name = std::nullopt;
};

class RMSNormalization : public Layer {
 public:
  std::string class_name() const override { return "RMSNormalization"; }
  explicit RMSNormalization(RMSNormalizationOptions options = {});

  /// The normalized axes, non-negative and sorted, once built.
  const std::vector<std::int64_t>& axes() const { return axes_; }
  /// The options it was made with (saving a model writes them as Keras's config).
  const RMSNormalizationOptions& options() const { return options_; }

 protected:
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& x, bool training) override;

 private:
  RMSNormalizationOptions options_;
  std::vector<std::int64_t> axes_;
  Shape built_shape_;
  Variable scale_;

 protected:
  std::shared_ptr<Layer> move_into_shared() && override { return std::make_shared<RMSNormalization>(std::move(*this)); }
};

}  // namespace loom::layers
