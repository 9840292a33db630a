// Keras 3's .weights.h5 files (models/saving/keras_weights_h5): files written by Keras itself
// (tests/fixtures/make_keras_weights_fixtures.py) load into the same architecture built in loom, predict
// Keras's values, and with their optimizer state take the same next training step; files loom writes load
// back identically; malformed files are loom::Errors that leave the model untouched.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "loom.hpp"
#include "models/saving/keras_weights_h5.hpp"
#include "tests/fixture_reader.hpp"
#include "tests/temp_files.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

namespace {

const FixtureCase& fixture(const std::string& name) {
  static const auto cases = read_fixture_cases("keras_weights_fixtures.txt");
  for (const auto& c : cases)
    if (c.name == name) return c;
  FAIL("no fixture case " << name);
  return cases.front();
}

std::string fixture_file(const FixtureCase& f) { return std::string(LOOM_FIXTURES_DIR) + "/" + f.words.at(0); }

/// The subclassed case: Keras keys its layers "hidden", "norm", "out"; loom by class, so it loads by order.
class Subclassed : public L::Model {
 public:
  Subclassed() : Model("subclassed") { (*this)(Tensor::zeros({1, 3})); }

 protected:
  Tensor call(const Tensor& x, bool training) override { return out_(norm_(hidden_(x, training), training), training); }

 private:
  L::Dense& hidden_ = add_layer(L::Dense(6, {.activation = "tanh"}));
  L::LayerNormalization& norm_ = add_layer(L::LayerNormalization());
  L::Dense& out_ = add_layer(L::Dense(2));
};

/// The architecture of each fixture case, built and compiled in loom as the script does in Keras.
std::shared_ptr<Model> build(const std::string& name) {
  L::reset_layer_names();
  std::shared_ptr<Model> model;
  if (name == "mlp") {
    model = std::make_shared<L::Sequential>(std::vector<L::LayerArg>{
        L::Input({4}), L::Dense(8, {.activation = "relu"}), L::Dense(3, {.activation = "softmax"})});
    model->compile({.optimizer = optim::Adam({.learning_rate = 0.01, .beta_1 = 0.8, .amsgrad = true}),
                    .loss = "sparse_categorical_crossentropy"});
  } else if (name == "text_classifier") {
    Tensor tokens = L::Input({8}, {.dtype = DType::i64, .name = "tokens"});
    Tensor h = L::Embedding(30, 8, {.mask_zero = true})(tokens);
    Tensor att = L::MultiHeadAttention({.num_heads = 2, .key_dim = 4})(h, h);
    h = L::LayerNormalization()(h + att);
    Tensor probs = L::Dense(3, {.activation = "softmax"})(L::GlobalAveragePooling1D()(h));
    model = std::make_shared<Model>(tokens, probs, L::ModelOptions{.name = "text_classifier"});
    model->compile({.optimizer = optim::Adam({.learning_rate = 0.01}), .loss = "sparse_categorical_crossentropy"});
  } else if (name == "batch_norm") {
    model = std::make_shared<L::Sequential>(std::vector<L::LayerArg>{
        L::Input({5}), L::Dense(6), L::BatchNormalization({.momentum = 0.9}), L::Activation("relu"), L::Dense(1)});
    model->compile({.optimizer = optim::SGD({.learning_rate = 0.05, .momentum = 0.9}), .loss = "mse"});
  } else if (name == "group_query_attention") {
    Tensor sequence = L::Input({6, 8}, {.name = "sequence"});
    Tensor h = L::GroupQueryAttention({.head_dim = 4, .num_query_heads = 4, .num_key_value_heads = 2})(sequence,
                                                                                                        sequence);
    Tensor out = L::Dense(2)(L::GlobalAveragePooling1D()(h));
    model = std::make_shared<Model>(sequence, out, L::ModelOptions{.name = "group_query_attention"});
    model->compile({.optimizer = optim::AdamW({.learning_rate = 0.01}), .loss = "mse"});
  } else {
    REQUIRE(name == "subclassed");
    model = std::make_shared<Subclassed>();
    model->compile({.optimizer = optim::RMSprop({.learning_rate = 0.01, .momentum = 0.5, .centered = true}),
                    .loss = "mse"});
  }
  return model;
}

Tensor labels_or_targets(const FixtureCase& f) {
  const bool labels = f.name == "mlp" || f.name == "text_classifier";
  return f.array("y").tensor(labels ? DType::i64 : DType::f32);
}

Tensor inputs(const FixtureCase& f) {
  return f.array("x").tensor(f.name == "text_classifier" ? DType::i64 : DType::f32);
}

std::vector<std::vector<double>> weight_values(const Model& model) {
  std::vector<std::vector<double>> out;
  for (const auto& w : model.weights()) out.push_back(values(w.value()));
  return out;
}

const std::vector<std::string> kCases = {"mlp", "text_classifier", "batch_norm", "group_query_attention",
                                         "subclassed"};

}  // namespace

TEST_CASE("a .weights.h5 file written by Keras loads and predicts Keras's values", "[models][keras_weights]") {
  for (const auto& name : kCases) {
    INFO("case " << name);
    const auto& f = fixture(name);
    auto model = build(name);
    model->load_weights(fixture_file(f));
    check_close(values(model->predict(inputs(f))), f.array("output").values, 1e-5, 1e-5);
  }
}

TEST_CASE("with its optimizer state, a Keras file trains the same next step as Keras", "[models][keras_weights]") {
  for (const auto& name : kCases) {
    INFO("case " << name);
    const auto& f = fixture(name);
    auto model = build(name);
    model->load_weights(fixture_file(f), {.include_optimizer = true});
    CHECK(model->optimizer()->iterations() == 1);
    model->train_on_batch(inputs(f), labels_or_targets(f));
    const auto weights = model->weights();
    REQUIRE(weights.size() == f.array_names.size() - 3);  // x, y, output, then the weights
    for (std::size_t i = 0; i < weights.size(); ++i) {
      INFO("weight " << i << " " << weights[i].name());
      const auto& want = f.array("stepped_" + std::to_string(i));
      CHECK(weights[i].shape() == want.shape);
      // Softmax ignores a bias added to every key: the key projection's bias has a zero gradient, and what
      // both compute for it is rounding noise, which Adam's normalized step scales up to the learning rate.
      const bool key_bias = weights[i].name().ends_with("/key/bias");
      check_close(values(weights[i].value()), want.values, 1e-5, key_bias ? 2e-3 : 1e-6);
    }
  }
}

TEST_CASE("a .weights.h5 file loom writes loads back identically, optimizer state included",
          "[models][keras_weights]") {
  TempDir dir("keras-weights");
  for (const auto& name : kCases) {
    INFO("case " << name);
    const auto& f = fixture(name);
    auto trained = build(name);
    trained->load_weights(fixture_file(f), {.include_optimizer = true});
    trained->train_on_batch(inputs(f), labels_or_targets(f));
    const std::string path = dir.file(name + ".weights.h5");
    trained->save_weights(path, {.include_optimizer = true});
    std::ifstream written(path, std::ios::binary);
    std::string signature(8, '\0');
    written.read(signature.data(), 8);
    CHECK(signature == "\x89HDF\r\n\x1a\n");

    auto restored = build(name);
    restored->load_weights(path, {.include_optimizer = true});
    CHECK(weight_values(*restored) == weight_values(*trained));
    CHECK(restored->optimizer()->iterations() == 2);
    // The same state: both take the same next step.
    trained->train_on_batch(inputs(f), labels_or_targets(f));
    restored->train_on_batch(inputs(f), labels_or_targets(f));
    CHECK(weight_values(*restored) == weight_values(*trained));
  }
}

TEST_CASE("loading a .weights.h5 file that does not fit is a loom::Error and changes nothing",
          "[models][keras_weights][errors]") {
  TempDir dir("keras-weights-errors");
  const auto& f = fixture("mlp");

  // Another architecture: every mismatch listed, no weight changed.
  L::reset_layer_names();
  auto wider = L::Sequential({L::Input({4}), L::Dense(9, {.activation = "relu"}), L::Dense(3)});
  const auto before = weight_values(wider);
  CHECK_THROWS_WITH(wider.load_weights(fixture_file(f)),
                    Catch::Contains("does not match the model (3 problems)") &&
                        Catch::Contains("'layers/dense/vars/0' has shape [4, 8] in the file; the model's variable "
                                        "has shape [4, 9]") &&
                        Catch::Contains("'layers/dense_1/vars/0' has shape [8, 3]"));
  CHECK(weight_values(wider) == before);

  // A layer more or less.
  auto deeper = L::Sequential({L::Input({4}), L::Dense(8), L::Dense(3), L::Dense(3)});
  CHECK_THROWS_WITH(deeper.load_weights(fixture_file(f)),
                    Catch::Contains("'layers/dense_2' (layer 'dense_4') holds 0 variable(s) in the file; the layer "
                                    "has 2"));

  // The optimizer: required but missing, or of another kind.
  auto plain = build("mlp");
  const std::string no_optimizer = dir.file("plain.weights.h5");
  plain->save_weights(no_optimizer);
  CHECK_THROWS_WITH(plain->load_weights(no_optimizer, {.include_optimizer = true}),
                    Catch::Contains("the file holds 0 optimizer variable(s)"));
  auto sgd = build("mlp");
  sgd->compile({.optimizer = optim::SGD(), .loss = "sparse_categorical_crossentropy"});
  CHECK_THROWS_WITH(sgd->load_weights(fixture_file(f), {.include_optimizer = true}),
                    Catch::Contains("the file holds 14 optimizer variable(s)"));
  CHECK(sgd->optimizer()->iterations() == 0);

  // Not HDF5, truncated HDF5, a missing file.
  const std::string garbage = dir.file("garbage.weights.h5");
  std::ofstream(garbage) << "not an HDF5 file";
  CHECK_THROWS_WITH(plain->load_weights(garbage), Catch::Contains("not a readable HDF5 file"));
  std::string bytes;
  {
    std::ifstream in(fixture_file(f), std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const auto plain_before = weight_values(*plain);
  for (std::size_t keep : {std::size_t(100), bytes.size() / 2, bytes.size() - 1}) {
    INFO("truncated to " << keep << " bytes");
    CHECK_THROWS_AS(models::load_keras_weights_image(*plain, std::string_view(bytes).substr(0, keep), "truncated",
                                                     models::OptimizerVariables::ignore),
                    Error);
    CHECK(weight_values(*plain) == plain_before);
  }
  CHECK_THROWS_WITH(plain->load_weights(dir.file("missing.weights.h5")), Catch::Contains("cannot open the file"));
}

TEST_CASE("saving a .weights.h5 file is atomic and checks first", "[models][keras_weights][errors]") {
  TempDir dir("keras-weights-save");
  auto model = build("mlp");
  CHECK_THROWS_WITH(model->save_weights(dir.file("no/such/folder/m.weights.h5")),
                    Catch::Contains("cannot create the temporary file"));
  L::reset_layer_names();
  auto unbuilt = L::Sequential({L::Dense(2)});
  CHECK_THROWS_WITH(unbuilt.save_weights(dir.file("u.weights.h5")), Catch::Contains("the model is not built"));
  auto uncompiled = L::Sequential({L::Input({2}), L::Dense(2)});
  CHECK_THROWS_WITH(uncompiled.save_weights(dir.file("u.weights.h5"), {.include_optimizer = true}),
                    Catch::Contains("include_optimizer needs a compiled model"));
  CHECK(std::filesystem::is_empty(dir.path));
}
