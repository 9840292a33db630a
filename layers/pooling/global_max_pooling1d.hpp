#pragma once
// GlobalMaxPooling1D (keras.layers.GlobalMaxPooling1D): the maximum over the steps of temporal data.
//
//   Tensor pooled = L::GlobalMaxPooling1D()(h);              // [B, T, F] -> [B, F]
//
// Masks: as in Keras 3, which gives this layer no compute_mask (so supports_masking is false), a mask on the
// input is ignored: the maximum is over every step, masked or not, and the output carries no mask (Keras also
// warns). The gradient is split equally between tied maxima (ops::max, as JAX). data_format as
// GlobalAveragePooling1D's (case-insensitive, channels_last by default).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "layers/pooling/base_global_pooling.hpp"

namespace loom::layers {

struct GlobalMaxPooling1DOptions {
  std::string data_format = "channels_last";
  bool keepdims = false;
  std::optional<std::string> name = std::nullopt;
};

class GlobalMaxPooling1D : public BaseGlobalPooling {
 public:
  explicit GlobalMaxPooling1D(GlobalMaxPooling1DOptions options = {});

  std::string class_name() const override { return "GlobalMaxPooling1D"; }

 protected:
  std::shared_ptr<Layer> move_into_shared() && override {
    return std::make_shared<GlobalMaxPooling1D>(std::move(*this));
  }
};

}  // namespace loom::layers
