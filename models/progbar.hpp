#pragma once
// Progbar and ProgbarLogger: Keras's progress bar (keras.utils.Progbar) and the callback that drives it during
// fit, evaluate and predict (keras.callbacks.ProgbarLogger), printing the same bytes as Keras 3:
//
//   Epoch 1/2
//   32/32 ━━━━━━━━━━━━━━━━━━━━ 0s 4ms/step - accuracy: 0.8254 - loss: 0.4682 - val_accuracy: 0.8000 - val_loss: 0.1200
//
// (with ANSI bold/green/white codes around the count, the bar and the time). verbose=1 redraws one line per
// update, at most every 0.05 s except the final update; verbose=2 prints one line when the bar is finalized;
// verbose=0 prints nothing. Metrics are shown as given (Keras's ProgbarLogger passes stateless_metrics=set(), so
// the bar never averages them), in the order their names were first seen.
//
//   L::Progbar bar(100);
//   for (int step = 1; step <= 100; ++step) bar.update(step, {{"loss", loss}});
#include <cstdint>
#include <functional>
#include <iostream>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "models/callback.hpp"

namespace loom::layers {

struct ProgbarOptions {
  /// 0 silent, 1 the bar redrawn at each update, 2 one line at the end.
  int verbose = 1;
  std::ostream* out = &std::cout;
  /// Redraw in place ("\b" * previous width + "\r") rather than starting a new line ("\n") at each update.
  /// Default: out is std::cout and stdout is a terminal. (Keras on POSIX always redraws in place: its test
  /// includes `"posix" in sys.modules`; set true for Keras's bytes in a file.)
  std::optional<bool> dynamic = std::nullopt;
  /// Seconds on any fixed origin; default std::chrono::steady_clock. Tests inject a fake clock.
  std::function<double()> clock = {};
  /// Shown in the per-unit time: "4ms/step".
  std::string unit_name = "step";
};

class Progbar {
 public:
  /// target: the number of steps, or -1 when unknown ("     10/Unknown"). The clock starts now.
  explicit Progbar(std::int64_t target, ProgbarOptions options = {});

  /// Shows step `current` with these metric values. `finalize` (default: current >= target, never for an
  /// unknown target) prints the elapsed time instead of the ETA, ends the line and bypasses the throttle.
  void update(std::int64_t current, const Logs& values = {}, std::optional<bool> finalize = std::nullopt);

  std::int64_t target() const { return target_; }
  /// Fixes a target that was unknown when the bar started (ProgbarLogger does it at the end of the first epoch).
  void set_target(std::int64_t target) { target_ = target; }

 private:
  double now() const;
  double estimate_step_duration(std::int64_t current, double now);
  void draw_line(std::int64_t current, bool finalize, double now, double time_per_unit);
  void print_summary_line(std::int64_t current, double now, double time_per_unit);

  std::int64_t target_;
  ProgbarOptions options_;
  bool dynamic_;
  double start_;
  std::optional<double> last_update_;  // none before the first update, so that it always draws
  std::optional<double> time_after_first_step_;
  std::int64_t prev_total_width_ = 0;
  std::vector<std::string> value_order_;  // metric names in the order first seen
  Logs values_;
};

/// Prints a bar per epoch of fit (after "Epoch i/N" when N > 1), and one for evaluate or predict called
/// directly; the validation pass inside fit prints nothing. The model calls set_params before the run.
class ProgbarLogger : public Callback {
 public:
  explicit ProgbarLogger(ProgbarOptions options = {});

  /// The run's epochs and steps per epoch (-1 when unknown: the first epoch's count is then used).
  void set_params(int epochs, std::int64_t steps);

  void on_train_begin(const Logs& logs) override;
  void on_train_end(const Logs& logs) override;
  void on_epoch_begin(int epoch, const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
  void on_train_batch_end(int batch, const Logs& logs) override;
  void on_test_begin(const Logs& logs) override;
  void on_test_batch_end(int batch, const Logs& logs) override;
  void on_test_end(const Logs& logs) override;
  void on_predict_begin(const Logs& logs) override;
  void on_predict_batch_end(int batch, const Logs& logs) override;
  void on_predict_end(const Logs& logs) override;

 private:
  void start_progbar();
  void update_progbar(int batch, const Logs& logs);
  void finalize_progbar(const Logs& logs);

  ProgbarOptions options_;
  int epochs_ = 1;
  std::int64_t target_ = -1;
  std::int64_t seen_ = 0;
  std::optional<Progbar> progbar_;
  bool called_in_fit_ = false;
};

}  // namespace loom::layers
