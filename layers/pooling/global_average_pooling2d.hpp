#pragma once
// GlobalAveragePooling2D (keras.layers.GlobalAveragePooling2D): the mean over the height and width of images.
//
//   L::GlobalAveragePooling2D pool;
//   Tensor p = pool(x);                                            // [B, H, W, C] -> [B, C]
//   L::GlobalAveragePooling2D({.data_format = "channels_first", .keepdims = true});  // [B, C, H, W] -> [B, C, 1, 1]
//
// data_format is Keras's (case-insensitive; Keras's default None reads the global image_data_format, which
// loom fixes at channels_last).
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "layers/pooling/base_global_pooling.hpp"

namespace loom::layers {

struct GlobalAveragePooling2DOptions {
  std::string data_format = "channels_last";
  bool keepdims = false;
  std::optional<std::string> name = std::nullopt;
};

class GlobalAveragePooling2D : public BaseGlobalPooling {
 public:
  explicit GlobalAveragePooling2D(GlobalAveragePooling2DOptions options = {});

  std::string class_name() const override { return "GlobalAveragePooling2D"; }

 protected:
  std::shared_ptr<Layer> move_into_shared() && override {
    return std::make_shared<GlobalAveragePooling2D>(std::move(*this));
  }
};

}  // namespace loom::layers
