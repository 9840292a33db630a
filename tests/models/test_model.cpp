// Model and Sequential: construction, compile / fit / evaluate / predict, History, validation, callbacks in
// the loop, summary and weights files.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "framework/runtime/detail/scoped_environment.hpp"
#include "loom.hpp"
#include "tests/temp_files.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

namespace {

// y = x @ [1, -2, 0.5] + 0.3, float64, n samples.
std::pair<Tensor, Tensor> linear_data(std::int64_t n, std::uint64_t seed) {
  Tensor x = Tensor::randn({n, 3}, DType::f64, seed);
  Tensor y = ops::matmul(x, f64({1.0, -2.0, 0.5}, {3, 1})) + 0.3;
  return {x, y};
}

// Two Gaussian blobs in 2-D, labels 0 / 1 as int64.
std::pair<Tensor, Tensor> blobs(std::int64_t n, std::uint64_t seed) {
  Tensor noise = Tensor::randn({n, 2}, DType::f32, seed);
  std::vector<float> centers;
  std::vector<std::int64_t> labels;
  for (std::int64_t i = 0; i < n; ++i) {
    const bool one = i % 2 == 1;
    centers.insert(centers.end(), {one ? 1.5f : -1.5f, one ? 1.0f : -1.0f});
    labels.push_back(one ? 1 : 0);
  }
  return {noise + Tensor::from_vector(centers, {n, 2}), Tensor::from_vector(labels, {n})};
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("loom_test_model_" + name)).string();
}

class TwoLayer : public L::Model {
 public:
  TwoLayer() : Model("two_layer") {}

 protected:
  Tensor call(const Tensor& x, bool training) override { return out_(hidden_(x, training), training); }

 private:
  L::Dense& hidden_ = add_layer(L::Dense(8, {.activation = "tanh"}));
  L::Dense& out_ = add_layer(L::Dense(1));
};

}  // namespace

TEST_CASE("Sequential starting with an Input builds at once and lists its layers without it", "[model]") {
  auto model = L::Sequential({L::Input({4}), L::Dense(3), L::Dense(2)});
  REQUIRE(model.built());
  REQUIRE(model.layers().size() == 2);
  CHECK(model.count_params() == 4 * 3 + 3 + 3 * 2 + 2);
  CHECK(model.compute_output_shape({5, 4}) == Shape{5, 2});

  model.add(L::Dense(7));
  CHECK(model.layers().size() == 3);
  CHECK(model.count_params() == 4 * 3 + 3 + 3 * 2 + 2 + 2 * 7 + 7);  // built on add
  model.pop();
  CHECK(model.layers().size() == 2);
  CHECK(model.weights().size() == 4);
  model.pop();
  model.pop();
  CHECK_THROWS_WITH(model.pop(), Catch::Contains("no layers to remove"));
  CHECK_THROWS_WITH(model.add(L::Input({3})), Catch::Contains("Input can only be the first layer"));
}

TEST_CASE("Sequential without an Input builds on the first call, and checks the Input shape", "[model]") {
  auto lazy = L::Sequential({L::Dense(3), L::Dense(1)});
  CHECK_FALSE(lazy.built());
  Tensor y = lazy(Tensor::ones({2, 5}));
  CHECK(y.shape() == Shape{2, 1});
  CHECK(lazy.count_params() == 5 * 3 + 3 + 3 + 1);

  auto strict = L::Sequential({L::Input({4}), L::Dense(2)});
  CHECK_THROWS_WITH(strict(Tensor::ones({2, 5})), Catch::Contains("[-1, 4]") && Catch::Contains("[2, 5]"));
}

TEST_CASE("Models nest: a Sequential inside a subclassed model and the other way round", "[model]") {
  class Wrapper : public L::Model {
   public:
    Wrapper() : Model("wrapper") {}

   protected:
    Tensor call(const Tensor& x, bool training) override { return inner_(x, training) * 2.0; }

   private:
    L::Sequential& inner_ = add_layer(L::Sequential({L::Dense(2), L::Dense(1)}));
  };
  Wrapper w;
  Tensor x = Tensor::ones({3, 4});
  Tensor y = w(x);
  CHECK(y.shape() == Shape{3, 1});
  REQUIRE(w.weights().size() == 4);
  CHECK(w.weights()[0].name().rfind(w.name() + "/sequential", 0) == 0);

  auto outer = L::Sequential({L::Input({4}), L::Dense(2)});
  outer.add(std::make_shared<TwoLayer>());
  CHECK(outer(x).shape() == Shape{3, 1});
  CHECK(outer.weights().size() == 6);
}

TEST_CASE("fit before compile, unknown strings and mismatched data are errors naming the problem", "[model]") {
  auto model = L::Sequential({L::Input({3}, {.dtype = DType::f64}), L::Dense(1)});
  auto [x, y] = linear_data(10, 1);
  CHECK_THROWS_WITH(model.fit(x, y, {.verbose = 0}), Catch::Contains("not compiled"));
  CHECK_THROWS_WITH(model.evaluate(x, y, {.verbose = 0}), Catch::Contains("not compiled"));
  CHECK_THROWS_WITH(model.compile({.optimizer = "adamax_typo", .loss = "mse"}), Catch::Contains("adamax_typo"));
  CHECK_THROWS_WITH(model.compile({.optimizer = "adam", .loss = "msee"}), Catch::Contains("unknown loss 'msee'"));
  CHECK_THROWS_WITH(model.compile({.optimizer = "adam"}), Catch::Contains("no loss"));

  model.compile({.optimizer = "sgd", .loss = "mse"});
  CHECK_THROWS_WITH(model.fit(x, ops::slice(y, 0, 0, 7), {.verbose = 0}),
                    Catch::Contains("different numbers of samples") && Catch::Contains("[10, 3]") &&
                        Catch::Contains("[7, 1]"));
  CHECK_THROWS_WITH(model.fit(Tensor::ones({10, 4}, DType::f64), y, {.verbose = 0}), Catch::Contains("[10, 4]"));
  CHECK_THROWS_WITH(model.fit(x, y, {.batch_size = 0, .verbose = 0}), Catch::Contains("batch_size"));
  CHECK_THROWS_WITH(model.fit(x, y, {.verbose = 0, .validation_split = 1.0}), Catch::Contains("validation_split"));
  CHECK_THROWS_WITH(model.fit(x, y, {.verbose = 0, .validation_split = 0.95}), Catch::Contains("both must be"));
}

TEST_CASE("fit solves a small regression, and History matches what evaluate returns", "[model]") {
  L::reset_layer_names();
  auto [x, y] = linear_data(256, 2);
  auto [xv, yv] = linear_data(64, 3);
  auto model = L::Sequential({L::Input({3}, {.dtype = DType::f64}), L::Dense(1)});
  model.compile({.optimizer = optim::Adam({.learning_rate = 0.05}), .loss = "mse", .metrics = {"mae"}});
  History h = model.fit(x, y, {.batch_size = 32, .epochs = 40, .verbose = 0, .validation_data = std::pair{xv, yv},
                               .seed = 7});

  std::vector<std::string> keys;
  for (const auto& [k, v] : h.history) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"loss", "mae", "val_loss", "val_mae"});
  CHECK(h.epoch.size() == 40);
  CHECK(h.params.steps == 8);
  CHECK(h.history["loss"].front() > 1.0);
  CHECK(h.history["loss"].back() < 1e-4);  // stated goal: the exact linear map is found

  L::Logs val = model.evaluate(xv, yv, {.verbose = 0});
  CHECK(val.at("loss") == Approx(h.history["val_loss"].back()).epsilon(1e-12));
  CHECK(val.at("mae") == Approx(h.history["val_mae"].back()).epsilon(1e-12));
}

TEST_CASE("fit learns a small classification with accuracy chosen by the label shapes", "[model]") {
  auto [x, y] = blobs(400, 4);
  auto model = L::Sequential({L::Input({2}), L::Dense(16, {.activation = "relu"}), L::Dense(2)});
  model.compile({.optimizer = "adam",
                 .loss = [](const Tensor& t, const Tensor& p) {
                   return losses::sparse_categorical_crossentropy(t, p, {.from_logits = true});
                 },
                 .metrics = {"accuracy"}});
  History h = model.fit(x, y, {.batch_size = 32, .epochs = 30, .verbose = 0, .seed = 1});
  CHECK(h.history.count("accuracy") == 1);
  CHECK(h.history["accuracy"].back() >= 0.95);  // the blobs overlap little: about 97% is separable
  L::Logs logs = model.evaluate(x, y, {.verbose = 0});
  CHECK(logs.at("accuracy") >= 0.95);
  REQUIRE(model.metrics().size() == 1);
  CHECK(model.metrics()[0]->name() == "accuracy");

  Tensor probabilities = ops::softmax(model.predict(x, {.verbose = 0}), -1);
  CHECK(probabilities.shape() == Shape{400, 2});
}

TEST_CASE("validation_split holds out the last samples, before shuffling", "[model]") {
  auto [x, y] = linear_data(40, 5);
  auto model = L::Sequential({L::Input({3}, {.dtype = DType::f64}), L::Dense(1)});
  // A zero learning rate keeps the weights, so val_loss must equal the loss on exactly the held-out rows.
  model.compile({.optimizer = optim::SGD({.learning_rate = 0.0}), .loss = "mse"});
  History h = model.fit(x, y, {.batch_size = 8, .epochs = 2, .verbose = 0, .validation_split = 0.25});
  CHECK(h.params.steps == 4);  // 30 training samples
  const double last = model.evaluate(ops::slice(x, 0, 30, 40), ops::slice(y, 0, 30, 40), {.verbose = 0}).at("loss");
  const double first = model.evaluate(ops::slice(x, 0, 0, 10), ops::slice(y, 0, 0, 10), {.verbose = 0}).at("loss");
  CHECK(h.history["val_loss"][0] == Approx(last).epsilon(1e-12));
  CHECK(h.history["val_loss"][1] == Approx(last).epsilon(1e-12));
  CHECK(std::abs(first - last) > 1e-3);
}

TEST_CASE("shuffling is seeded: the same seed gives the same run, another seed another", "[model]") {
  auto run = [](std::uint64_t seed, bool shuffle) {
    L::reset_layer_names();
    auto [x, y] = linear_data(64, 6);
    auto model = L::Sequential({L::Input({3}, {.dtype = DType::f64}), L::Dense(1, {.kernel_initializer = L::initializers::constant(0.1)})});
    model.compile({.optimizer = optim::SGD({.learning_rate = 0.05}), .loss = "mse"});
    return model.fit(x, y, {.batch_size = 8, .epochs = 3, .verbose = 0, .shuffle = shuffle, .seed = seed})
        .history["loss"];
  };
  CHECK(run(1, true) == run(1, true));
  CHECK(run(1, true) != run(2, true));
  CHECK(run(1, false) == run(2, false));
}

TEST_CASE("EarlyStopping in fit stops after its patience and restores the best weights", "[model]") {
  // Training pulls towards y = x while validation wants y = -x: val_loss gets worse from the first epoch on.
  Tensor x = Tensor::randn({64, 1}, DType::f64, 8);
  auto model = L::Sequential({L::Input({1}, {.dtype = DType::f64}), L::Dense(1, {.use_bias = false})});
  model.compile({.optimizer = optim::SGD({.learning_rate = 0.1}), .loss = "mse"});
  auto stopper = std::make_shared<L::EarlyStopping>(
      L::EarlyStoppingOptions{.monitor = "val_loss", .patience = 2, .restore_best_weights = true});
  History h = model.fit(x, x, {.batch_size = 16, .epochs = 20, .verbose = 0, .callbacks = {stopper},
                               .validation_data = std::pair{x, x * -1.0}});
  REQUIRE(h.epoch.size() == 3);  // best at epoch 0, then two epochs without improvement
  CHECK(model.stop_training);
  const double restored = model.evaluate(x, x * -1.0, {.verbose = 0}).at("loss");
  CHECK(restored == Approx(h.history["val_loss"][0]).epsilon(1e-12));
}

TEST_CASE("train_on_batch and test_on_batch return the batch's loss and metrics", "[model]") {
  auto [x, y] = linear_data(16, 9);
  auto model = L::Sequential({L::Input({3}, {.dtype = DType::f64}), L::Dense(1)});
  model.compile({.optimizer = optim::SGD({.learning_rate = 0.1}), .loss = "mse", .metrics = {"mae"}});
  const L::Logs before = model.test_on_batch(x, y);
  Tensor prediction = model.predict_on_batch(x);
  CHECK(before.at("loss") == Approx(ops::mean((prediction - y) * (prediction - y)).item<double>()).epsilon(1e-12));
  CHECK(before.at("mae") == Approx(ops::mean(ops::abs(prediction - y)).item<double>()).epsilon(1e-12));
  const L::Logs trained = model.train_on_batch(x, y);
  CHECK(trained.at("loss") == Approx(before.at("loss")).epsilon(1e-12));  // the loss before the step
  CHECK(model.test_on_batch(x, y).at("loss") < before.at("loss"));
  CHECK(model.optimizer()->iterations() == 1);
}

TEST_CASE("predict runs in batches without recording and equals one call", "[model]") {
  auto model = L::Sequential({L::Input({3}, {.dtype = DType::f64}), L::Dense(4, {.activation = "relu"}), L::Dense(2)});
  Tensor x = Tensor::randn({70, 3}, DType::f64, 10);
  GradientTape tape;
  Tensor batched = model.predict(x, {.batch_size = 16, .verbose = 0});
  CHECK(tape.recorded_ops().empty());
  check_close(values(batched), values(model(x)), 1e-6, 1e-6);
}

TEST_CASE("fit's progress output has Keras's form when the output is not a terminal", "[model]") {
  auto [x, y] = linear_data(20, 11);
  auto model = L::Sequential({L::Input({3}, {.dtype = DType::f64}), L::Dense(1)});
  model.compile({.optimizer = "sgd", .loss = "mse", .metrics = {"mae"}});
  std::ostringstream out;
  model.fit(x, y, {.batch_size = 8, .epochs = 2, .verbose = 1, .out = &out});
  const std::regex epoch_line(R"(3/3 ━━━━━━━━━━━━━━━━━━━━ \d+s \d+(ms|us|s)/step - loss: \d+\.\d{4} - mae: \d+\.\d{4})");
  const std::string text = out.str();
  CHECK(text.find("Epoch 1/2\n") != std::string::npos);
  CHECK(text.find("Epoch 2/2\n") != std::string::npos);
  CHECK(std::regex_search(text, epoch_line));

  std::ostringstream quiet;
  model.fit(x, y, {.batch_size = 8, .epochs = 1, .verbose = 2, .out = &quiet});
  CHECK(std::regex_match(quiet.str(), std::regex(R"(3/3 - \d+s - \d+(ms|us|s)/step - loss: \d+\.\d{4} - mae: \d+\.\d{4}\n)")));
}

TEST_CASE("summary prints Keras's table", "[model]") {
  L::reset_layer_names();
  auto model = L::Sequential({L::Input({784}), L::Dense(64), L::BatchNormalization(), L::Dense(10)});
  const std::string expected =
      "Model: \"sequential\"\n"
      "┏━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━┓\n"
      "┃ Layer (type)                         ┃ Output Shape                ┃         Param # ┃\n"
      "┡━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━┩\n"
      "│ dense (Dense)                        │ (None, 64)                  │          50,240 │\n"
      "├──────────────────────────────────────┼─────────────────────────────┼─────────────────┤\n"
      "│ batch_normalization                  │ (None, 64)                  │             256 │\n"
      "│ (BatchNormalization)                 │                             │                 │\n"
      "├──────────────────────────────────────┼─────────────────────────────┼─────────────────┤\n"
      "│ dense_1 (Dense)                      │ (None, 10)                  │             650 │\n"
      "└──────────────────────────────────────┴─────────────────────────────┴─────────────────┘\n"
      " Total params: 51,146 (199.79 KB)\n"
      " Trainable params: 51,018 (199.29 KB)\n"
      " Non-trainable params: 128 (512.00 B)\n";
  CHECK(model.summary_string({.line_length = 88}) == expected);
}

TEST_CASE("summary of a subclassed model shows each child's output shape once it has run", "[model]") {
  L::reset_layer_names();
  class Mlp : public L::Model {
   public:
    Mlp() : Model("mlp") {}

   protected:
    Tensor call(const Tensor& x, bool training) override { return out_(hidden_(x, training), training); }

   private:
    L::Dense& hidden_ = add_layer(L::Dense(5));
    L::Dense& out_ = add_layer(L::Dense(2));
  };
  Mlp model;
  // The table's line for a layer, e.g. "│ dense (Dense)   │ (4, 5)   │   20 │".
  const auto row_of = [&](const std::string& layer) {
    const std::string text = model.summary_string({.line_length = 88});
    const auto at = text.find("│ " + layer + " ");
    REQUIRE(at != std::string::npos);
    return text.substr(at, text.find('\n', at) - at);
  };
  CHECK(row_of("dense (Dense)").find("│ ? ") != std::string::npos);
  model(Tensor::ones({4, 3}));
  CHECK(row_of("dense (Dense)").find("│ (4, 5) ") != std::string::npos);
  CHECK(row_of("dense_1 (Dense)").find("│ (4, 2) ") != std::string::npos);
}

TEST_CASE("save_weights and load_weights round-trip into a fresh model of the same architecture", "[model]") {
  const std::string path = temp_path("roundtrip.safetensors");
  auto make = [] { return L::Sequential({L::Input({3}, {.dtype = DType::f64}), L::Dense(4, {.activation = "relu"}), L::BatchNormalization(),
                                         L::Dense(2)}); };
  auto a = make();
  auto [x, y] = linear_data(32, 12);
  a.compile({.optimizer = "adam", .loss = "mse"});
  a.fit(x, ops::concat({y, y}, 1), {.epochs = 2, .verbose = 0});  // moves the BatchNormalization statistics too
  a.save_weights(path);

  auto b = make();  // other auto-names (sequential_1, dense_2, ...): the file's keys are structural
  CHECK(values(b.predict(x, {.verbose = 0})) != values(a.predict(x, {.verbose = 0})));
  b.load_weights(path);
  CHECK(values(b.predict(x, {.verbose = 0})) == values(a.predict(x, {.verbose = 0})));
  std::remove(path.c_str());
}

TEST_CASE("load_weights reports every mismatch at once and changes nothing", "[model]") {
  const std::string path = temp_path("mismatch.safetensors");
  auto a = L::Sequential({L::Input({3}, {.dtype = DType::f64}), L::Dense(4), L::Dense(2)});
  a.save_weights(path);
  auto b = L::Sequential({L::Input({3}, {.dtype = DType::f64}), L::Dense(5), L::Dense(2), L::Dense(1)});
  const auto before = b.weights();
  std::vector<std::vector<double>> saved;
  for (const auto& w : before) saved.push_back(values(w.value()));
  try {
    b.load_weights(path);
    FAIL("load_weights accepted a mismatching file");
  } catch (const Error& e) {
    const std::string message = e.what();
    CHECK_THAT(message, Catch::Contains("dense/kernel") && Catch::Contains("[3, 4]") && Catch::Contains("[3, 5]"));
    CHECK_THAT(message, Catch::Contains("dense/bias"));
    CHECK_THAT(message, Catch::Contains("dense_1/kernel") && Catch::Contains("[4, 2]"));
    CHECK_THAT(message, Catch::Contains("'dense_2/kernel' is missing"));
  }
  for (std::size_t i = 0; i < before.size(); ++i) CHECK(values(before[i].value()) == saved[i]);

  // A truncated file is an error too, and leaves the weights alone.
  auto c = L::Sequential({L::Input({3}, {.dtype = DType::f64}), L::Dense(4), L::Dense(2)});
  const auto c_before = values(c.weights()[0].value());
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 5);
  CHECK_THROWS_AS(c.load_weights(path), Error);
  CHECK(values(c.weights()[0].value()) == c_before);
  std::remove(path.c_str());
}

TEST_CASE("weights files with the optimizer state resume training exactly", "[model]") {
  const std::string path = temp_path("resume.safetensors");
  auto [x, y] = linear_data(32, 13);
  auto make = [] {
    auto m = L::Sequential({L::Input({3}, {.dtype = DType::f64}), L::Dense(2, {.activation = "tanh"}), L::Dense(1)});
    m.compile({.optimizer = optim::Adam({.learning_rate = 0.01}), .loss = "mse"});
    return m;
  };
  auto straight = make();
  straight.fit(x, y, {.epochs = 2, .verbose = 0, .shuffle = false});
  straight.save_weights(path, {.include_optimizer = true});
  straight.fit(x, y, {.epochs = 2, .verbose = 0, .shuffle = false});

  auto resumed = make();
  resumed.load_weights(path, {.include_optimizer = true});
  CHECK(resumed.optimizer()->iterations() == 2);
  resumed.fit(x, y, {.epochs = 2, .verbose = 0, .shuffle = false});
  CHECK(values(resumed.predict(x, {.verbose = 0})) == values(straight.predict(x, {.verbose = 0})));
  std::remove(path.c_str());
}

TEST_CASE("crossentropy and accuracy strings pick the binary, sparse or categorical form from the shapes", "[model]") {
  auto [x, labels] = blobs(64, 14);
  auto evaluate_with = [&, &x = x](L::Sequential& model, const char* loss, const Tensor& y) {
    model.compile({.optimizer = "adam", .loss = loss, .metrics = {"accuracy"}});
    return model.evaluate(x, y, {.verbose = 0});
  };
  // Int labels [N] against [N, 2] probabilities are sparse; the same labels one-hot are categorical.
  auto softmax = L::Sequential({L::Input({2}), L::Dense(2, {.activation = "softmax"})});
  const Tensor one_hot = ops::one_hot(labels, 2, DType::f32);
  const L::Logs sparse = evaluate_with(softmax, "crossentropy", labels);
  const L::Logs categorical = evaluate_with(softmax, "crossentropy", one_hot);
  CHECK(sparse.at("loss") == Approx(evaluate_with(softmax, "sparse_categorical_crossentropy", labels).at("loss")));
  CHECK(categorical.at("loss") == Approx(evaluate_with(softmax, "categorical_crossentropy", one_hot).at("loss")));
  CHECK(sparse.at("loss") == Approx(categorical.at("loss")).epsilon(1e-6));
  CHECK(sparse.at("accuracy") == categorical.at("accuracy"));
  CHECK(softmax.metrics()[0]->name() == "accuracy");

  // One sigmoid unit against [N, 1] labels in {0, 1} is binary.
  auto sigmoid = L::Sequential({L::Input({2}), L::Dense(1, {.activation = "sigmoid"})});
  const Tensor binary_labels = labels.to(DType::f32).reshape({64, 1});
  const L::Logs binary = evaluate_with(sigmoid, "crossentropy", binary_labels);
  CHECK(binary.at("loss") == Approx(evaluate_with(sigmoid, "binary_crossentropy", binary_labels).at("loss")));
  const Tensor p = sigmoid.predict(x, {.verbose = 0});
  const std::vector<double> probabilities = values(p), truth = values(binary_labels);
  double right = 0;
  for (std::size_t i = 0; i < truth.size(); ++i) right += (probabilities[i] > 0.5) == (truth[i] == 1.0);
  const double accuracy = right / double(truth.size());
  CHECK(binary.at("accuracy") == Approx(accuracy).epsilon(1e-12));
}

TEST_CASE("fit refuses a non-finite step before applying it and names the batch", "[model]") {
  // 20 samples in batches of 8: the third batch holds the bad sample. Every weight, the moving statistics of
  // BatchNormalization included, must stay what it was after the second batch.
  auto [x, y] = linear_data(20, 11);
  auto snapshot = [](const Model& model) {
    std::vector<std::vector<double>> out;
    for (const Variable& w : model.weights()) out.push_back(values(w.value()));
    return out;
  };
  const auto run = [&](const Tensor& xs, const Tensor& ys, const std::vector<std::string>& expected) {
    auto model = L::Sequential({L::Input({3}, {.dtype = DType::f64}), L::Dense(4), L::BatchNormalization(),
                                L::Dense(1)});
    model.compile({.optimizer = optim::Adam({.learning_rate = 0.01}), .loss = "mse"});
    std::vector<std::vector<double>> after_second;
    auto keep = std::make_shared<L::LambdaCallback>(L::LambdaCallbackOptions{
        .on_train_batch_end = [&](int batch, const L::Logs&) {
          if (batch == 1) after_second = snapshot(model);
        }});
    try {
      model.fit(xs, ys, {.batch_size = 8, .verbose = 0, .callbacks = {keep}, .shuffle = false});
      FAIL("fit returned after a non-finite step");
    } catch (const Error& e) {
      for (const auto& text : expected) CHECK_THAT(e.what(), Catch::Contains(text));
    }
    CHECK(snapshot(model) == after_second);
    // The model is still usable: the batches without the bad sample train on.
    model.fit(ops::slice(xs, 0, 0, 16), ops::slice(ys, 0, 0, 16), {.batch_size = 8, .verbose = 0});
    for (const auto& w : snapshot(model))
      for (double v : w) CHECK(std::isfinite(v));
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  SECTION("a NaN label: the loss is NaN") {
    Tensor bad_y = ops::clone(y);
    bad_y.data<double>()[19] = nan;
    run(x, bad_y, {"fit, batch 3 of epoch 1", "the loss became NaN", "the step was not applied"});
  }
  SECTION("an infinite input: the moving statistics it reached are put back") {
    Tensor bad_x = ops::clone(x);
    bad_x.data<double>()[3 * 18 + 1] = std::numeric_limits<double>::infinity();
    run(bad_x, y, {"fit, batch 3 of epoch 1", "the step was not applied"});
  }
  SECTION("an infinite input behind a relu: the loss is finite, a gradient is not") {
    auto model = L::Sequential({L::Input({3}, {.dtype = DType::f64}),
                                L::Dense(1, {.activation = "relu", .kernel_initializer = "ones"})});
    model.compile({.optimizer = "sgd", .loss = "mse"});
    const auto before = snapshot(model);
    Tensor bad_x = ops::clone(x);
    bad_x.data<double>()[4] = -std::numeric_limits<double>::infinity();  // relu(-inf) = 0: a finite loss
    CHECK_THROWS_WITH(model.fit(bad_x, y, {.batch_size = 20, .verbose = 0}),
                      Catch::Contains("fit, batch 1 of epoch 1") && Catch::Contains("the gradient of 'sequential") &&
                          Catch::Contains("holds NaN") && Catch::Contains("the step was not applied"));
    CHECK(snapshot(model) == before);
  }
  SECTION("train_on_batch names itself") {
    auto model = L::Sequential({L::Input({3}, {.dtype = DType::f64}), L::Dense(1)});
    model.compile({.optimizer = "sgd", .loss = "mse"});
    const auto before = snapshot(model);
    Tensor bad_y = ops::clone(y);
    bad_y.data<double>()[0] = nan;
    CHECK_THROWS_WITH(model.train_on_batch(x, bad_y),
                      Catch::Contains("train_on_batch") && Catch::Contains("the loss became NaN"));
    CHECK(snapshot(model) == before);
  }
}

TEST_CASE("a batch_size past the sample count runs one batch, as Keras, and a huge shuffle is refused", "[model]") {
  auto [x, y] = linear_data(10, 12);
  auto model = L::Sequential({L::Input({3}, {.dtype = DType::f64}), L::Dense(1)});
  model.compile({.optimizer = "sgd", .loss = "mse"});
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  const L::Logs whole = model.evaluate(x, y, {.batch_size = 10, .verbose = 0});
  CHECK(model.evaluate(x, y, {.batch_size = max, .verbose = 0}).at("loss") == whole.at("loss"));
  CHECK(values(model.predict(x, {.batch_size = max, .verbose = 0})) ==
        values(model.predict(x, {.batch_size = 10, .verbose = 0})));
  const History h = model.fit(x, y, {.batch_size = max, .epochs = 2, .verbose = 0});
  CHECK(h.params.steps == 1);
  CHECK(h.history.at("loss").size() == 2);
  CHECK(h.history.at("loss")[1] < h.history.at("loss")[0]);
  // 2^40 samples of a broadcast view: the data costs nothing, the shuffled order would take 8 TiB.
  const std::int64_t n = std::int64_t(1) << 40;
  const Tensor many_x = ops::broadcast_to(ops::slice(x, 0, 0, 1), {n, 3});
  const Tensor many_y = ops::broadcast_to(ops::slice(y, 0, 0, 1), {n, 1});
  CHECK_THROWS_WITH(model.fit(many_x, many_y, {.verbose = 0}),
                    Catch::Contains("shuffled order of 1099511627776 samples") && Catch::Contains("memory"));
}

namespace {
// Two sub-models that share their first layer, summed: Keras's weight sharing across models.
class TwoBranches : public L::Model {
 public:
  explicit TwoBranches(const std::shared_ptr<L::Dense>& shared)
      : Model("two_branches"),
        left_(add_layer(L::Sequential({shared, L::Dense(1)}))),
        right_(add_layer(L::Sequential({shared, L::Dense(1)}))) {}

 protected:
  Tensor call(const Tensor& x, bool training) override { return left_(x, training) + right_(x, training); }

 private:
  L::Sequential& left_;
  L::Sequential& right_;
};
}  // namespace

TEST_CASE("a layer shared by two sub-models is one set of weights, stepped once per batch", "[model]") {
  auto [x, y] = linear_data(16, 13);
  auto shared = std::make_shared<L::Dense>(4);
  TwoBranches model(shared);
  model(x);
  const std::vector<Variable> weights = model.trainable_weights();
  CHECK(weights.size() == 6);  // the shared kernel and bias once, and each branch's Dense(1)
  CHECK(model.count_params() == 3 * 4 + 4 + 2 * (4 + 1));

  // One SGD step moves the shared kernel by lr times its whole gradient (both branches), once.
  model.compile({.optimizer = optim::SGD({.learning_rate = 0.1}), .loss = "mse"});
  std::vector<Tensor> grads;
  {
    GradientTape tape;
    const Tensor loss = ops::mean(losses::mean_squared_error(y, model(x, true)));
    grads = tape.gradient(loss, weights);
  }
  const std::vector<double> kernel = values(shared->kernel().value()), grad = values(grads[0]);
  REQUIRE(weights[0].id() == shared->kernel().id());
  model.train_on_batch(x, y);
  std::vector<double> want;
  for (std::size_t i = 0; i < kernel.size(); ++i) want.push_back(kernel[i] - 0.1 * grad[i]);
  check_close(values(shared->kernel().value()), want, 1e-12);

  // The weights file names the shared layer once and round-trips with the optimizer state.
  TempDir dir("shared-layers");
  model.save_weights(dir.file("w.safetensors"), {.include_optimizer = true});
  auto shared_again = std::make_shared<L::Dense>(4);
  TwoBranches again(shared_again);
  again(x);
  again.compile({.optimizer = optim::SGD({.learning_rate = 0.1}), .loss = "mse"});
  again.load_weights(dir.file("w.safetensors"), {.include_optimizer = true});
  CHECK(values(again.predict(x, {.verbose = 0})) == values(model.predict(x, {.verbose = 0})));
}

TEST_CASE("one optimizer compiled into two models is refused, as Keras refuses it", "[model]") {
  auto [x, y] = linear_data(16, 14);
  auto optimizer = std::make_shared<optim::Adam>(optim::AdamOptions{.learning_rate = 0.01});
  auto first = L::Sequential({L::Input({3}, {.dtype = DType::f64}), L::Dense(1)});
  first.compile({.optimizer = optimizer, .loss = "mse"});
  first.fit(x, y, {.verbose = 0});
  first.compile({.optimizer = optimizer, .loss = "mae"});  // the same model again: fine
  first.fit(x, y, {.verbose = 0});

  auto second = L::Sequential({L::Input({3}, {.dtype = DType::f64}), L::Dense(1)});
  CHECK_THROWS_WITH(second.compile({.optimizer = optimizer, .loss = "mse"}),
                    Catch::Contains("compile") && Catch::Contains("give each model its own optimizer"));
  // A model built only by its first batch is refused at that batch, before any weight changes.
  auto third = L::Sequential({L::Dense(1)});
  third.compile({.optimizer = optimizer, .loss = "mse"});
  CHECK_THROWS_WITH(third.fit(x, y, {.verbose = 0}), Catch::Contains("give each model its own optimizer"));
  CHECK(optimizer->iterations() == 2);
}

TEST_CASE("summary never overflows, allocates without bound or throws on a narrow terminal", "[summary]") {
  auto model = L::Sequential({L::Input({4}), L::Dense(2)});
  std::ostringstream out;
  CHECK_THROWS_WITH(model.summary({.line_length = std::numeric_limits<int>::max(), .out = &out}),
                    Catch::Contains("line_length 2147483647 is more than 10000"));
  CHECK_THROWS_WITH(model.summary({.line_length = -5, .out = &out}), Catch::Contains("line_length -5"));
  CHECK_THROWS_WITH(model.summary({.out = nullptr}), Catch::Contains("summary") && Catch::Contains("null"));
  for (const char* columns : {"1", "11", "-3", "0"}) {
    ScopedEnvironment narrow("COLUMNS", columns);
    INFO("COLUMNS=" << columns);
    CHECK(L::default_summary_line_length() >= 40);
    CHECK_NOTHROW(model.summary({.out = &out}));
  }
  CHECK_NOTHROW(model.summary({.line_length = 10'000, .out = &out}));
}
