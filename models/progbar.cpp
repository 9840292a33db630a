// Progbar and ProgbarLogger, line for line after keras/src/utils/progbar.py and callbacks/progbar_logger.py.
// Numbers go through printf, which rounds like Python's format() (correctly rounded, ties to even).
#include "models/progbar.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <utility>

#include "framework/tensor/error.hpp"

namespace loom::layers {

namespace {

constexpr int kBarWidth = 20;
constexpr double kRedrawInterval = 0.05;  // seconds between redraws, except the final one
const std::string kBold = "\x1b[1m", kGreen = "\x1b[32m", kWhite = "\x1b[37m", kReset = "\x1b[0m";
const std::string kBarChar = "\u2501";  // ━

__attribute__((format(printf, 1, 2))) std::string printf_string(const char* format, ...) {
  va_list args, args_again;
  va_start(args, format);
  va_copy(args_again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);  // "%.4f" of 1e300 is 300 characters long
  va_end(args);
  std::string out(std::size_t(std::max(n, 0)) + 1, '\0');
  std::vsnprintf(out.data(), out.size(), format, args_again);
  va_end(args_again);
  out.pop_back();
  return out;
}

std::string repeat(const std::string& s, std::int64_t times) {
  std::string out;
  for (std::int64_t i = 0; i < times; ++i) out += s;
  return out;
}

/// The columns a line takes: code points (so that "━" counts one), ANSI escape sequences ("\x1b[1m") none.
std::int64_t visible_width(const std::string& s) {
  std::int64_t n = 0;
  bool in_escape = false;
  for (unsigned char c : s) {
    if (c == 0x1b) in_escape = true;
    else if (in_escape) in_escape = c != 'm';
    else n += (c & 0xC0) != 0x80;
  }
  return n;
}

/// Python's divmod for floats (floor division; the remainder takes the divisor's sign).
std::pair<double, double> python_divmod(double x, double y) {
  double mod = std::fmod(x, y);
  double div = (x - mod) / y;
  if (mod != 0.0) {
    if ((y < 0) != (mod < 0)) {
      mod += y;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, y);
  }
  double floor_div = std::copysign(0.0, x / y);
  if (div != 0.0) {
    floor_div = std::floor(div);
    if (div - floor_div > 0.5) floor_div += 1.0;
  }
  return {floor_div, mod};
}

/// Python's "%d" % x for a float: truncation toward zero.
long long python_int(double x) { return static_cast<long long>(x); }

/// Keras's ETA: "%ds" below a minute, "%d:%02d" below an hour, "%d:%02d:%02d" beyond.
std::string format_eta(double eta) {
  if (eta > 3600) {
    const auto [hours, rest] = python_divmod(eta, 3600);
    return printf_string("%lld:%02lld:%02lld", python_int(hours), python_int(python_divmod(rest, 60).first),
                         python_int(python_divmod(eta, 60).second));
  }
  if (eta > 60) {
    const auto [minutes, seconds] = python_divmod(eta, 60);
    return printf_string("%lld:%02lld", python_int(minutes), python_int(seconds));
  }
  return printf_string("%llds", python_int(eta));
}

/// " 4ms/step": seconds at or above 1 s (and for exactly 0), else milliseconds, else microseconds.
std::string format_time_per_unit(double time_per_unit, const std::string& unit_name) {
  if (time_per_unit >= 1 || time_per_unit == 0) return printf_string(" %.0fs/", time_per_unit) + unit_name;
  if (time_per_unit >= 1e-3) return printf_string(" %.0fms/", time_per_unit * 1000.0) + unit_name;
  return printf_string(" %.0fus/", time_per_unit * 1000000.0) + unit_name;
}

/// A metric value: "%.4f" when large enough, else "%.4e". Python prints a NaN of either sign as "nan".
std::string format_metric(double value, bool large) {
  if (std::isnan(value)) return "nan";
  return large ? printf_string("%.4f", value) : printf_string("%.4e", value);
}

/// Python's int(math.log10(target)) + 1, the width of the step count.
int count_digits(std::int64_t target) { return int(std::log10(double(target))) + 1; }

}  // namespace

Progbar::Progbar(std::int64_t target, ProgbarOptions options)
    : target_(target),
      options_(std::move(options)),
      dynamic_(options_.dynamic.value_or(options_.out == &std::cout && isatty(STDOUT_FILENO))),
      start_(now()) {
  check(options_.out != nullptr, "Progbar: options.out is null; pass a stream");
}

double Progbar::now() const {
  if (options_.clock) return options_.clock();
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The first step (often slow: compilation, caches) is left out of the estimate once a later step is known.
double Progbar::estimate_step_duration(std::int64_t current, double now) {
  if (current == 0) return 0;
  const double time_per_unit = time_after_first_step_ && current > 1
                                   ? (now - *time_after_first_step_) / double(current - 1)
                                   : (now - start_) / double(current);
  if (current == 1) time_after_first_step_ = now;
  return time_per_unit;
}

void Progbar::update(std::int64_t current, const Logs& values, std::optional<bool> finalize) {
  const bool known_target = target_ >= 0;
  const bool final_update = finalize.value_or(known_target && current >= target_);
  for (const auto& [name, value] : values) {
    if (!values_.count(name)) value_order_.push_back(name);
    values_[name] = value;
  }
  const double time = now();
  const double time_per_unit = estimate_step_duration(current, time);
  if (options_.verbose == 1) {
    // Off a terminal a bar cannot be redrawn: only the final update prints, as one clean line.
    if (!dynamic_ && !final_update) return;
    if (last_update_ && time - *last_update_ < kRedrawInterval && !final_update) return;
    draw_line(current, final_update, time, time_per_unit);
  } else if (options_.verbose == 2 && final_update && target_ > 0) {
    print_summary_line(current, time, time_per_unit);
  }
  last_update_ = time;
}

void Progbar::draw_line(std::int64_t current, bool finalize, double now, double time_per_unit) {
  // ANSI styling only where a terminal renders it; log files get plain text.
  auto styled = [&](const std::string& code, const std::string& text) {
    return dynamic_ ? code + text + kReset : text;
  };
  std::string message = dynamic_ ? std::string(std::size_t(prev_total_width_), '\b') + "\r" : "";
  std::string bar, info;
  if (target_ > 0) {
    bar = styled(kBold, printf_string("%*lld/%lld", count_digits(target_), (long long)current, (long long)target_)) +
          " ";
    const auto done = std::int64_t(kBarWidth * (double(current) / double(target_)));
    if (done > 0) bar += styled(kGreen, repeat(kBarChar, done));
    bar += styled(kWhite, repeat(kBarChar, kBarWidth - done));
  } else {
    bar = printf_string("%7lld/Unknown", (long long)current);
  }
  info = " ";
  info += styled(kBold, target_ > 0 && !finalize ? format_eta(time_per_unit * double(target_ - current))
                                                  : printf_string("%.0fs", now - start_));
  info += format_time_per_unit(time_per_unit, options_.unit_name);
  for (const std::string& name : value_order_) {
    const double value = values_.at(name);
    info += " - " + name + ": " + format_metric(value, std::abs(value) > 1e-3);
  }
  message += bar + info;
  const std::int64_t total_width = visible_width(bar) + visible_width(info);
  if (prev_total_width_ > total_width) message += std::string(std::size_t(prev_total_width_ - total_width), ' ');
  if (finalize) message += "\n";
  *options_.out << message << std::flush;
  prev_total_width_ = total_width;
}

void Progbar::print_summary_line(std::int64_t current, double now, double time_per_unit) {
  std::string line = printf_string("%*lld/%lld", count_digits(target_), (long long)current, (long long)target_) +
                     printf_string(" - %.0fs", now - start_) + " -" +
                     format_time_per_unit(time_per_unit, options_.unit_name);
  // Keras compares without abs() here, so negative values print in e notation.
  for (const std::string& name : value_order_) {
    const double value = values_.at(name);
    line += " - " + name + ": " + format_metric(value, value > 1e-3);
  }
  *options_.out << line << "\n" << std::flush;
}

ProgbarLogger::ProgbarLogger(ProgbarOptions options) : options_(std::move(options)) {
  check(options_.out != nullptr, "ProgbarLogger: options.out is null; pass a stream");
}

void ProgbarLogger::set_params(int epochs, std::int64_t steps) {
  check(epochs >= 0, "ProgbarLogger::set_params: epochs must be >= 0, got {}", epochs);
  check(steps >= -1, "ProgbarLogger::set_params: steps must be >= 0, or -1 when unknown; got {}", steps);
  epochs_ = epochs;
  target_ = steps;
}

void ProgbarLogger::on_train_begin(const Logs&) { called_in_fit_ = true; }

// Keras makes a fresh logger for every fit/evaluate/predict call; clearing the flag lets one instance serve
// an evaluate after a fit the same way.
void ProgbarLogger::on_train_end(const Logs&) { called_in_fit_ = false; }

void ProgbarLogger::on_epoch_begin(int epoch, const Logs&) {
  start_progbar();
  if (options_.verbose != 0 && epochs_ > 1)
    *options_.out << "Epoch " << epoch + 1 << "/" << epochs_ << "\n" << std::flush;
}

void ProgbarLogger::on_epoch_end(int, const Logs& logs) { finalize_progbar(logs); }

void ProgbarLogger::on_train_batch_end(int batch, const Logs& logs) { update_progbar(batch, logs); }

void ProgbarLogger::on_test_begin(const Logs&) {
  if (!called_in_fit_) start_progbar();
}

void ProgbarLogger::on_test_batch_end(int batch, const Logs& logs) {
  if (!called_in_fit_) update_progbar(batch, logs);
}

void ProgbarLogger::on_test_end(const Logs& logs) {
  if (!called_in_fit_) finalize_progbar(logs);
}

void ProgbarLogger::on_predict_begin(const Logs&) { start_progbar(); }

// The batch logs of predict hold outputs, not metrics: the bar shows none.
void ProgbarLogger::on_predict_batch_end(int batch, const Logs&) { update_progbar(batch, {}); }

void ProgbarLogger::on_predict_end(const Logs& logs) { finalize_progbar(logs); }

void ProgbarLogger::start_progbar() {
  seen_ = 0;
  progbar_.emplace(target_, options_);
}

void ProgbarLogger::update_progbar(int batch, const Logs& logs) {
  if (!progbar_) progbar_.emplace(target_, options_);
  seen_ = std::int64_t(batch) + 1;
  if (options_.verbose == 1) progbar_->update(seen_, logs, false);
}

void ProgbarLogger::finalize_progbar(const Logs& logs) {
  if (!progbar_) progbar_.emplace(target_, options_);
  if (target_ < 0) {
    target_ = seen_;
    progbar_->set_target(target_);
  }
  progbar_->update(target_, logs, true);
}

}  // namespace loom::layers
