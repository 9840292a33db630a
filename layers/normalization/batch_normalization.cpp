#include "layers/normalization/batch_normalization.hpp"

#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "layers/normalization/detail/input_checks.hpp"

namespace loom::layers {

BatchNormalization::BatchNormalization(BatchNormalizationOptions options)
    : Layer("batch_normalization", options.name), options_(std::move(options)) {
  check(options_.momentum >= 0.0 && options_.momentum <= 1.0, "{}: momentum must be in [0, 1], got {}", name(),
        options_.momentum);
  check(options_.epsilon > 0.0, "{}: epsilon must be positive, got {}", name(), options_.epsilon);
}

void BatchNormalization::build(const Shape& input_shape) {
  axis_ = normalize_axis(options_.axis, std::int64_t(input_shape.size()), name());
  built_shape_ = input_shape;
  const Shape shape{input_shape[std::size_t(axis_)]};
  if (options_.scale) gamma_ = add_weight("gamma", shape, options_.gamma_initializer);
  if (options_.center) beta_ = add_weight("beta", shape, options_.beta_initializer);
  moving_mean_ = add_weight("moving_mean", shape, options_.moving_mean_initializer, /*trainable=*/false);
  moving_variance_ = add_weight("moving_variance", shape, options_.moving_variance_initializer, /*trainable=*/false);
}

Tensor BatchNormalization::call(const Tensor& x, bool training) {
  check_input_matches_build(x, built_shape_, {axis_}, dtype(), name());
  const Tensor gamma = gamma_.defined() ? gamma_.value() : Tensor();
  const Tensor beta = beta_.defined() ? beta_.value() : Tensor();
  // A frozen layer runs in inference mode even while training (Keras: `training and self.trainable`).
  if (!training || !trainable())
    return ops::batch_norm_inference(x, moving_mean_, moving_variance_, gamma, beta, axis_, options_.epsilon);
  const auto [y, mean, variance] = ops::batch_norm(x, gamma, beta, axis_, options_.epsilon);
  {
    NoGradGuard no_grad;  // the moving statistics are state, not part of the computation being differentiated
    const double m = options_.momentum;
    moving_mean_.assign(moving_mean_.value() * m + mean * (1.0 - m));
    moving_variance_.assign(moving_variance_.value() * m + variance * (1.0 - m));
  }
  return y;
}

}  // namespace loom::layers
