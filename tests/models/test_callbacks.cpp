#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "layers/core/dense.hpp"
#include "models/callbacks.hpp"
#include "models/model.hpp"
#include "optim/sgd.hpp"
#include "tests/fixture_reader.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;
namespace fs = std::filesystem;

namespace {

/// The smallest model a callback can act on: one Dense layer, built on construction.
class Tiny : public L::Model {
 public:
  Tiny() : Model("tiny") { (*this)(Tensor::zeros({1, 3})); }

 protected:
  Tensor call(const Tensor& x, bool training) override { return dense_(x, training); }

 private:
  L::Dense& dense_ = add_layer(L::Dense(2));
};

/// Marks the model's weights with a number (the epoch that "trained" them).
void set_weights_to(L::Model& model, double value) {
  for (Variable w : model.weights()) w.assign(Tensor::full(w.shape(), value, w.dtype()));
}

/// The number every weight holds, or NaN if they differ.
double weights_value(const L::Model& model) {
  const double first = model.weights().front().value().to_vector<double>().front();
  for (const Variable& w : model.weights())
    for (double v : w.value().to_vector<double>())
      if (v != first) return std::nan("");
  return first;
}

/// A fresh empty folder under the system's temporary folder, private to this process (test runs may overlap).
fs::path temporary_folder(const std::string& name) {
  const fs::path folder =
      fs::temp_directory_path() / fmt::format("loom_test_callbacks_{}_{}", name, static_cast<long>(::getpid()));
  fs::remove_all(folder);
  fs::create_directories(folder);
  return folder;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Collects what is written to std::cerr while it lives.
class CaptureCerr {
 public:
  CaptureCerr() : old_(std::cerr.rdbuf(captured_.rdbuf())) {}
  ~CaptureCerr() { std::cerr.rdbuf(old_); }
  std::string text() const { return captured_.str(); }

 private:
  std::ostringstream captured_;
  std::streambuf* old_;
};

std::vector<FixtureCase> cases_of_kind(const std::string& kind) {
  std::vector<FixtureCase> out;
  for (const FixtureCase& c : read_fixture_cases("callback_fixtures.txt"))
    if (c.words.at(0) == kind) out.push_back(c);
  return out;
}

L::EarlyStoppingOptions early_stopping_options(const FixtureCase& c) {
  const std::string& baseline = c.option("baseline");
  return {.monitor = c.option("monitor"),
          .min_delta = std::stod(c.option("min_delta")),
          .patience = std::stoi(c.option("patience")),
          .verbose = 0,
          .mode = c.option("mode"),
          .baseline = baseline == "none" ? std::nullopt : std::optional<double>(std::stod(baseline)),
          .restore_best_weights = c.option("restore_best_weights") == "1",
          .start_from_epoch = std::stoi(c.option("start_from_epoch"))};
}

}  // namespace

TEST_CASE("EarlyStopping follows Keras epoch by epoch and restores the best weights", "[callbacks]") {
  const auto cases = cases_of_kind("early_stopping");
  REQUIRE(cases.size() >= 12);
  Tiny model;
  for (const FixtureCase& c : cases) {
    INFO("case " << c.name);
    L::EarlyStopping early_stopping(early_stopping_options(c));
    early_stopping.set_model(&model);
    model.stop_training = false;
    early_stopping.on_train_begin({});
    const std::vector<double>& values = c.array("values").values;
    const std::vector<double>& stop = c.array("stop").values;
    int epochs_run = 0;
    // fit's loop: the epoch's weights, on_epoch_end, then stop if asked.
    for (int epoch = 0; epoch < int(values.size()) && !model.stop_training; ++epoch, ++epochs_run) {
      INFO("epoch " << epoch);
      set_weights_to(model, epoch);
      early_stopping.on_epoch_end(epoch, {{c.option("monitor"), values[std::size_t(epoch)]}, {"unwatched", 9.0}});
      CHECK(model.stop_training == (stop.at(std::size_t(epoch)) == 1.0));
      CHECK(early_stopping.wait() == int(c.array("wait").values.at(std::size_t(epoch))));
      const bool has_best = c.array("has_best").values.at(std::size_t(epoch)) == 1.0;
      REQUIRE(early_stopping.best().has_value() == has_best);
      if (has_best) CHECK(*early_stopping.best() == c.array("best").values.at(std::size_t(epoch)));
    }
    CHECK(epochs_run == int(stop.size()));
    early_stopping.on_train_end({});
    CHECK(early_stopping.stopped_epoch() == std::stoi(c.option("stopped_epoch")));
    const int restored = std::stoi(c.option("restored_epoch"));
    CHECK(weights_value(model) == (restored >= 0 ? restored : epochs_run - 1));
  }
}

TEST_CASE("EarlyStopping resets between fits and skips epochs without its monitor", "[callbacks]") {
  Tiny model;
  L::EarlyStopping early_stopping({.monitor = "val_loss", .patience = 0});
  early_stopping.set_model(&model);
  early_stopping.on_train_begin({});
  early_stopping.on_epoch_end(0, {{"val_loss", 1.0}});
  early_stopping.on_epoch_end(1, {{"val_loss", 2.0}});
  REQUIRE(model.stop_training);
  CHECK(early_stopping.stopped_epoch() == 1);

  model.stop_training = false;
  early_stopping.on_train_begin({});  // a second fit starts afresh
  CHECK(early_stopping.wait() == 0);
  CHECK(early_stopping.stopped_epoch() == 0);
  CHECK_FALSE(early_stopping.best().has_value());

  CaptureCerr cerr;
  early_stopping.on_epoch_end(0, {{"loss", 1.0}, {"accuracy", 0.5}});
  early_stopping.on_epoch_end(1, {{"loss", 2.0}, {"accuracy", 0.4}});
  CHECK_FALSE(model.stop_training);
  CHECK_FALSE(early_stopping.best().has_value());
  CHECK_THAT(cerr.text(), Catch::Contains("val_loss") && Catch::Contains("accuracy,loss"));
}

TEST_CASE("EarlyStopping and ModelCheckpoint resolve mode auto and reject unknown modes", "[callbacks]") {
  CHECK(L::EarlyStopping({.monitor = "val_accuracy"}).maximize());
  CHECK(L::EarlyStopping({.monitor = "acc"}).maximize());
  CHECK_FALSE(L::EarlyStopping({.monitor = "val_loss"}).maximize());
  CHECK_FALSE(L::EarlyStopping({.monitor = "mae"}).maximize());
  CHECK_FALSE(L::EarlyStopping({.monitor = "val_accuracy", .mode = "min"}).maximize());
  CHECK(L::ModelCheckpoint({.filepath = "w.safetensors", .monitor = "loss", .mode = "max"}).maximize());
  REQUIRE_THROWS_WITH(L::EarlyStopping({.mode = "bigger"}),
                      Catch::Contains("EarlyStopping") && Catch::Contains("'bigger'"));
  REQUIRE_THROWS_WITH(L::ModelCheckpoint({.filepath = "w.safetensors", .mode = "upwards"}),
                      Catch::Contains("ModelCheckpoint") && Catch::Contains("'upwards'"));
  REQUIRE_THROWS_AS(L::EarlyStopping({.patience = -1}), Error);
}

TEST_CASE("CSVLogger writes the bytes Keras writes", "[callbacks]") {
  // The runs of make_callback_fixtures.py's CSV_RUNS: (append, separator, logs of each epoch).
  struct Run {
    bool append;
    char separator;
    std::vector<L::Logs> epochs;
  };
  const std::map<std::string, std::vector<Run>> runs{
      {"csv_with_validation",
       {{false, ',',
         {{{"loss", 0.5}, {"accuracy", 1.0}, {"val_loss", 1e-05}, {"val_accuracy", 0.0}},
          {{"loss", 0.1 + 0.2}, {"accuracy", 0.0001}, {"val_loss", 123456789.0}, {"val_accuracy", 1e16}},
          {{"loss", 2.5e-4}, {"accuracy", 0.75}, {"val_loss", 1e-300}, {"val_accuracy", 1.0 / 3.0}}}}}},
      {"csv_without_validation", {{false, ',', {{{"loss", 0.25}, {"mae", 3.0}}, {{"loss", 0.125}, {"mae", 2.5}}}}}},
      {"csv_append_semicolon", {{false, ';', {{{"loss", 0.25}}}}, {true, ';', {{{"loss", 0.2}}, {{"loss", 0.15}}}}}},
  };
  const auto cases = cases_of_kind("csv_logger");
  REQUIRE(cases.size() == runs.size());
  const fs::path folder = temporary_folder("csv");
  for (const FixtureCase& c : cases) {
    INFO("case " << c.name);
    const std::string path = (folder / (c.name + ".csv")).string();
    for (const Run& run : runs.at(c.name)) {
      L::CSVLogger logger(path, run.separator, run.append);
      logger.on_train_begin({});
      for (std::size_t epoch = 0; epoch < run.epochs.size(); ++epoch) {
        logger.on_epoch_end(int(epoch), run.epochs[epoch]);
        CHECK_FALSE(read_text(path).empty());  // flushed each epoch, before training ends
      }
      logger.on_train_end({});
    }
    const std::vector<double>& bytes = c.array("text").values;
    CHECK(read_text(path) == std::string(bytes.begin(), bytes.end()));
  }
  fs::remove_all(folder);
}

TEST_CASE("CSVLogger reports files it cannot write and hooks called out of order", "[callbacks]") {
  const fs::path folder = temporary_folder("csv_errors");
  L::CSVLogger missing_folder((folder / "no" / "such" / "log.csv").string());
  REQUIRE_THROWS_WITH(missing_folder.on_train_begin({}), Catch::Contains("CSVLogger") && Catch::Contains("log.csv"));
  L::CSVLogger not_started((folder / "log.csv").string());
  REQUIRE_THROWS_WITH(not_started.on_epoch_end(0, {{"loss", 1.0}}), Catch::Contains("on_train_begin"));
  fs::remove_all(folder);
}

TEST_CASE("LambdaCallback calls the functions it was given and ignores the rest", "[callbacks]") {
  std::vector<std::string> calls;
  L::LambdaCallback callback({
      .on_epoch_begin = [&](int epoch, const L::Logs&) { calls.push_back(fmt::format("epoch_begin {}", epoch)); },
      .on_epoch_end = [&](int epoch, const L::Logs& logs) {
        calls.push_back(fmt::format("epoch_end {} {}", epoch, logs.at("loss")));
      },
      .on_train_begin = [&](const L::Logs&) { calls.push_back("train_begin"); },
      .on_train_batch_end = [&](int batch, const L::Logs&) { calls.push_back(fmt::format("batch_end {}", batch)); },
  });
  L::Callback& hooks = callback;
  hooks.on_train_begin({});
  hooks.on_epoch_begin(3, {});
  hooks.on_train_batch_begin(0, {});  // not given: nothing happens
  hooks.on_train_batch_end(0, {{"loss", 0.5}});
  hooks.on_epoch_end(3, {{"loss", 0.25}});
  hooks.on_train_end({});
  hooks.on_test_begin({});
  CHECK(calls == std::vector<std::string>{"train_begin", "epoch_begin 3", "batch_end 0", "epoch_end 3 0.25"});
}

TEST_CASE("LearningRateScheduler sets the optimizer's rate from the epoch and the current rate", "[callbacks]") {
  Tiny model;
  L::LearningRateScheduler scheduler([](int epoch, double lr) { return epoch < 2 ? lr : lr * 0.5; });
  scheduler.set_model(&model);
  REQUIRE_THROWS_WITH(scheduler.on_epoch_begin(0, {}), Catch::Contains("no optimizer") && Catch::Contains("compile"));

  model.compile({.optimizer = optim::SGD({.learning_rate = 0.1}), .loss = "mse"});
  const std::vector<double> want{0.1, 0.1, 0.05, 0.025};
  for (int epoch = 0; epoch < 4; ++epoch) {
    scheduler.on_epoch_begin(epoch, {});
    CHECK(model.optimizer()->learning_rate() == Approx(want[std::size_t(epoch)]).epsilon(1e-15));
  }
  L::LearningRateScheduler broken([](int, double) { return std::nan(""); });
  broken.set_model(&model);
  REQUIRE_THROWS_WITH(broken.on_epoch_begin(7, {}), Catch::Contains("LearningRateScheduler") && Catch::Contains("7"));
  REQUIRE_THROWS_AS(L::LearningRateScheduler(nullptr), Error);
}

TEST_CASE("ModelCheckpoint formats its file path like Python's str.format", "[callbacks]") {
  L::ModelCheckpoint checkpoint({.filepath = "ckpt/e{epoch:02d}-b{batch}-{val_loss:.3f}-{epoch}.safetensors"});
  CHECK(checkpoint.file_path(4, 9, {{"val_loss", 0.123456}}) == "ckpt/e05-b10-0.123-5.safetensors");
  REQUIRE_THROWS_WITH(checkpoint.file_path(0, std::nullopt, {{"loss", 1.0}}),
                      Catch::Contains("ModelCheckpoint") && Catch::Contains("{val_loss:.3f}") &&
                          Catch::Contains("loss"));
  REQUIRE_THROWS_WITH(L::ModelCheckpoint({.filepath = "m.keras", .save_weights_only = false}),
                      Catch::Contains("save_weights_only"));
  REQUIRE_THROWS_AS(L::ModelCheckpoint({.filepath = ""}), Error);
  REQUIRE_THROWS_AS(L::ModelCheckpoint({.filepath = "w.safetensors", .save_freq = 0}), Error);
}

TEST_CASE("ModelCheckpoint saves every epoch, only the best ones, or every n batches", "[callbacks]") {
  const fs::path folder = temporary_folder("checkpoint");
  Tiny model;

  L::ModelCheckpoint every_epoch({.filepath = (folder / "all" / "epoch_{epoch}.safetensors").string()});
  every_epoch.set_model(&model);
  for (int epoch = 0; epoch < 2; ++epoch) every_epoch.on_epoch_end(epoch, {{"loss", 1.0}});
  CHECK(fs::exists(folder / "all" / "epoch_1.safetensors"));  // the missing folder was created
  CHECK(fs::exists(folder / "all" / "epoch_2.safetensors"));

  L::ModelCheckpoint best_only({.filepath = (folder / "best_{epoch:02d}_{val_loss:.2f}.safetensors").string(),
                                .save_best_only = true});
  best_only.set_model(&model);
  const std::vector<double> val_loss{0.5, 0.7, 0.3, 0.3};
  for (int epoch = 0; epoch < 4; ++epoch) best_only.on_epoch_end(epoch, {{"val_loss", val_loss[std::size_t(epoch)]}});
  CHECK(fs::exists(folder / "best_01_0.50.safetensors"));
  CHECK_FALSE(fs::exists(folder / "best_02_0.70.safetensors"));
  CHECK(fs::exists(folder / "best_03_0.30.safetensors"));
  CHECK_FALSE(fs::exists(folder / "best_04_0.30.safetensors"));  // equal is no improvement
  CHECK(best_only.best() == 0.3);

  L::ModelCheckpoint threshold({.filepath = (folder / "acc_{epoch}.safetensors").string(),
                                .monitor = "val_accuracy",
                                .save_best_only = true,
                                .initial_value_threshold = 0.8});
  threshold.set_model(&model);
  threshold.on_epoch_end(0, {{"val_accuracy", 0.75}});
  threshold.on_epoch_end(1, {{"val_accuracy", 0.85}});
  CHECK_FALSE(fs::exists(folder / "acc_1.safetensors"));
  CHECK(fs::exists(folder / "acc_2.safetensors"));

  L::ModelCheckpoint batches({.filepath = (folder / "b_{epoch}_{batch}.safetensors").string(), .save_freq = 2});
  batches.set_model(&model);
  batches.on_epoch_begin(0, {});
  for (int batch = 0; batch < 3; ++batch) batches.on_train_batch_end(batch, {{"loss", 1.0}});
  batches.on_epoch_end(0, {{"loss", 1.0}});
  batches.on_epoch_begin(1, {});
  batches.on_train_batch_end(0, {{"loss", 1.0}});  // the count runs on across epochs, as Keras
  CHECK(fs::exists(folder / "b_1_2.safetensors"));
  CHECK(fs::exists(folder / "b_2_1.safetensors"));
  CHECK(std::distance(fs::directory_iterator(folder), fs::directory_iterator()) == 6);  // all/, 2 best, acc, 2 b
  fs::remove_all(folder);
}

TEST_CASE("ModelCheckpoint files load back into a fresh model", "[callbacks]") {
  const fs::path folder = temporary_folder("checkpoint_load");
  Tiny model;
  L::ModelCheckpoint best_only({.filepath = (folder / "best.safetensors").string(), .save_best_only = true});
  best_only.set_model(&model);
  const std::vector<double> val_loss{0.5, 0.2, 0.4};
  for (int epoch = 0; epoch < 3; ++epoch) {
    set_weights_to(model, epoch + 10);
    best_only.on_epoch_end(epoch, {{"val_loss", val_loss[std::size_t(epoch)]}});
  }
  Tiny fresh;
  fresh.load_weights((folder / "best.safetensors").string());
  CHECK(weights_value(fresh) == 11.0);  // epoch 1 had the best val_loss
  fs::remove_all(folder);
}
