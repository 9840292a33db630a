#include "models/metric.hpp"

namespace loom::layers::metrics {

void Metric::update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) {
  if (!sample_weight.defined()) return update_state(y_true, y_pred);
  throw Error(fmt::format("metric '{}' does not take a sample_weight (override the three-argument update_state)",
                          name()));
}

void Metric::set_state(const std::vector<double>& state) {
  check(state.size() == 2, "metric '{}': set_state expects its 2 values (total, count), got {}", name(),
        state.size());
  total_ = state[0];
  count_ = state[1];
}

void Metric::build(const Shape& /*y_true_shape*/, const Shape& /*y_pred_shape*/) {}

}  // namespace loom::layers::metrics
