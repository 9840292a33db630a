#include "layers/normalization/group_normalization.hpp"

#include "framework/ops/ops.hpp"
#include "layers/normalization/detail/input_checks.hpp"

namespace loom::layers {

GroupNormalization::GroupNormalization(GroupNormalizationOptions options)
    : Layer("group_normalization", options.name), options_(std::move(options)) {
  check(options_.groups > 0 || options_.groups == -1,
        "{}: groups must be a positive number of groups or -1 (instance normalization), got {}", name(),
        options_.groups);
  check(options_.epsilon > 0.0, "{}: epsilon must be positive, got {}", name(), options_.epsilon);
}

void GroupNormalization::build(const Shape& input_shape) {
  const auto rank = std::int64_t(input_shape.size());
  check(rank >= 2, "{}: expected an input with a batch axis and a channel axis (rank >= 2), got shape {}", name(),
        input_shape);
  axis_ = normalize_axis(options_.axis, rank, name());
  check(axis_ != 0, "{}: axis {} is the batch axis of input {}; expected the channel axis", name(), options_.axis,
        input_shape);
  const std::int64_t channels = input_shape[std::size_t(axis_)];
  groups_ = options_.groups == -1 ? channels : options_.groups;
  check(channels >= groups_,
        "{}: GroupNormalization needs at least as many channels as groups: {} groups but {} channels (axis {} of "
        "input {})", name(), groups_, channels, options_.axis, input_shape);
  check(channels % groups_ == 0,
        "{}: GroupNormalization channels % groups != 0: {} channels (axis {} of input {}) cannot be split into {} "
        "equal groups", name(), channels, options_.axis, input_shape, groups_);
  built_shape_ = input_shape;
  if (options_.scale) gamma_ = add_weight("gamma", {channels}, options_.gamma_initializer);
  if (options_.center) beta_ = add_weight("beta", {channels}, options_.beta_initializer);
}

Tensor GroupNormalization::call(const Tensor& x, bool) {
  check_input_matches_build(x, built_shape_, {axis_}, dtype(), name());
  const Tensor gamma = gamma_.defined() ? gamma_.value() : Tensor();
  const Tensor beta = beta_.defined() ? beta_.value() : Tensor();
  return ops::group_norm(x, gamma, beta, groups_, axis_, options_.epsilon);
}

}  // namespace loom::layers
