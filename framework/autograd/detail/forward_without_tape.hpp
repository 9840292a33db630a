#pragma once
// Internal to remat (framework/autograd/remat.cpp): a forward pass whose ops the tapes do not keep.
#include <memory>
#include <vector>

#include "framework/autograd/tape.hpp"

namespace loom::autograd::detail {

/// True when some tape on this thread records (one is live and no NoGradGuard is active).
bool any_tape_recording();

/// RAII: while it lives, the tapes live before it record nothing, and a tape of its own, watching `inputs`,
/// keeps no backward rule (so no activation stays alive) but notes which trainable tensors the ops read.
class ForwardWithoutTape {
 public:
  explicit ForwardWithoutTape(const std::vector<Tensor>& inputs);
  ~ForwardWithoutTape();
  ForwardWithoutTape(const ForwardWithoutTape&) = delete;
  ForwardWithoutTape& operator=(const ForwardWithoutTape&) = delete;
  /// The trainable tensors (Variables' values) that recorded ops read, each once, in first-read order.
  const std::vector<Tensor>& trainable_reads() const;

 private:
  std::vector<std::shared_ptr<GradientTape::Recording>> paused_;
  std::shared_ptr<GradientTape::Recording> probe_;
};

}  // namespace loom::autograd::detail
