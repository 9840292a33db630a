#pragma once
// SharedArg<Base>: how Sequential, compile and fit take layers, optimizers, metrics and callbacks: an object of
// any class derived from Base, copied or moved in, or a std::shared_ptr the caller keeps to inspect it later.
//
//   model.fit(x, y, {.callbacks = {L::CSVLogger("log.csv"), stopper /* a shared_ptr<EarlyStopping> */}});
#include <memory>
#include <type_traits>
#include <utility>

namespace loom::layers {

template <class Base>
class SharedArg {
 public:
  /// Implicit, so that a braced list of objects reads as in Keras. An lvalue is copied, so it must be
  /// copyable (layers are not: move them in, or share them through a shared_ptr).
  template <class D>
    requires std::is_base_of_v<Base, std::decay_t<D>> &&
             (!std::is_lvalue_reference_v<D> || std::is_copy_constructible_v<std::decay_t<D>>)
  SharedArg(D&& object)  // NOLINT
      : object_(std::make_shared<std::decay_t<D>>(std::forward<D>(object))) {}
  template <class D>
    requires std::is_base_of_v<Base, D>
  SharedArg(std::shared_ptr<D> object) : object_(std::move(object)) {}  // NOLINT

  /// Null only for arguments given by name (OptimizerArg, MetricArg) and not resolved yet.
  const std::shared_ptr<Base>& get() const { return object_; }

 protected:
  /// An argument given by name, resolved later.
  explicit SharedArg(std::nullptr_t) {}

 private:
  std::shared_ptr<Base> object_;
};

}  // namespace loom::layers
