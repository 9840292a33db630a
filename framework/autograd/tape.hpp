#pragma once
// GradientTape: TensorFlow-style reverse-mode autograd.
//
//   GradientTape tape;                       // records while alive, on this thread; GradientTape({.persistent = true})
//   tape.watch(x);                           // trainable Variables are watched automatically
//   Tensor y = ops::sum(ops::tanh(ops::matmul(x, w)));
//   auto grads = tape.gradient(y, {x, w});   // one gradient per source, shaped like it
//
// Every differentiable op, after computing its outputs, calls autograd::record() (framework/autograd/record.hpp).
// Each active tape that tracks one of the op's inputs (watched, or produced by a node it recorded) appends a
// node. gradient() replays the nodes backwards; the backward rules are themselves loom ops, so an outer tape
// records them and can differentiate a gradient again.
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "framework/tensor/tensor.hpp"
#include "framework/tensor/variable.hpp"

namespace loom {

/// What gradient() returns for a source the target does not depend on.
enum class UnconnectedGradients { zero, none };

/// GradientTape's options, named and ordered as tf.GradientTape's arguments.
struct GradientTapeOptions {
  /// A persistent tape may be asked for gradients several times; otherwise once.
  bool persistent = false;
  /// Trainable Variables read while the tape records are watched without watch().
  bool watch_accessed_variables = true;
};

class GradientTape {
 public:
  explicit GradientTape(const GradientTapeOptions& options = {});
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

  bool persistent() const;
  /// The ops this tape has recorded, in recording order (emptied by gradient() on a non-persistent tape).
  std::vector<std::string_view> recorded_ops() const;

  struct Recording;  // what the tape has recorded (framework/autograd/tape.cpp)

 private:
  std::shared_ptr<Recording> recording_;  // shared with the creating thread's list of live tapes
};

/// RAII: nothing is recorded on this thread while it lives (optimizer updates, numeric gradcheck passes).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;
};

}  // namespace loom
