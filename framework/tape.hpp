#pragma once
// GradientTape: TensorFlow-style reverse-mode autograd.
//
//   GradientTape tape;                       // records while alive, on this thread
//   tape.watch(x);                           // trainable Variables are watched automatically
//   Tensor y = ops::sum(ops::tanh(ops::matmul(x, w)));
//   auto grads = tape.gradient(y, {x, w});   // one gradient per source, shaped like it
//
// Every differentiable op, after computing its outputs, calls autograd::record(). Each active tape that
// tracks one of the op's inputs (watched, or produced by a node it recorded) appends a node. gradient()
// replays the nodes backwards; the backward rules are themselves loom ops, so an outer tape records them and
// can differentiate a gradient again.
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "framework/tensor.hpp"
#include "framework/variable.hpp"

namespace loom {

/// Gradient of each of a node's inputs given the gradients of its outputs (zeros for outputs that got
/// none). An undefined Tensor means "no gradient" (an integer index, a mask). A result may have the
/// broadcast output shape: the tape sums it down to the input's shape.
using BackwardFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& output_grads)>;

struct TensorMeta {
  std::uint64_t id;
  DType dtype;
  Shape shape;
};

struct TapeNode {
  const char* op;
  std::vector<TensorMeta> inputs;
  std::vector<TensorMeta> outputs;
  BackwardFn backward;
};

/// What gradient() returns for a source the target does not depend on.
enum class UnconnectedGradients { zero, none };

/// The ids a tape tracks, as a sorted vector: ops create ids in increasing order, so inserting an op's
/// output is an append, and a lookup is a binary search with no per-id allocation (unlike a hash set).
class TensorIdSet {
 public:
  bool contains(std::uint64_t id) const;
  void insert(std::uint64_t id);
  void clear() { ids_.clear(); }

 private:
  std::vector<std::uint64_t> ids_;
};

class GradientTape {
 public:
  explicit GradientTape(bool persistent = false, bool watch_accessed_variables = true);
  ~GradientTape();
  GradientTape(const GradientTape&) = delete;
  GradientTape& operator=(const GradientTape&) = delete;

  void watch(const Tensor& t);
  void watch(const std::vector<Tensor>& ts);

  /// d(sum(target * output_gradient)) / d(source) for each source; output_gradient defaults to ones.
  /// A non-persistent tape may be asked once. With check_numerics on, the gradients each backward rule
  /// returns are checked too (the op is named "<op> backward").
  std::vector<Tensor> gradient(const Tensor& target, const std::vector<Tensor>& sources,
                               const Tensor& output_gradient = {},
                               UnconnectedGradients unconnected = UnconnectedGradients::zero);
  std::vector<Tensor> gradient(const Tensor& target, const std::vector<Variable>& sources,
                               const Tensor& output_gradient = {},
                               UnconnectedGradients unconnected = UnconnectedGradients::zero);

  /// RAII: while the returned guard lives, this tape records nothing (other tapes still do).
  class StopRecording {
   public:
    explicit StopRecording(GradientTape& tape);
    ~StopRecording();
    StopRecording(const StopRecording&) = delete;
    StopRecording& operator=(const StopRecording&) = delete;

   private:
    GradientTape& tape_;
  };
  [[nodiscard]] StopRecording stop_recording() { return StopRecording(*this); }

  bool persistent() const { return persistent_; }
  const std::vector<TapeNode>& nodes() const { return nodes_; }

 private:
  friend struct TapeRecorder;  // tape.cpp: appends nodes on behalf of autograd::record
  bool tracks(const Tensor& t) const;
  bool recording() const { return paused_ == 0; }

  bool persistent_;
  bool watch_accessed_variables_;
  bool used_ = false;
  int paused_ = 0;
  std::vector<TapeNode> nodes_;
  TensorIdSet tracked_;  // ids watched or produced by a recorded node
};

/// RAII: nothing is recorded on this thread while it lives (optimizer updates, numeric gradcheck passes).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;
};

namespace autograd {
/// True when some tape on this thread would record an op with these inputs, or when check_numerics is on
/// (framework/numerics.hpp) and one of them is a float tensor. Ops check it before building their backward
/// closure and calling record(), so untaped code pays almost nothing.
bool needs_recording(std::initializer_list<const Tensor*> inputs);
bool needs_recording(const std::vector<Tensor>& inputs);
/// True when some tape on this thread would record an op with these inputs, whatever check_numerics says:
/// for choices that depend on whether gradients can be asked for (not for guarding record()).
bool tape_tracks(std::initializer_list<const Tensor*> inputs);
/// With check_numerics on, first throws loom::Error if an output holds a NaN or an infinity. Then records
/// `op` on every active tape that tracks one of `inputs`.
void record(const char* op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
            BackwardFn backward);
}  // namespace autograd

}  // namespace loom
