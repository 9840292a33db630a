#pragma once
// Variable: a named, mutable tensor, the way weights are held. Trainable variables are watched by every
// GradientTape automatically (TensorFlow's watch_accessed_variables).
#include <memory>
#include <string>

#include "framework/tensor/tensor.hpp"

namespace loom {

class Variable {
 public:
  Variable() = default;
  /// Takes a private contiguous copy of `initial_value`.
  explicit Variable(const Tensor& initial_value, std::string name = "variable", bool trainable = true);

  const std::string& name() const;
  /// Layers name their weights by path ("encoder/dense/kernel") and rename them when nested in a parent.
  void set_name(std::string name);
  /// The tensor that ops see. Its id stays the same across assign(), so tapes and optimizer slots follow it.
  const Tensor& value() const;
  operator const Tensor&() const { return value(); }  // NOLINT: a Variable is usable wherever a Tensor is
  bool trainable() const;
  void set_trainable(bool trainable);
  const Shape& shape() const { return value().shape(); }
  DType dtype() const { return value().dtype(); }
  std::uint64_t id() const { return value().id(); }
  bool defined() const { return state_ != nullptr; }

  /// Overwrites the value in place (not recorded on any tape). Shape and dtype must match.
  void assign(const Tensor& new_value);
  void assign_add(const Tensor& delta);
  void assign_sub(const Tensor& delta);

 private:
  struct State {
    std::string name;
    Tensor value;
  };
  State& state() const;
  std::shared_ptr<State> state_;
};

}  // namespace loom
