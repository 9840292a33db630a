#pragma once
// The options of MaxPooling1D/2D and AveragePooling1D/2D (keras.layers.MaxPooling2D's arguments, in Keras's
// order). Sizes are brace lists with one value per spatial dimension or one for all.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace loom::layers {

struct Pooling1DOptions {
  std::vector<std::int64_t> pool_size = {2};
  std::optional<std::vector<std::int64_t>> strides = std::nullopt;  // none: pool_size
  std::string padding = "valid";                                    // "valid" or "same"
  std::string data_format = "channels_last";
  std::optional<std::string> name = std::nullopt;
};

struct Pooling2DOptions {
  std::vector<std::int64_t> pool_size = {2, 2};
  std::optional<std::vector<std::int64_t>> strides = std::nullopt;  // none: pool_size
  std::string padding = "valid";                                    // "valid" or "same"
  std::string data_format = "channels_last";
  std::optional<std::string> name = std::nullopt;
};

}  // namespace loom::layers
