#pragma once
// GlobalMaxPooling2D (keras.layers.GlobalMaxPooling2D): the maximum over the height and width of images.
//
//   L::GlobalMaxPooling2D pool;
//   Tensor p = pool(x);                                            // [B, H, W, C] -> [B, C]
//   L::GlobalMaxPooling2D({.data_format = "channels_first", .keepdims = true});  // [B, C, H, W] -> [B, C, 1, 1]
//
// data_format is Keras's (case-insensitive; Keras's default None reads the global image_data_format, which
// loom fixes at channels_last).
// The gradient is split equally between tied maxima (ops::max, as JAX).
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "layers/pooling/base_global_pooling.hpp"

namespace loom::layers {

struct GlobalMaxPooling2DOptions {
  std::string data_format = "channels_last";
  bool keepdims = false;
  std::optional<std::string> name = std::nullopt;
};

class GlobalMaxPooling2D : public BaseGlobalPooling {
 public:
  explicit GlobalMaxPooling2D(GlobalMaxPooling2DOptions options = {});

  std::string class_name() const override { return "GlobalMaxPooling2D"; }

 protected:
  std::shared_ptr<Layer> move_into_shared() && override {
    return std::make_shared<GlobalMaxPooling2D>(std::move(*this));
  }
};

}  // namespace loom::layers
