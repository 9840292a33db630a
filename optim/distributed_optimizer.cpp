#include "optim/distributed_optimizer.hpp"

#include <utility>

#include "framework/tensor/error.hpp"

namespace loom::distributed {

namespace {

// DistributedOptimizer's hook: the weighted average over the ranks, after a first broadcast of the variables.
// The first step's gradients were computed from each rank's own initial values; Model::fit broadcasts before
// its first step, so only custom training loops see that first step differ from one process's.
class AllreduceAggregator final : public optim::GradientAggregator {
 public:
  std::vector<Tensor> aggregate(const std::vector<Tensor>& grads, const std::vector<Variable>& vars) override {
    const double weight = std::exchange(next_weight_, 1.0);
    if (world_size() == 1) return grads;  // exactly one process's step: no rounding through weight / weight
    if (!synchronized_) {
      broadcast_variables(vars);
      synchronized_ = true;
    }
    return allreduce_gradients(grads, weight);
  }
  void set_next_weight(double weight) override { next_weight_ = weight; }

 private:
  double next_weight_ = 1.0;
  bool synchronized_ = false;
};

}  // namespace

std::shared_ptr<optim::Optimizer> DistributedOptimizer(std::shared_ptr<optim::Optimizer> optimizer) {
  require_initialized("DistributedOptimizer");
  check(optimizer != nullptr, "distributed::DistributedOptimizer: the optimizer is null");
  optimizer->set_gradient_aggregator(std::make_shared<AllreduceAggregator>());
  return optimizer;
}

}  // namespace loom::distributed
