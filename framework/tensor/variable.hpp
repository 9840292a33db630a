#pragma once
// Variable: a named, mutable tensor, the way weights are held. Trainable variables are watched by every
// GradientTape automatically (TensorFlow's watch_accessed_variables). As Keras's Variable, it may carry a
// regularizer (the penalty its layer's losses() add) and a constraint (the projection an optimizer applies
// after each update), both plain functions so that the framework needs nothing of the layers.
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "framework/tensor/tensor.hpp"

namespace loom {

class Variable {
 public:
  /// A regularizer or constraint as the variable holds it: value -> penalty, or value -> projected value.
  using WeightFunction = std::function<Tensor(const Tensor&)>;

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

  /// Keras's variable.regularizer: value -> a penalty tensor, which Layer::losses() computes when asked. Empty
  /// for none. Shared by every copy of this handle.
  const WeightFunction& regularizer() const;
  void set_regularizer(WeightFunction regularizer);
  /// Keras's variable.constraint: value -> projected value of the same shape and dtype, which optimizers
  /// assign after each update of the variable. Empty for none.
  const WeightFunction& constraint() const;
  void set_constraint(WeightFunction constraint);
  /// Assigns constraint(value()) when there is a constraint (not recorded on any tape); a result of another
  /// shape or dtype is a loom::Error naming the variable, and the value is left as it was.
  void apply_constraint();

 private:
  struct State {
    std::string name;
    Tensor value;
    WeightFunction regularizer;
    WeightFunction constraint;
  };
  State& state() const;
  std::shared_ptr<State> state_;
};

/// While alive, keeps the value every Variable had before its first assign on this thread, so that a step
/// found bad after its forward pass (a NaN loss) can put back what the forward wrote (BatchNormalization's
/// moving statistics). Journals nest: every open journal records (an outer one keeps the value from before an
/// inner one's assigns, so it restores correctly even after the inner one restored or stopped).
class AssignJournal {
 public:
  AssignJournal();
  ~AssignJournal();
  AssignJournal(const AssignJournal&) = delete;
  AssignJournal& operator=(const AssignJournal&) = delete;

  /// Stops recording (later assigns are not kept); what was kept can still be restored.
  void stop();
  /// Stops recording and writes every kept value back.
  void restore();
  /// Called by Variable before it overwrites `variable`'s value.
  void record(const Variable& variable);

 private:
  std::vector<std::pair<Variable, Tensor>> saved_;
  std::set<std::uint64_t> seen_;
  AssignJournal* previous_ = nullptr;
  bool recording_ = true;
};

}  // namespace loom
