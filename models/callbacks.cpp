#include "models/callbacks.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <fmt/args.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "framework/autograd/tape.hpp"
#include "framework/distributed/collectives.hpp"
#include "framework/tensor/error.hpp"
#include "models/model.hpp"

namespace loom::layers {

namespace {

// Data-parallel replicas hold the same weights and logs: rank 0 alone reports and writes files. A single
// process is rank 0, so its callbacks never need a model here.
bool on_rank_zero(const Callback& callback) {
  return distributed::rank() == 0 || !callback.model().data_parallel();
}

/// Python's repr of a float, as Keras prints logs: fmt's shortest round-trip form already switches to an
/// exponent where Python does (below 1e-4, from 1e16); Python also marks integral values with ".0".
std::string python_float(double value) {
  std::string text = fmt::format("{}", value);
  if (std::isfinite(value) && text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

/// The log keys, for messages about a missing one.
std::string key_list(const Logs& logs) {
  std::vector<std::string> keys;
  for (const auto& [key, value] : logs) keys.push_back(key);
  return fmt::format("{}", fmt::join(keys, ","));
}

}  // namespace

// ---- MonitorCallback --------------------------------------------------------------------------------------------

MonitorCallback::MonitorCallback(std::string_view callback, std::string monitor, const std::string& mode,
                                 double min_delta)
    : monitor_(std::move(monitor)), min_delta_(std::abs(min_delta)) {
  check(mode == "min" || mode == "max" || mode == "auto", "{}: mode must be 'min', 'max' or 'auto', got '{}'",
        callback, mode);
  check(std::isfinite(min_delta), "{}: min_delta must be finite, got {}", callback, min_delta);
  maximize_ = mode == "max" || (mode == "auto" && monitor_.find("acc") != std::string::npos);
}

bool MonitorCallback::is_improvement(double value, std::optional<double> reference) const {
  if (!reference) return true;
  return maximize_ ? value - min_delta_ > *reference : value + min_delta_ < *reference;
}

// ---- EarlyStopping ----------------------------------------------------------------------------------------------

EarlyStopping::EarlyStopping(EarlyStoppingOptions options)
    : MonitorCallback("EarlyStopping", options.monitor, options.mode, options.min_delta), options_(std::move(options)) {
  check(options_.patience >= 0, "EarlyStopping: patience must be >= 0, got {}", options_.patience);
}

void EarlyStopping::on_train_begin(const Logs& /*logs*/) {
  // Reset, so that one instance can serve several fit calls.
  wait_ = 0;
  stopped_epoch_ = 0;
  best_.reset();
  best_epoch_ = 0;
  best_weights_.reset();
}

void EarlyStopping::on_epoch_end(int epoch, const Logs& logs) {
  const auto found = logs.find(monitor());
  if (found == logs.end()) {
    std::cerr << fmt::format("EarlyStopping: warning: early stopping conditioned on metric '{}' which is not "
                             "available. Available metrics are: {}\n",
                             monitor(), key_list(logs));
    return;
  }
  if (epoch < options_.start_from_epoch) return;
  const double current = found->second;
  auto snapshot = [this] {
    NoGradGuard no_grad;  // copies of the weights, not part of any computation
    std::vector<Tensor> copies;
    for (const Variable& w : model().weights()) copies.push_back(w.value().clone());
    return copies;
  };
  // Until something improves, the first monitored epoch's weights are the best ones (as Keras).
  if (options_.restore_best_weights && !best_weights_) {
    best_weights_ = snapshot();
    best_epoch_ = epoch;
  }
  ++wait_;
  if (is_improvement(current, best_)) {
    best_ = current;
    best_epoch_ = epoch;
    if (options_.restore_best_weights) best_weights_ = snapshot();
    // Patience restarts only on a value that beats both the previous best and the baseline.
    if (!options_.baseline || is_improvement(current, options_.baseline)) wait_ = 0;
    return;
  }
  if (wait_ >= options_.patience && epoch > 0) {
    stopped_epoch_ = epoch;
    model().stop_training = true;
  }
}

void EarlyStopping::on_train_end(const Logs& /*logs*/) {
  const bool verbose = options_.verbose > 0 && on_rank_zero(*this);
  if (stopped_epoch_ > 0 && verbose) std::cout << fmt::format("Epoch {}: early stopping\n", stopped_epoch_ + 1);
  if (!options_.restore_best_weights || !best_weights_) return;
  if (verbose)
    std::cout << fmt::format("Restoring model weights from the end of the best epoch: {}.\n", best_epoch_ + 1);
  std::vector<Variable> weights = model().weights();
  check(weights.size() == best_weights_->size(),
        "EarlyStopping: cannot restore the best weights: the model has {} weights now but had {} at epoch {}",
        weights.size(), best_weights_->size(), best_epoch_ + 1);
  for (std::size_t i = 0; i < weights.size(); ++i) weights[i].assign((*best_weights_)[i]);
}

// ---- ModelCheckpoint --------------------------------------------------------------------------------------------

ModelCheckpoint::ModelCheckpoint(ModelCheckpointOptions options)
    : MonitorCallback("ModelCheckpoint", options.monitor, options.mode, 0.0),
      options_(std::move(options)),
      best_(options_.initial_value_threshold) {
  check(!options_.filepath.empty(), "ModelCheckpoint: filepath is empty");
  check(options_.save_weights_only,
        "ModelCheckpoint: save_weights_only must be true: loom saves weights (Model::save_weights) and has no "
        "whole-model format");
  check(!options_.save_freq || *options_.save_freq > 0,
        "ModelCheckpoint: save_freq must be a positive number of batches (or unset, to save every epoch), got {}",
        options_.save_freq.value_or(0));
}

std::string ModelCheckpoint::file_path(int epoch, std::optional<int> batch, const Logs& logs) const {
  // Python's str.format(epoch=epoch + 1, batch=batch + 1, **logs); fmt's field syntax is Python's.
  fmt::dynamic_format_arg_store<fmt::format_context> fields;
  fields.push_back(fmt::arg("epoch", epoch + 1));
  if (batch) fields.push_back(fmt::arg("batch", *batch + 1));
  for (const auto& [key, value] : logs)
    if (key != "epoch" && key != "batch") fields.push_back(fmt::arg(key.c_str(), value));
  try {
    return fmt::vformat(options_.filepath, fields);
  } catch (const fmt::format_error& e) {
    throw Error(fmt::format("ModelCheckpoint: cannot format filepath '{}': {}; its fields may be {{epoch}}{}{}{}",
                            options_.filepath, e.what(), batch ? ", {batch}" : "",
                            logs.empty() ? "" : " and the log keys ", key_list(logs)));
  }
}

void ModelCheckpoint::on_epoch_begin(int epoch, const Logs& /*logs*/) { current_epoch_ = epoch; }

void ModelCheckpoint::on_epoch_end(int epoch, const Logs& logs) {
  if (!options_.save_freq) save(epoch, std::nullopt, logs);
}

void ModelCheckpoint::on_train_batch_end(int batch, const Logs& logs) {
  if (!options_.save_freq || ++batches_since_save_ < *options_.save_freq) return;
  batches_since_save_ = 0;
  save(current_epoch_, batch, logs);
}

void ModelCheckpoint::save(int epoch, std::optional<int> batch, const Logs& logs) {
  const std::string path = file_path(epoch, batch, logs);
  const bool writes = on_rank_zero(*this);
  const bool verbose = writes && options_.verbose > 0;
  if (options_.save_best_only) {
    const auto found = logs.find(monitor());
    if (found == logs.end()) {
      // As Keras: without the value there is nothing to compare, so save anyway.
      if (writes)
        std::cerr << fmt::format("ModelCheckpoint: warning: can save best model only with {} available.\n",
                                 monitor());
    } else {
      const double current = found->second;
      const std::string best = best_ ? fmt::format("{:.5f}", *best_) : "None";
      if (!is_improvement(current, best_)) {
        if (verbose) std::cout << fmt::format("\nEpoch {}: {} did not improve from {}\n", epoch + 1, monitor(), best);
        return;
      }
      if (verbose)
        std::cout << fmt::format("\nEpoch {}: {} improved from {} to {:.5f}, saving model to {}\n", epoch + 1,
                                 monitor(), best, current, path);
      best_ = current;
    }
  } else if (verbose) {
    std::cout << fmt::format("\nEpoch {}: saving model to {}\n", epoch + 1, path);
  }
  if (!writes) return;
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  std::error_code error;
  if (!folder.empty()) std::filesystem::create_directories(folder, error);
  check(!error, "ModelCheckpoint: cannot create the folder '{}' for '{}': {}", folder.string(), path, error.message());
  model().save_weights(path);
  if (verbose) std::cout << fmt::format("\nEpoch {}: finished saving model to {}\n", epoch + 1, path);
}

// ---- LearningRateScheduler --------------------------------------------------------------------------------------

LearningRateScheduler::LearningRateScheduler(Schedule schedule, int verbose)
    : schedule_(std::move(schedule)), verbose_(verbose) {
  check(static_cast<bool>(schedule_), "LearningRateScheduler: the schedule function is empty");
}

void LearningRateScheduler::on_epoch_begin(int epoch, const Logs& /*logs*/) {
  optim::Optimizer* optimizer = model().optimizer();
  check(optimizer != nullptr, "LearningRateScheduler: the model '{}' has no optimizer; compile it first",
        model().name());
  const double learning_rate = schedule_(epoch, optimizer->learning_rate());
  check(std::isfinite(learning_rate), "LearningRateScheduler: the schedule gave {} at epoch {}; expected a finite rate",
        learning_rate, epoch);
  optimizer->set_learning_rate(learning_rate);
  if (verbose_ > 0 && on_rank_zero(*this))
    std::cout << fmt::format("\nEpoch {}: LearningRateScheduler setting learning rate to {}.\n", epoch + 1,
                             python_float(learning_rate));
}

// ---- CSVLogger --------------------------------------------------------------------------------------------------

CSVLogger::CSVLogger(std::string filename, char separator, bool append)
    : filename_(std::move(filename)), separator_(separator), append_(append) {
  check(!filename_.empty(), "CSVLogger: filename is empty");
  check(separator_ != '"' && separator_ != '\r' && separator_ != '\n',
        "CSVLogger: the separator cannot be a quote or a line break");
}

void CSVLogger::on_train_begin(const Logs& /*logs*/) {
  if (!on_rank_zero(*this)) return;
  // Appending to a file that already has content keeps its header.
  write_header_ = true;
  if (append_) {
    std::ifstream existing(filename_, std::ios::binary);
    write_header_ = !existing || existing.peek() == std::ifstream::traits_type::eof();
  }
  file_ = std::make_shared<std::ofstream>(filename_, std::ios::binary | (append_ ? std::ios::app : std::ios::trunc));
  check(file_->is_open(), "CSVLogger: cannot open '{}' for writing", filename_);
  keys_.reset();
}

void CSVLogger::on_epoch_end(int epoch, const Logs& logs) {
  if (!on_rank_zero(*this)) return;
  check(file_ && file_->is_open(), "CSVLogger: on_epoch_end before on_train_begin ('{}' is not open)", filename_);
  if (!keys_) {
    keys_.emplace();
    for (const auto& [key, value] : logs) keys_->push_back(key);  // sorted: Logs is an ordered map
    // As Keras: without validation keys in the first epoch, columns for them are added anyway (filled NA).
    const bool has_validation = std::any_of(keys_->begin(), keys_->end(), [](const std::string& k) {
      return k.rfind("val_", 0) == 0;
    });
    if (!has_validation) {
      const std::size_t n = keys_->size();
      for (std::size_t i = 0; i < n; ++i) keys_->push_back("val_" + (*keys_)[i]);
    }
    if (write_header_) {
      std::vector<std::string> header{"epoch"};
      header.insert(header.end(), keys_->begin(), keys_->end());
      write_row(header);
    }
  }
  std::vector<std::string> row{std::to_string(epoch)};
  for (const std::string& key : *keys_) {
    const auto found = logs.find(key);
    row.push_back(found == logs.end() ? "NA" : python_float(found->second));
  }
  write_row(row);
}

void CSVLogger::on_train_end(const Logs& /*logs*/) {
  if (file_) file_->close();
  file_.reset();
}

// Python's csv module (excel dialect): fields quoted only when they need it, "\r\n" after each row.
void CSVLogger::write_row(const std::vector<std::string>& fields) {
  std::string line;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) line += separator_;
    const std::string& f = fields[i];
    if (f.find_first_of(std::string{separator_, '"', '\r', '\n'}) == std::string::npos) {
      line += f;
      continue;
    }
    line += '"';
    for (char c : f) line += c == '"' ? std::string("\"\"") : std::string(1, c);
    line += '"';
  }
  line += "\r\n";
  *file_ << line << std::flush;
  check(file_->good(), "CSVLogger: writing to '{}' failed", filename_);
}

// ---- LambdaCallback ---------------------------------------------------------------------------------------------

void LambdaCallback::on_epoch_begin(int epoch, const Logs& logs) {
  if (options_.on_epoch_begin) options_.on_epoch_begin(epoch, logs);
}
void LambdaCallback::on_epoch_end(int epoch, const Logs& logs) {
  if (options_.on_epoch_end) options_.on_epoch_end(epoch, logs);
}
void LambdaCallback::on_train_begin(const Logs& logs) {
  if (options_.on_train_begin) options_.on_train_begin(logs);
}
void LambdaCallback::on_train_end(const Logs& logs) {
  if (options_.on_train_end) options_.on_train_end(logs);
}
void LambdaCallback::on_train_batch_begin(int batch, const Logs& logs) {
  if (options_.on_train_batch_begin) options_.on_train_batch_begin(batch, logs);
}
void LambdaCallback::on_train_batch_end(int batch, const Logs& logs) {
  if (options_.on_train_batch_end) options_.on_train_batch_end(batch, logs);
}

}  // namespace loom::layers
