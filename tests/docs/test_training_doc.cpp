// The C++ blocks of docs/training.md, verbatim inside test cases (between the "doc" markers), so that they keep
// compiling and working. Each test names the section it mirrors; keep the two in sync. The first block of the
// page is examples/mlp/main.cpp, compiled as that program.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>

#include "loom.hpp"
#include "tests/temp_files.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
namespace L = loom::layers;

namespace {

// Keeps what the examples print off the test log.
struct QuietStdout {
  std::ostringstream printed;
  std::streambuf* console = std::cout.rdbuf(printed.rdbuf());
  ~QuietStdout() { std::cout.rdbuf(console); }
};

// doc: Models
class Mlp : public L::Model {
 public:
  Mlp() : Model("mlp") {}
 protected:
  Tensor call(const Tensor& x, bool training) override { return out_(hidden_(x, training), training); }
 private:
  L::Dense& hidden_ = add_layer(L::Dense(64, {.activation = "relu"}));
  L::Dense& out_ = add_layer(L::Dense(10));
};
// end doc

}  // namespace

TEST_CASE("training doc section Models: the subclassed Mlp", "[docs]") {
  Mlp mlp;
  CHECK(mlp(Tensor::ones({4, 3})).shape() == Shape{4, 10});
  CHECK(mlp.weights().size() == 4);
}

TEST_CASE("training doc section The Functional API: a text classifier", "[docs]") {
  const QuietStdout quiet;
  // doc
  Tensor tokens = L::Input({12}, {.dtype = DType::i64});
  Tensor e = L::Embedding(50, 16, {.mask_zero = true})(tokens);     // the mask flows to the attention
  Tensor att = L::MultiHeadAttention({.num_heads = 2, .key_dim = 8})(e, e);
  Tensor h = L::LayerNormalization()(e + att);                       // an op on symbolic tensors: a node
  Model classifier(tokens, L::Dense(3, {.activation = "softmax"})(ops::mean(h, {1})));
  classifier.compile({.optimizer = optim::Adam({.learning_rate = 1e-3}), .loss = "sparse_categorical_crossentropy"});
  classifier.summary();   // Keras's Functional table, with its "Connected to" column
  // end doc
  CHECK(quiet.printed.str().find("Connected to") != std::string::npos);
  const Tensor ids = Tensor::uniform({8, 12}, 0, 50, DType::f32, 1).to(DType::i64);
  const Tensor labels = Tensor::uniform({8}, 0, 3, DType::f32, 2).to(DType::i64);
  const auto history = classifier.fit(ids, labels, {.epochs = 2, .verbose = 0});
  CHECK(history.history.at("loss").size() == 2);
  CHECK(classifier.predict(ids, {.verbose = 0}).shape() == Shape{8, 3});
}

TEST_CASE("training doc section Optimizers: AdamW with a warm-up cosine schedule", "[docs]") {
  auto model = L::Sequential({L::Input({3}), L::Dense(2)});
  GradientTape tape;
  Tensor loss = ops::mean(ops::square(model(Tensor::ones({4, 3}))));
  // doc
  optim::AdamW opt({.learning_rate = optim::CosineDecay({.initial_learning_rate = 0.0, .decay_steps = 1000,
                                                         .warmup_target = 1e-3, .warmup_steps = 100}),
                    .weight_decay = 0.01, .global_clipnorm = 1.0});
  opt.apply_gradients(tape.gradient(loss, model.trainable_weights()), model.trainable_weights());
  auto sgd = optim::get("sgd");   // "adam", "adamw", "rmsprop", "sgd", "adagrad", "adamax", "adadelta", "lion",
                                  // "nadam", "adafactor"; any case, Keras defaults
  optim::Nadam averaged({.learning_rate = 1e-3, .use_ema = true, .ema_overwrite_frequency = 100,
                         .gradient_accumulation_steps = 4});
  // end doc
  CHECK(averaged.shared_options().gradient_accumulation_steps == 4);
  CHECK(opt.iterations() == 1);
  CHECK(opt.learning_rate() == Approx(1e-5));  // one step into the 100-step warm-up to 1e-3
  CHECK(sgd->name() == "sgd");
}

TEST_CASE("training doc section Metrics: a metric on its own and compiled by name", "[docs]") {
  Tensor labels = Tensor::from_vector(std::vector<std::int64_t>{0, 2, 1}, Shape{3});
  Tensor logits = Tensor::from_vector(std::vector<float>{3, 1, 0, 0, 1, 2, 0, 0, 1}, Shape{3, 3});
  auto model = L::Sequential({L::Input({3}), L::Dense(3)});
  // doc
  namespace M = loom::layers::metrics;
  M::SparseCategoricalAccuracy acc;                 // named "sparse_categorical_accuracy"
  acc.update_state(labels, logits);                 // labels int64 [N] or [N, 1], logits [N, C]
  double a = acc.result();   acc.reset_state();

  model.compile({.optimizer = "adam", .loss = "sparse_categorical_crossentropy", .metrics = {"accuracy", "mae"}});
  // end doc
  CHECK(a == Approx(2.0 / 3.0));
  CHECK(acc.result() == 0.0);
  CHECK(model.compiled());
}

TEST_CASE("training doc section Callbacks: four callbacks in one fit", "[docs]") {
  {
    const loom::testing::TempWorkingDirectory cwd("training-doc");  // the example writes ckpt/ and training.csv

    QuietStdout quiet;
    Tensor x = Tensor::randn({40, 2}, DType::f32, 1);
    Tensor y = x * 2.0;
    auto model = L::Sequential({L::Input({2}), L::Dense(2)});
    model.compile({.optimizer = "sgd", .loss = "mse"});
    // doc
    auto stopper = std::make_shared<L::EarlyStopping>(L::EarlyStoppingOptions{
        .monitor = "val_loss", .patience = 3, .restore_best_weights = true});
    model.fit(x, y, {.epochs = 100,
                     .callbacks = {stopper,
                                   L::ModelCheckpoint({.filepath = "ckpt/epoch_{epoch:02d}.safetensors",
                                                       .save_best_only = true}),
                                   L::LearningRateScheduler([](int epoch, double lr) { return epoch < 10 ? lr : lr * 0.9; }),
                                   L::CSVLogger("training.csv")},
                     .validation_split = 0.1});
    fmt::print("stopped at epoch {}\n", stopper->stopped_epoch() + 1);
    // end doc
    CHECK(std::filesystem::exists("ckpt/epoch_01.safetensors"));
    CHECK(std::filesystem::file_size("training.csv") > 0);
  }
}

TEST_CASE("training doc section Callbacks: LambdaCallback", "[docs]") {
  QuietStdout quiet;
  // doc
  L::LambdaCallback print_loss({.on_epoch_end = [](int epoch, const L::Logs& logs) {
    fmt::print("epoch {}: loss {:.4f}\n", epoch + 1, logs.at("loss"));
  }});
  // end doc
  auto model = L::Sequential({L::Input({1}), L::Dense(1)});
  model.compile({.optimizer = "sgd", .loss = "mse"});
  CHECK_NOTHROW(model.fit(Tensor::ones({4, 1}), Tensor::ones({4, 1}), {.epochs = 2, .verbose = 0,
                                                                      .callbacks = {print_loss}}));
}

TEST_CASE("training doc section Progbar: a bar driven by hand", "[docs]") {
  QuietStdout quiet;
  const double loss = 0.5;
  // doc
  L::Progbar bar(100);                                   // -1: unknown target ("     10/Unknown")
  for (int step = 1; step <= 100; ++step) bar.update(step, {{"loss", loss}});   // finalizes at 100/100
  // end doc
  CHECK(quiet.printed.str().find("100/100") != std::string::npos);
}

TEST_CASE("training doc section safetensors: save, load, read", "[docs]") {
  std::optional<loom::testing::TempWorkingDirectory> cwd(std::in_place, "training-doc-io");
  const Tensor w = Tensor::randn({3, 2}, DType::f32, 1), b = Tensor::zeros({2});
  // doc
  io::save_safetensors("model.safetensors", {{"dense/kernel", w}, {"dense/bias", b}}, {{"format", "pt"}});
  std::vector<std::pair<std::string, Tensor>> tensors = io::load_safetensors("model.safetensors");
  io::SafetensorsFile file = io::read_safetensors("model.safetensors");   // file.tensors, file.metadata
  // end doc
  cwd.reset();
  REQUIRE(tensors.size() == 2);
  CHECK(tensors[0].first == "dense/kernel");
  CHECK(tensors[0].second.to_vector<float>() == w.to_vector<float>());
  CHECK(file.metadata.at("format") == "pt");
}

TEST_CASE("training doc section Regularizers and constraints: a regularized Sequential", "[docs]") {
  L::reset_layer_names();
  // doc
  auto model = L::Sequential({L::Input({16}),
                              L::Dense(64, {.activation = "relu", .kernel_regularizer = "l2",
                                            .activity_regularizer = L::regularizers::l1(1e-4),
                                            .kernel_constraint = L::constraints::max_norm(3.0)}),
                              L::Dense(1)});
  // end doc
  model.compile({.optimizer = optim::SGD({.learning_rate = 0.1}), .loss = "mse"});
  const Tensor x = Tensor::randn({8, 16}, DType::f32, 1), y = Tensor::randn({8, 1}, DType::f32, 2);
  model.fit(x, y, {.batch_size = 8, .epochs = 1, .verbose = 0});
  REQUIRE(model.losses().size() == 2);  // the activity penalty of that step's call, the kernel's L2
  const Tensor kernel = model.layers().front()->weights().front();
  const Tensor norms = ops::sqrt(ops::sum(ops::square(kernel), {0}));
  CHECK(ops::max(norms).item<double>() <= 3.0);
}
