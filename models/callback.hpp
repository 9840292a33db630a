#pragma once
// Callback: Keras's hooks into fit, evaluate and predict. Override the hooks you need; model() is the model
// being trained (set by fit before on_train_begin). Logs hold the running loss and metrics, keyed by name and
// sorted alphabetically as Keras sorts them ("accuracy", "loss", "val_accuracy", "val_loss").
//
//   struct PrintLoss : L::Callback {
//     void on_epoch_end(int epoch, const L::Logs& logs) override { fmt::print("{} {}\n", epoch, logs.at("loss")); }
//   };
#include <map>
#include <memory>
#include <string>

#include "models/shared_arg.hpp"

namespace loom::layers {

class Model;
using Logs = std::map<std::string, double>;

class Callback {
 public:
  virtual ~Callback() = default;

  virtual void on_train_begin(const Logs& /*logs*/) {}
  virtual void on_train_end(const Logs& /*logs*/) {}
  virtual void on_epoch_begin(int /*epoch*/, const Logs& /*logs*/) {}
  virtual void on_epoch_end(int /*epoch*/, const Logs& /*logs*/) {}
  virtual void on_train_batch_begin(int /*batch*/, const Logs& /*logs*/) {}
  virtual void on_train_batch_end(int /*batch*/, const Logs& /*logs*/) {}
  virtual void on_test_begin(const Logs& /*logs*/) {}
  virtual void on_test_end(const Logs& /*logs*/) {}
  virtual void on_test_batch_begin(int /*batch*/, const Logs& /*logs*/) {}
  virtual void on_test_batch_end(int /*batch*/, const Logs& /*logs*/) {}
  virtual void on_predict_begin(const Logs& /*logs*/) {}
  virtual void on_predict_end(const Logs& /*logs*/) {}
  virtual void on_predict_batch_begin(int /*batch*/, const Logs& /*logs*/) {}
  virtual void on_predict_batch_end(int /*batch*/, const Logs& /*logs*/) {}

  void set_model(Model* model) { model_ = model; }
  Model& model() const;

 private:
  Model* model_ = nullptr;
};

/// A callback passed to fit: a callback object (copied) or a shared_ptr the caller keeps to inspect it later.
using CallbackArg = SharedArg<Callback>;

}  // namespace loom::layers
