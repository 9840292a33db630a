// The C++ examples of README.md, verbatim inside test cases, so that they keep compiling and working.
// Keep them in sync with the README's sections named in each test.
#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "examples/keras_interop/position_embedding.hpp"
#include "loom.hpp"
#include "tests/temp_files.hpp"

using namespace loom;

TEST_CASE("README section Keras in C++ compiles and trains", "[docs]") {
  namespace L = loom::layers;
  random::set_seed(3);
  // Three well separated classes in 2-D, labels 0, 1, 2.
  const Tensor centers = Tensor::from_vector(std::vector<float>{-2, 0, 2, 0, 0, 2}, Shape{3, 2});
  std::vector<std::int64_t> labels;
  for (int i = 0; i < 300; ++i) labels.push_back(i % 3);
  const Tensor y = Tensor::from_vector(labels, Shape{300});
  const Tensor x = ops::take(centers, y, 0) + Tensor::randn({300, 2}, DType::f32, 4) * 0.3;
  const Tensor x_test = x, y_test = y;
  std::ostringstream printed;  // the summary and the progress bar, kept off the test log
  struct Redirect {
    std::streambuf* console;
    ~Redirect() { std::cout.rdbuf(console); }
  } redirect{std::cout.rdbuf(printed.rdbuf())};
  const loom::testing::TempWorkingDirectory cwd("readme");  // where the example saves its weights

  // ---- README ----
  auto model = L::Sequential({
      L::Input({2}),
      L::Dense(64, {.activation = "relu"}),
      L::Dense(64, {.activation = "relu"}),
      L::Dense(3, {.activation = "softmax"}),
  });
  model.compile({
      .optimizer = optim::Adam(
          {.learning_rate = 1e-2}),
      .loss = "sparse_categorical_crossentropy",
      .metrics = {"accuracy"}});
  model.summary();
  History history = model.fit(x, y, {.batch_size = 32,
                                     .epochs = 30,
                                     .validation_split = 0.2});
  model.evaluate(x_test, y_test);
  model.save_weights("mlp.weights.h5");
  // ---- end ----
  CHECK(std::filesystem::exists("mlp.weights.h5"));
  CHECK(history.history.at("val_accuracy").back() > 0.95);
  CHECK(printed.str().find("Epoch 30/30") != std::string::npos);
}

TEST_CASE("README section Autograd you can check compiles and verifies the gradient", "[docs]") {
  // ---- README ----
  Tensor x = Tensor::randn({4, 3}, DType::f64, /*seed=*/1);
  Variable w(Tensor::randn({3, 2}, DType::f64, 2), "w");

  GradientTape tape;  // trainable Variables are watched automatically
  Tensor loss = ops::sum(ops::tanh(ops::matmul(x, w)));
  std::vector<Tensor> g = tape.gradient(loss, std::vector<Variable>{w});

  auto check = gradcheck([&](const std::vector<Tensor>& in) { return ops::tanh(ops::matmul(in[0], in[1])); },
                         {x, w.value()});  // float64 central differences vs the tape
  // ---- end ----
  CHECK(g[0].shape() == Shape{3, 2});
  CHECK(check.ok);
}

TEST_CASE("README section Bring your Keras model loads, fine-tunes and saves a Keras archive", "[docs][saving]") {
  using loom_example::position_embedding_class;
  const loom::testing::TempWorkingDirectory cwd("readme-keras");
  // The archive Keras wrote for tests/models/test_keras_archive.cpp: token ids [batch, 8] below 30, 3 classes.
  std::filesystem::copy_file(std::string(LOOM_FIXTURES_DIR) + "/keras_archives/text_classifier.keras",
                             "text_classifier.keras");
  std::vector<std::int64_t> ids, labels;
  for (std::int64_t i = 0; i < 16 * 8; ++i) ids.push_back(1 + (i * 7) % 29);
  for (std::int64_t i = 0; i < 16; ++i) labels.push_back(i % 3);
  const Tensor x_train = Tensor::from_vector(ids, Shape{16, 8}), y_train = Tensor::from_vector(labels, Shape{16});
  const Tensor &x_test = x_train, &y_test = y_train;
  std::ostringstream printed;
  struct Redirect {
    std::streambuf* console;
    ~Redirect() { std::cout.rdbuf(console); }
  } redirect{std::cout.rdbuf(printed.rdbuf())};

  // ---- README ----
  models::register_layer_class("loom_example>PositionEmbedding", position_embedding_class());  // a custom layer
  auto model = models::load_model("text_classifier.keras");   // built, weights loaded, compiled as saved
  model->evaluate(x_test, y_test);
  model->fit(x_train, y_train, {.epochs = 4});                // Keras's Adam goes on from its saved state
  model->save("loom_finetuned.keras");                        // keras.saving.load_model opens it
  // ---- end ----
  models::unregister_layer_class("loom_example>PositionEmbedding");
  CHECK(printed.str().find("Epoch 4/4") != std::string::npos);
  CHECK(std::filesystem::exists("loom_finetuned.keras"));
}
