#pragma once
// Keras's built-in callbacks for fit: EarlyStopping, ModelCheckpoint, LearningRateScheduler, CSVLogger and
// LambdaCallback, with Keras 3's semantics and defaults.
//
//   model.fit(x, y, {.epochs = 100, .validation_split = 0.1,
//                    .callbacks = {L::EarlyStopping({.patience = 3, .restore_best_weights = true}),
//                                  L::CSVLogger("training.csv")}});
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "framework/tensor/tensor.hpp"
#include "models/callback.hpp"

namespace loom::layers {

/// Keras's MonitorCallback: the base of callbacks that watch one log value ("val_loss") and act when it
/// improves. mode "min" wants it lower, "max" higher, "auto" higher when the name contains "acc" and lower
/// otherwise (Keras 3 asks the metric; every loom metric that goes up is an accuracy). An improvement must beat
/// the reference by more than |min_delta|.
class MonitorCallback : public Callback {
 public:
  const std::string& monitor() const { return monitor_; }
  /// Whether the resolved mode maximizes the monitored value.
  bool maximize() const { return maximize_; }

 protected:
  MonitorCallback(std::string_view callback, std::string monitor, const std::string& mode, double min_delta);
  /// `value` improves on `reference` (always true without a reference).
  bool is_improvement(double value, std::optional<double> reference) const;

 private:
  std::string monitor_;
  bool maximize_;
  double min_delta_;
};

// ---- EarlyStopping ----------------------------------------------------------------------------------------------

struct EarlyStoppingOptions {
  std::string monitor = "val_loss";
  double min_delta = 0.0;
  /// Epochs without improvement after which training stops.
  int patience = 0;
  int verbose = 0;
  std::string mode = "auto";
  /// Patience only restarts on values that also beat the baseline.
  std::optional<double> baseline = std::nullopt;
  /// At the end of training, put back the weights of the best epoch (once one was monitored).
  bool restore_best_weights = false;
  /// Epochs before this one are not monitored (a warm-up).
  int start_from_epoch = 0;
};

/// Stops fit (model().stop_training) once the monitored value has not improved for `patience` epochs. A log
/// without the monitored key is skipped with a warning on std::cerr. Reusable across fit calls.
class EarlyStopping : public MonitorCallback {
 public:
  explicit EarlyStopping(EarlyStoppingOptions options = {});

  void on_train_begin(const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
  void on_train_end(const Logs& logs) override;

  /// Epochs since the last improvement (that beat the baseline).
  int wait() const { return wait_; }
  /// The epoch that set stop_training; 0 when training was not stopped.
  int stopped_epoch() const { return stopped_epoch_; }
  std::optional<double> best() const { return best_; }
  int best_epoch() const { return best_epoch_; }

 private:
  EarlyStoppingOptions options_;
  int wait_ = 0;
  int stopped_epoch_ = 0;
  std::optional<double> best_;
  int best_epoch_ = 0;
  std::optional<std::vector<Tensor>> best_weights_;  // copies of model().weights(), with restore_best_weights
};

// ---- ModelCheckpoint --------------------------------------------------------------------------------------------

struct ModelCheckpointOptions {
  /// Where to save, formatted with Python/fmt fields: {epoch} (from 1), {batch} (from 1, with save_freq) and
  /// any log key, e.g. "ckpt/epoch_{epoch:02d}-{val_loss:.3f}.safetensors". Missing folders are created.
  std::string filepath;
  std::string monitor = "val_loss";
  int verbose = 0;
  /// Save only when the monitored value improves on the best so far.
  bool save_best_only = false;
  /// loom saves weights (Model::save_weights); it has no whole-model format, so this must stay true.
  bool save_weights_only = true;
  std::string mode = "auto";
  /// Keras's save_freq: nullopt saves at the end of every epoch ("epoch"), n every n training batches.
  std::optional<std::int64_t> save_freq = std::nullopt;
  /// The value a first save_best_only save must beat.
  std::optional<double> initial_value_threshold = std::nullopt;
};

/// Saves the model's weights during fit with Model::save_weights (atomically).
class ModelCheckpoint : public MonitorCallback {
 public:
  explicit ModelCheckpoint(ModelCheckpointOptions options);

  void on_epoch_begin(int epoch, const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
  void on_train_batch_end(int batch, const Logs& logs) override;

  /// The best monitored value saved so far (kept across fit calls, as Keras).
  std::optional<double> best() const { return best_; }
  /// options.filepath formatted for this epoch (from 0), batch (from 0; nullopt at an epoch's end) and logs.
  std::string file_path(int epoch, std::optional<int> batch, const Logs& logs) const;

 private:
  void save(int epoch, std::optional<int> batch, const Logs& logs);

  ModelCheckpointOptions options_;
  std::optional<double> best_;
  int current_epoch_ = 0;
  std::int64_t batches_since_save_ = 0;
};

// ---- LearningRateScheduler --------------------------------------------------------------------------------------

/// At each epoch's start sets the optimizer's learning rate to schedule(epoch, current rate), epochs counted
/// from 0. The model must be compiled. (Keras also adds "learning_rate" to the epoch's logs; loom's logs are
/// read-only for callbacks, so read it from model().optimizer()->learning_rate().)
class LearningRateScheduler : public Callback {
 public:
  using Schedule = std::function<double(int epoch, double learning_rate)>;
  explicit LearningRateScheduler(Schedule schedule, int verbose = 0);

  void on_epoch_begin(int epoch, const Logs& logs) override;

 private:
  Schedule schedule_;
  int verbose_;
};

// ---- CSVLogger --------------------------------------------------------------------------------------------------

/// Writes one CSV row per epoch, byte for byte as Keras does: a header "epoch,<sorted log keys>" (with the
/// val_ keys added when the first epoch has none, filled with NA), epochs from 0, numbers as Python prints
/// floats, "\r\n" line ends (RFC 4180, Python's csv module). Each row is flushed as it is written. With
/// append, an existing non-empty file keeps its header and gets new rows after it.
class CSVLogger : public Callback {
 public:
  explicit CSVLogger(std::string filename, char separator = ',', bool append = false);

  void on_train_begin(const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
  void on_train_end(const Logs& logs) override;

 private:
  void write_row(const std::vector<std::string>& fields);

  std::string filename_;
  char separator_;
  bool append_;
  bool write_header_ = true;
  std::optional<std::vector<std::string>> keys_;  // the columns after "epoch", fixed by the first epoch's logs
  // Shared so that the callback stays copyable (fit takes callbacks by value); each fit opens a new one.
  std::shared_ptr<std::ofstream> file_;
};

// ---- LambdaCallback ---------------------------------------------------------------------------------------------

/// Hooks given as functions, in Keras's argument order; empty ones do nothing.
struct LambdaCallbackOptions {
  std::function<void(int epoch, const Logs& logs)> on_epoch_begin = nullptr;
  std::function<void(int epoch, const Logs& logs)> on_epoch_end = nullptr;
  std::function<void(const Logs& logs)> on_train_begin = nullptr;
  std::function<void(const Logs& logs)> on_train_end = nullptr;
  std::function<void(int batch, const Logs& logs)> on_train_batch_begin = nullptr;
  std::function<void(int batch, const Logs& logs)> on_train_batch_end = nullptr;
};

class LambdaCallback : public Callback {
 public:
  explicit LambdaCallback(LambdaCallbackOptions options) : options_(std::move(options)) {}

  void on_epoch_begin(int epoch, const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
  void on_train_begin(const Logs& logs) override;
  void on_train_end(const Logs& logs) override;
  void on_train_batch_begin(int batch, const Logs& logs) override;
  void on_train_batch_end(int batch, const Logs& logs) override;

 private:
  LambdaCallbackOptions options_;
};

}  // namespace loom::layers
