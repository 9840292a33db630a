#pragma once
// GlobalAveragePooling1D (keras.layers.GlobalAveragePooling1D): the mean over the steps of temporal data.
//
//   Tensor pooled = L::GlobalAveragePooling1D()(h);          // [B, T, F] -> [B, F]
//   L::GlobalAveragePooling1D({.data_format = "channels_first", .keepdims = true});   // [B, F, T] -> [B, F, 1]
//   Tensor p = L::GlobalAveragePooling1D()(h, mask);         // mask [B, T], true = keep
//
// With a mask (the input's Tensor::keras_mask, e.g. from Embedding with mask_zero, or given to the call, which
// then wins), [batch, steps] of any dtype (nonzero = keep), the mean is over the unmasked steps only:
// sum(where(mask, x, 0)) / count(mask), as Keras; a sample with every step masked gives NaN (0 / 0), as Keras.
// The output carries no mask (Keras's compute_mask returns None). data_format is Keras's (case-insensitive;
// Keras's default None reads the global image_data_format, which loom fixes at channels_last).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "layers/pooling/base_global_pooling.hpp"

namespace loom::layers {

struct GlobalAveragePooling1DOptions {
  std::string data_format = "channels_last";
  bool keepdims = false;
  std::optional<std::string> name = std::nullopt;
};

class GlobalAveragePooling1D : public BaseGlobalPooling {
 public:
  explicit GlobalAveragePooling1D(GlobalAveragePooling1DOptions options = {});

  using Layer::operator();
  /// Keras's call(inputs, mask=mask): `mask` [batch, steps] (undefined: the input's own mask, if any). On
  /// symbolic tensors the call is recorded as a graph node (a temporary moves into the graph).
  Tensor operator()(const Tensor& x, const Tensor& mask, bool training = false) &;
  Tensor operator()(const Tensor& x, const Tensor& mask, bool training = false) &&;

  bool supports_masking() const override { return true; }
  /// None: the steps are pooled away.
  Tensor compute_mask(const Tensor& input, const Tensor& mask) const override;
  std::string class_name() const override { return "GlobalAveragePooling1D"; }

 protected:
  Tensor call_with_mask(const Tensor& x, const Tensor& mask, bool training) override;
  std::shared_ptr<Layer> move_into_shared() && override {
    return std::make_shared<GlobalAveragePooling1D>(std::move(*this));
  }

 private:
  /// The call with an explicit mask; on symbolic tensors it records a node, owned by `owner` when given.
  Tensor run_with_mask(const Tensor& x, const Tensor& mask, bool training, std::shared_ptr<Layer> owner);
};

}  // namespace loom::layers
