#pragma once
// GroupNormalization (keras.layers.GroupNormalization): splits the channels (the dimension at `axis`) into
// `groups` contiguous blocks and normalizes each sample's block over it and every other non-batch axis.
//
//   L::GroupNormalization gn({.groups = 4, .axis = -1, .epsilon = 1e-3});
//   L::GroupNormalization instance_norm({.groups = -1});     // one group per channel
//
// Channel c belongs to group c / (channels / groups) (as Keras and PyTorch). groups = -1 is instance
// normalization (groups = channels); channels must be a multiple of groups. Fused ops::group_norm; biased
// variance; the same in training and inference. Weights: gamma (if scale) then beta (if center), [channels].
// groups = 1 is not LayerNormalization: gamma and beta here are per channel only.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "layers/layer.hpp"

namespace loom::layers {

struct GroupNormalizationOptions {
  std::int64_t groups = 32;
  std::int64_t axis = -1;
  double epsilon = 1e-3;
  bool center = true;
  bool scale = true;
  Initializer beta_initializer = "zeros";
  Initializer gamma_initializer = "ones";
  std::optional<std::string> name = std::nullopt;
};

class GroupNormalization : public Layer {
 public:
  explicit GroupNormalization(GroupNormalizationOptions options = {});
  /// Passes the input's Keras mask on, as Keras.
  bool supports_masking() const override { return true; }

  /// The number of groups once built (groups = -1 resolved to the channel count).
  std::int64_t groups() const { return groups_; }
  /// The options it was made with (saving a model writes them as Keras's config).
  const GroupNormalizationOptions& options() const { return options_; }

 protected:
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& x, bool training) override;

 private:
  GroupNormalizationOptions options_;
  std::int64_t axis_ = -1;
  std::int64_t groups_ = 0;
  Shape built_shape_;
  Variable gamma_, beta_;

 protected:
  std::shared_ptr<Layer> move_into_shared() && override {
    return std::make_shared<GroupNormalization>(std::move(*this));
  }
};

}  // namespace loom::layers
