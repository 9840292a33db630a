#include "framework/tensor/variable.hpp"

#include <cstring>

#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "framework/tensor/detail/tensor_impl.hpp"

namespace loom {

namespace {
thread_local AssignJournal* active_journal = nullptr;

/// assign_add/assign_sub take a delta of the variable's dtype that broadcasts to its shape.
void check_update(const Variable& v, const Tensor& delta, const char* method) {
  const bool fits = delta.defined() && delta.dtype() == v.dtype() && broadcasts_to(delta.shape(), v.shape());
  check(fits, "Variable '{}'.{}: expected a {} tensor broadcastable to shape {}, got {}", v.name(), method,
        v.dtype(), v.shape(), delta.defined() ? fmt::format("{} of shape {}", delta.dtype(), delta.shape()) : "undefined");
}
}  // namespace

Variable::Variable(const Tensor& initial_value, std::string name, bool trainable) {
  check(initial_value.defined(), "Variable '{}': the initial value is undefined", name);
  Tensor value;
  {
    NoGradGuard no_grad;
    value = ops::clone(initial_value);
  }
  value.impl().trainable = trainable && is_floating(value.dtype());
  state_ = std::make_shared<State>(State{std::move(name), std::move(value), {}, {}});
}

Variable::State& Variable::state() const {
  if (!state_) throw Error("Variable: this variable is undefined (default-constructed)");
  return *state_;
}

const std::string& Variable::name() const { return state().name; }
void Variable::set_name(std::string name) { state().name = std::move(name); }
const Tensor& Variable::value() const { return state().value; }
bool Variable::trainable() const { return value().impl().trainable; }
void Variable::set_trainable(bool trainable) { value().impl().trainable = trainable && is_floating(dtype()); }

void Variable::assign(const Tensor& new_value) {
  const Tensor& v = value();
  check(new_value.defined() && new_value.shape() == v.shape() && new_value.dtype() == v.dtype(),
        "Variable '{}'.assign: expected a {} tensor of shape {}, got {}", name(), v.dtype(), v.shape(),
        new_value.defined() ? fmt::format("{} of shape {}", new_value.dtype(), new_value.shape()) : "undefined");
  NoGradGuard no_grad;
  const Tensor source = ops::contiguous(new_value);
  if (source.shares_storage_with(v) && source.offset() == v.offset()) return;
  if (active_journal != nullptr) active_journal->record(*this);
  std::memmove(v.impl().storage->data(), source.impl().storage->data() + source.offset() * dtype_size(v.dtype()),
               std::size_t(v.numel()) * dtype_size(v.dtype()));
}

void Variable::assign_add(const Tensor& delta) {
  check_update(*this, delta, "assign_add");
  NoGradGuard no_grad;
  assign(value() + delta);
}

void Variable::assign_sub(const Tensor& delta) {
  check_update(*this, delta, "assign_sub");
  NoGradGuard no_grad;
  assign(value() - delta);
}

const Variable::WeightFunction& Variable::regularizer() const { return state().regularizer; }
void Variable::set_regularizer(WeightFunction regularizer) { state().regularizer = std::move(regularizer); }
const Variable::WeightFunction& Variable::constraint() const { return state().constraint; }
void Variable::set_constraint(WeightFunction constraint) { state().constraint = std::move(constraint); }

void Variable::apply_constraint() {
  if (!state().constraint) return;
  NoGradGuard no_grad;
  const Tensor projected = state().constraint(value());
  check(projected.defined() && projected.shape() == shape() && projected.dtype() == dtype(),
        "Variable '{}': its constraint returned {}, expected a {} tensor of the variable's shape {}", name(),
        projected.defined() ? fmt::format("{} of shape {}", projected.dtype(), projected.shape()) : "undefined",
        dtype(), shape());
  assign(projected);
}

AssignJournal::AssignJournal() : previous_(active_journal) { active_journal = this; }

AssignJournal::~AssignJournal() { stop(); }

void AssignJournal::stop() {
  if (!recording_) return;
  recording_ = false;
  active_journal = previous_;
}

void AssignJournal::record(const Variable& variable) {
  if (previous_ != nullptr) previous_->record(variable);
  if (!recording_ || !seen_.insert(variable.id()).second) return;
  NoGradGuard no_grad;
  saved_.emplace_back(variable, ops::clone(variable.value()));
}

void AssignJournal::restore() {
  stop();
  for (auto& [variable, value] : saved_) variable.assign(value);
  saved_.clear();
  seen_.clear();
}

}  // namespace loom
