#include "layers/regularization/dropout.hpp"

#include "framework/ops/ops.hpp"

namespace loom::layers {

Dropout::Dropout(double rate, DropoutOptions options) : Dropout("dropout", rate, std::move(options)) {}

Dropout::Dropout(std::string_view default_name, double rate, DropoutOptions options)
    : Layer(default_name, options.name), rate_(rate), options_(options), noise_shape_(std::move(options.noise_shape)) {
  check(rate >= 0.0 && rate <= 1.0, "{}: rate must be in [0, 1], got {}", name(), rate);
  if (noise_shape_)
    for (auto d : *noise_shape_)
      check(d > 0 || d == -1, "{}: noise_shape {} must hold positive sizes or -1 (the input's size)", name(),
            *noise_shape_);
  if (options.seed) generator_.emplace(*options.seed);
}

Tensor Dropout::call(const Tensor& x, bool training) {
  check(is_floating(x.dtype()), "{}: expected a float32 or float64 input, got {} of shape {}", name(), x.dtype(),
        x.shape());
  if (!training || rate_ == 0.0) return x;  // noise_shape is not looked at then, as in Keras
  Shape mask_shape = x.shape();
  if (noise_shape_) {
    check(noise_shape_->size() == x.shape().size(),
          "{}: noise_shape {} must have the rank of the input, got an input of shape {}", name(), *noise_shape_,
          x.shape());
    for (std::size_t i = 0; i < mask_shape.size(); ++i) {
      const std::int64_t d = (*noise_shape_)[i];
      check(d == -1 || d == 1 || d == x.shape()[i],
            "{}: noise_shape {} does not broadcast to the input's shape {} (axis {}: {} vs {})", name(), *noise_shape_,
            x.shape(), i, d, x.shape()[i]);
      if (d != -1) mask_shape[i] = d;
    }
  }
  if (rate_ == 1.0) return x * 0.0;  // Keras's backend returns zeros; ops::dropout cannot scale by 1/0
  // A seeded layer derives each call's seed from its own generator: a new mask per call, reproducible runs.
  const std::optional<std::uint64_t> seed =
      generator_ ? std::optional<std::uint64_t>(random::draw_seed(*generator_)) : std::nullopt;
  if (mask_shape == x.shape()) return ops::dropout(x, rate_, true, seed);
  // The mask (0 or 1/(1-rate)) drawn in noise_shape and broadcast; x * mask makes the gradient g * mask.
  return x * ops::dropout(Tensor::ones(mask_shape, x.dtype()), rate_, true, seed);
}

}  // namespace loom::layers
