// Whole models in .keras archives (models/saving/): archives written by Keras 3 itself
// (tests/fixtures/make_keras_archive_fixtures.py) load in loom and predict Keras's values, train one step as
// Keras's fit does, save from loom and load back identically; hostile archives are loom::Errors.
#include <catch2/catch.hpp>

#include <zip.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "examples/keras_interop/position_embedding.hpp"
#include "loom.hpp"
#include "tests/fixture_reader.hpp"
#include "tests/temp_files.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

/// Registers the custom class for one test.
struct RegisteredPositionEmbedding {
  RegisteredPositionEmbedding() {
    models::register_layer_class(loom_example::position_embedding_name, loom_example::position_embedding_class());
  }
  ~RegisteredPositionEmbedding() { models::unregister_layer_class(loom_example::position_embedding_name); }
};

DType dtype_of(const std::string& keras) { return keras.rfind("int", 0) == 0 ? DType::i64 : DType::f32; }

std::string fixture_path(const std::string& relative) { return std::string(LOOM_FIXTURES_DIR) + "/" + relative; }

/// The members of a zip file, by name.
std::map<std::string, std::string> read_zip(const std::string& path) {
  int code = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_RDONLY, &code);
  REQUIRE(z != nullptr);
  std::map<std::string, std::string> members;
  for (zip_int64_t i = 0; i < zip_get_num_entries(z, 0); ++i) {
    zip_stat_t st;
    REQUIRE(zip_stat_index(z, zip_uint64_t(i), 0, &st) == 0);
    std::string data(st.size, '\0');
    zip_file_t* f = zip_fopen_index(z, zip_uint64_t(i), 0);
    REQUIRE(f != nullptr);
    REQUIRE(zip_fread(f, data.data(), st.size) == zip_int64_t(st.size));
    zip_fclose(f);
    members[st.name] = data;
  }
  zip_discard(z);
  return members;
}

/// Writes a zip with these members (stored, or deflated when `compress`).
void write_zip(const std::string& path, const std::map<std::string, std::string>& members, bool compress = false) {
  fs::remove(path);
  int code = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_CREATE | ZIP_EXCL, &code);
  REQUIRE(z != nullptr);
  for (const auto& [name, data] : members) {
    zip_source_t* s = zip_source_buffer(z, data.data(), data.size(), 0);
    REQUIRE(s != nullptr);
    const zip_int64_t index = zip_file_add(z, name.c_str(), s, 0);
    REQUIRE(index >= 0);
    REQUIRE(zip_set_file_compression(z, zip_uint64_t(index), compress ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0) == 0);
  }
  REQUIRE(zip_close(z) == 0);
}

/// The fixture archive with its config.json changed by `edit`.
std::string edited_archive(const TempDir& dir, const std::string& name, const std::function<void(json&)>& edit) {
  auto members = read_zip(fixture_path("keras_archives/mlp.keras"));
  json config = json::parse(members.at("config.json"));
  edit(config);
  members["config.json"] = config.dump();
  const std::string path = dir.file(name);
  write_zip(path, members);
  return path;
}

std::string load_error(const std::string& path) {
  try {
    models::load_model(path);
  } catch (const Error& e) {
    return e.what();
  }
  FAIL("load_model accepted " << path);
  return {};
}

void check_tensor_close(const Tensor& got, const FixtureArray& want, double tol) {
  REQUIRE(got.shape() == want.shape);
  check_close(values(got), want.values, tol, tol);
}

}  // namespace

TEST_CASE("load_model rebuilds Keras's archives: layers, configs and compile settings", "[models][saving]") {
  RegisteredPositionEmbedding registered;
  auto mlp = models::load_model(fixture_path("keras_archives/mlp.keras"));
  auto* sequential = dynamic_cast<L::Sequential*>(mlp.get());
  REQUIRE(sequential != nullptr);
  CHECK(mlp->name() == "mlp");
  REQUIRE(mlp->layers().size() == 2);
  const auto* dense = dynamic_cast<const L::Dense*>(mlp->layers()[0].get());
  REQUIRE(dense != nullptr);
  CHECK(dense->name() == "dense");
  CHECK(dense->units() == 8);
  CHECK(dense->options().activation == "relu");
  CHECK(dense->options().kernel_initializer.name() == "glorot_uniform");
  CHECK(mlp->weights().size() == 4);
  CHECK(mlp->weights()[0].shape() == Shape{4, 8});
  REQUIRE(mlp->compiled());
  const auto* adam = dynamic_cast<const optim::Adam*>(mlp->optimizer());
  REQUIRE(adam != nullptr);
  CHECK(adam->beta_1() == Approx(0.8));
  CHECK(adam->learning_rate() == Approx(0.01));
  const auto& loss = mlp->compile_options().loss.single();
  REQUIRE(loss.has_value());
  CHECK(std::get<std::string>(*loss) == "sparse_categorical_crossentropy");
  REQUIRE(mlp->compile_options().metrics.single().size() == 1);
  CHECK(mlp->compile_options().metrics.single()[0].name() == "accuracy");

  auto text = models::load_model(fixture_path("keras_archives/text_classifier.keras"));
  REQUIRE(text->is_functional());
  std::vector<std::string> names;
  for (const auto& layer : text->layers()) names.push_back(layer->name());
  CHECK(names == std::vector<std::string>{"tokens", "embedding", "position_embedding", "multi_head_attention",
                                          "layer_normalization", "dropout_1", "global_average_pooling1d",
                                          "dense_2"});
  CHECK(dynamic_cast<const L::Embedding&>(*text->get_layer("embedding")).options().mask_zero);
  CHECK(dynamic_cast<const loom_example::PositionEmbedding*>(text->get_layer("position_embedding").get()) != nullptr);
  CHECK(text->summary_string().find("add (Add)") != std::string::npos);

  auto unregistered = [] { models::unregister_layer_class(loom_example::position_embedding_name); };
  unregistered();
  try {
    models::load_model(fixture_path("keras_archives/text_classifier.keras"));
    FAIL("loaded a custom layer without its class");
  } catch (const Error& e) {
    const std::string message = e.what();
    CHECK_THAT(message, Catch::Contains("PositionEmbedding"));
    CHECK_THAT(message, Catch::Contains("Dense"));  // the list of what loom supports
  }
  // Passed for one load, as Keras's custom_objects.
  auto with_objects = models::load_model(fixture_path("keras_archives/text_classifier.keras"),
                                         {.custom_objects = {{loom_example::position_embedding_name,
                                                              loom_example::position_embedding_class()}}});
  CHECK(with_objects->layers().size() == 8);
  models::register_layer_class(loom_example::position_embedding_name, loom_example::position_embedding_class());
}

TEST_CASE("Model::save writes what load_model reads back identically", "[models][saving]") {
  RegisteredPositionEmbedding registered;
  const TempDir dir("keras-archive");
  std::size_t count = 0;
  for (const auto& c : read_fixture_cases("keras_archive_fixtures.txt")) {
    const std::string& name = c.name;
    ++count;
    INFO("case " << name);
    auto original = models::load_model(fixture_path(c.words[0]));
    const std::string first = dir.file(name + "_1.keras"), second = dir.file(name + "_2.keras");
    original->save(first);
    auto restored = models::load_model(first);
    restored->save(second);
    const auto a = read_zip(first), b = read_zip(second);
    CHECK(a.count("metadata.json") == 1);
    CHECK(a.at("config.json") == b.at("config.json"));
    CHECK(restored->summary_string() == original->summary_string());
    CHECK(restored->compiled() == original->compiled());
    // Keras's own entries: the Functional graph as Keras writes it.
    const json config = json::parse(a.at("config.json"));
    CHECK(config["class_name"] == (original->is_functional() ? "Functional" : "Sequential"));
    CHECK(config.contains("compile_config"));
    if (original->is_functional()) {
      const json& layers = config["config"]["layers"];
      REQUIRE(layers.size() >= 2);
      CHECK(layers[1]["inbound_nodes"][0]["args"][0]["class_name"] == "__keras_tensor__");
    }
  }
  // Nothing is left besides the archives (the temporary files are renamed or removed).
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir.path)) files += entry.path().extension() == ".keras";
  CHECK(count == 6);
  CHECK(files == 2 * count);
  CHECK(std::size_t(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator())) == 2 * count);
}

TEST_CASE("Model::save checks its path before any work", "[models][saving]") {
  auto model = L::Sequential({L::Input({3}), L::Dense(2)});
  const TempDir dir("keras-archive");
  CHECK_THROWS_WITH(model.save(dir.file("m.h5")), Catch::Contains(".keras"));
  CHECK_THROWS_WITH(model.save(dir.file("missing/m.keras")), Catch::Contains("does not exist"));
  L::Sequential unbuilt({L::Dense(2)});
  CHECK_THROWS_WITH(unbuilt.save(dir.file("m.keras")), Catch::Contains("not built"));
  model.compile({.optimizer = "adam",
                 .loss = [](const Tensor& t, const Tensor& p) { return losses::mean_squared_error(t, p); }});
  CHECK_THROWS_WITH(model.save(dir.file("m.keras")), Catch::Contains("loss"));
  CHECK_FALSE(fs::exists(dir.file("m.keras")));
}

TEST_CASE("load_model refuses hostile and corrupt archives with loom::Errors", "[models][saving]") {
  const TempDir dir("keras-archive");
  CHECK_THAT(load_error(dir.file("absent.keras")), Catch::Contains("no such file"));
  {
    std::ofstream(dir.file("text.keras")) << "not a zip at all";
    CHECK_THAT(load_error(dir.file("text.keras")), Catch::Contains("not a readable .keras archive"));
  }
  {
    auto members = read_zip(fixture_path("keras_archives/mlp.keras"));
    members.erase("config.json");
    write_zip(dir.file("no_config.keras"), members);
    CHECK_THAT(load_error(dir.file("no_config.keras")), Catch::Contains("no 'config.json'"));
  }
  {
    // A truncated copy.
    std::ifstream in(fixture_path("keras_archives/mlp.keras"), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(dir.file("truncated.keras"), std::ios::binary) << bytes.substr(0, bytes.size() / 2);
    load_error(dir.file("truncated.keras"));
  }
  {
    // Deeply nested JSON.
    write_zip(dir.file("deep.keras"), {{"config.json", std::string(100000, '[') + std::string(100000, ']')}});
    CHECK_THAT(load_error(dir.file("deep.keras")), Catch::Contains("deep"));
  }
  {
    // A decompression bomb: 80 MiB of spaces deflated to kilobytes, beyond the JSON limit.
    write_zip(dir.file("bomb.keras"), {{"config.json", std::string(std::size_t(80) << 20, ' ')}}, true);
    CHECK_THAT(load_error(dir.file("bomb.keras")), Catch::Contains("declares"));
  }
  CHECK_THAT(load_error(edited_archive(dir, "unknown.keras",
                                       [](json& c) { c["config"]["layers"][1]["class_name"] = "Conv7D"; })),
             Catch::Contains("Conv7D") && Catch::Contains("Dense") && Catch::Contains("MultiHeadAttention"));
  CHECK_THAT(load_error(edited_archive(dir, "wrong_type.keras",
                                       [](json& c) { c["config"]["layers"][1]["config"]["units"] = "eight"; })),
             Catch::Contains("units"));
  CHECK_THAT(load_error(edited_archive(dir, "regularizer.keras",
                                       [](json& c) {
                                         c["config"]["layers"][1]["config"]["kernel_regularizer"] = {
                                             {"module", "keras.regularizers"}, {"class_name", "L0"},
                                             {"config", {{"l0", 0.01}}}};
                                       })),
             Catch::Contains("kernel_regularizer") && Catch::Contains("no regularizer class 'L0'"));
  CHECK_THAT(load_error(edited_archive(dir, "policy.keras",
                                       [](json& c) {
                                         c["config"]["layers"][1]["config"]["dtype"]["config"]["name"] =
                                             "mixed_float16";
                                       })),
             Catch::Contains("mixed_float16"));
  CHECK_THAT(load_error(edited_archive(dir, "model_class.keras", [](json& c) { c["class_name"] = "MyModel"; })),
             Catch::Contains("MyModel"));
  CHECK_THAT(load_error(edited_archive(dir, "optimizer.keras",
                                       [](json& c) { c["compile_config"]["optimizer"]["class_name"] = "Ftrl"; })),
             Catch::Contains("Ftrl"));
  // With compile = false the compile settings are not read.
  auto uncompiled = models::load_model(edited_archive(dir, "optimizer2.keras", [](json& c) {
    c["compile_config"]["optimizer"]["class_name"] = "Ftrl";
  }), {.compile = false});
  CHECK_FALSE(uncompiled->compiled());
}

TEST_CASE("Keras's archives predict Keras's values and train one step as Keras's fit",
          "[models][saving]") {
  RegisteredPositionEmbedding registered;
  for (const auto& c : read_fixture_cases("keras_archive_fixtures.txt")) {
    INFO("case " << c.name);
    REQUIRE(c.words.size() == 1);
    auto model = models::load_model(fixture_path(c.words[0]));
    const Tensor x = c.array("x").tensor(dtype_of(c.option("x")));
    const Tensor y = c.array("y").tensor(dtype_of(c.option("y")));
    check_tensor_close(model->predict(x, {.verbose = 0}), c.array("output"), 1e-5);

    model->fit(x, y, {.batch_size = x.shape()[0], .epochs = 1, .verbose = 0, .shuffle = false});
    std::vector<std::string> stepped;
    for (const auto& name : c.array_names)
      if (name.rfind("stepped/", 0) == 0) stepped.push_back(name);
    const auto weights = model->weights();
    REQUIRE(weights.size() == stepped.size());
    for (std::size_t i = 0; i < weights.size(); ++i) {
      INFO("weight " << stepped[i] << " (loom: " << weights[i].name() << ")");
      // Softmax ignores a bias added to every key: the key projection's bias has a zero gradient, and what
      // both compute for it is rounding noise, which Adam's normalized step scales up to at most the
      // learning rate (0.01 in these fixtures).
      const bool key_bias = weights[i].name().ends_with("/key/bias");
      check_tensor_close(weights[i].value(), c.array(stepped[i]), key_bias ? 1e-2 : 1e-5);
    }
  }
}

TEST_CASE("a loom-written archive keeps weights and optimizer state: training continues identically",
          "[models][saving]") {
  RegisteredPositionEmbedding registered;
  const TempDir dir("keras-archive");
  for (const auto& c : read_fixture_cases("keras_archive_fixtures.txt")) {
    INFO("case " << c.name);
    auto original = models::load_model(fixture_path(c.words[0]));
    const Tensor x = c.array("x").tensor(dtype_of(c.option("x")));
    const Tensor y = c.array("y").tensor(dtype_of(c.option("y")));
    const L::FitOptions fit{.batch_size = x.shape()[0], .epochs = 1, .verbose = 0, .shuffle = false};
    original->fit(x, y, fit);
    const std::string path = dir.file(c.name + ".keras");
    original->save(path);
    auto restored = models::load_model(path);
    REQUIRE(restored->optimizer()->iterations() == original->optimizer()->iterations());
    original->fit(x, y, fit);
    restored->fit(x, y, fit);
    const auto a = original->weights(), b = restored->weights();
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      INFO("weight " << a[i].name());
      CHECK(values(a[i].value()) == values(b[i].value()));
    }
    // For tests/fixtures/check_loom_archives.py (run by hand): the fine-tuned archive and its predictions.
    if (const char* out = std::getenv("LOOM_KERAS_ARCHIVE_OUT")) {
      restored->save(fmt::format("{}/{}.keras", out, c.name));
      io::save_npy(fmt::format("{}/{}.npy", out, c.name), restored->predict(x, {.verbose = 0}));
    }
  }
}

TEST_CASE("compile settings, several outputs and float64 survive save and load_model", "[models][saving]") {
  const TempDir dir("keras-archive");
  Tensor a = L::Input({3}, {.dtype = DType::f64, .name = "a"});
  Tensor b = L::Input({2}, {.dtype = DType::f64, .name = "b"});
  Tensor h = ops::relu(L::Dense(4, {.kernel_initializer = L::initializers::he_normal(5), .name = "da"})(a) +
                       L::Dense(4, {.name = "db"})(b));
  Tensor reg = L::Dense(1, {.name = "reg"})(h);
  Tensor cls = L::Dense(3, {.activation = "softmax", .name = "cls"})(h * 2.0);
  Model model({a, b}, {reg, cls}, {.name = "two_heads"});
  model.compile({.optimizer = optim::SGD({.learning_rate = 0.1, .momentum = 0.5, .nesterov = true}),
                 .loss = {"mse", "sparse_categorical_crossentropy"},
                 .loss_weights = {0.5, 2.0},
                 .metrics = L::MetricsPerOutput{{"mae"}, {"accuracy"}}});
  model.save(dir.file("two_heads.keras"));
  auto restored = models::load_model(dir.file("two_heads.keras"));
  REQUIRE(restored->is_functional());
  CHECK(restored->dtype() == DType::f64);
  CHECK(restored->inputs()[0].dtype() == DType::f64);
  CHECK(restored->output_names() == std::vector<std::string>{"reg", "cls"});
  const auto& o = restored->compile_options();
  REQUIRE(o.loss.per_output().size() == 2);
  CHECK(std::get<std::string>(o.loss.per_output()[0]) == "mse");
  CHECK(std::get<std::string>(o.loss.per_output()[1]) == "sparse_categorical_crossentropy");
  CHECK(o.loss_weights.per_output() == std::vector<double>{0.5, 2.0});
  REQUIRE(o.metrics.per_output().size() == 2);
  CHECK(o.metrics.per_output()[0][0].name() == "mae");
  CHECK(o.metrics.per_output()[1][0].name() == "accuracy");
  const auto* sgd = dynamic_cast<const optim::SGD*>(restored->optimizer());
  REQUIRE(sgd != nullptr);
  CHECK(sgd->learning_rate() == Approx(0.1));
  const auto& da = dynamic_cast<const L::Dense&>(*restored->get_layer("da"));
  REQUIRE(da.options().kernel_initializer.arguments().has_value());
  CHECK(da.options().kernel_initializer.arguments()->seed == std::optional<std::uint64_t>(5));
  // The constant 2.0 of `h * 2.0` is part of the Multiply node.
  const auto config = json::parse(read_zip(dir.file("two_heads.keras")).at("config.json"));
  bool found = false;
  for (const auto& layer : config["config"]["layers"])
    if (layer["class_name"] == "Multiply") {
      found = true;
      CHECK(layer["module"] == "keras.src.ops.numpy");
      CHECK(layer["inbound_nodes"][0]["args"][1] == 2.0);
    }
  CHECK(found);
  CHECK(config["config"]["output_layers"] == json::parse(R"([["reg", 0, 0], ["cls", 0, 0]])"));
}

TEST_CASE("pooling\\, padding\\, upsampling and spatial dropout layers save and load with Keras's config keys",
          "[models][saving]") {
  const TempDir dir("keras-archive");
  L::reset_layer_names();
  L::Sequential images(
      {L::Input({8, 8, 2}),
       L::ZeroPadding2D({.padding = {1, 0, 2, 1}, .name = "pad"}),                                     // [9, 11, 2]
       L::MaxPooling2D({.pool_size = {2, 2}, .strides = {{1, 2}}, .padding = "same", .name = "max2d"}),  // [9, 6, 2]
       L::AveragePooling2D({.pool_size = {3}, .name = "avg2d"}),                                        // [3, 2, 2]
       L::UpSampling2D({.size = {2, 1}, .interpolation = "bilinear", .name = "up"}),                    // [6, 2, 2]
       L::SpatialDropout2D(0.3, {.seed = 4, .name = "drop2d"}),
       L::Dense(3, {.name = "mix"}),                                                                    // [6, 2, 3]
       L::GlobalMaxPooling2D({.keepdims = true, .name = "gmp2d"}),                                      // [1, 1, 3]
       L::Reshape({3, 1}),
       L::MaxPooling1D({.pool_size = {2}, .padding = "same", .name = "max1d"}),                          // [2, 1]
       L::AveragePooling1D({.pool_size = {1}, .data_format = "channels_first", .name = "avg1d"}),
       L::SpatialDropout1D(0.2, {.name = "drop1d"}),
       L::GlobalAveragePooling1D(),
       L::Dense(2)});
  L::Sequential maps({L::Input({3, 4, 4}), L::SpatialDropout2D(0.5, {.data_format = "channels_first"}),
                      L::GlobalAveragePooling2D({.data_format = "channels_first", .name = "gap2d"}), L::Dense(2)});
  const Tensor x = Tensor::randn({2, 8, 8, 2}, DType::f32, 1), xm = Tensor::randn({2, 3, 4, 4}, DType::f32, 2);
  const std::string path = dir.file("images.keras"), maps_path = dir.file("maps.keras");
  images.save(path);
  maps.save(maps_path);
  auto restored = models::load_model(path);
  check_close(values(restored->predict(x, {.verbose = 0})), values(images.predict(x, {.verbose = 0})), 0.0);
  check_close(values(models::load_model(maps_path)->predict(xm, {.verbose = 0})),
              values(maps.predict(xm, {.verbose = 0})), 0.0);
  restored->save(dir.file("again.keras"));
  const auto members = read_zip(path);
  CHECK(members.at("config.json") == read_zip(dir.file("again.keras")).at("config.json"));

  // Keras's keys and forms: tuples at full length, ZeroPadding2D's ((top, bottom), (left, right)).
  json config = json::parse(members.at("config.json"));
  std::map<std::string, json*> by_name;
  for (json& layer : config["config"]["layers"]) by_name[layer["config"]["name"].get<std::string>()] = &layer;
  const auto keys = [&](const std::string& name) { return (*by_name.at(name))["config"]; };
  CHECK((*by_name.at("pad"))["class_name"] == "ZeroPadding2D");
  CHECK(keys("pad")["padding"] == json::parse("[[1, 0], [2, 1]]"));
  CHECK(keys("pad")["data_format"] == "channels_last");
  CHECK((*by_name.at("max2d"))["class_name"] == "MaxPooling2D");
  CHECK(keys("max2d")["pool_size"] == json::parse("[2, 2]"));
  CHECK(keys("max2d")["strides"] == json::parse("[1, 2]"));
  CHECK(keys("max2d")["padding"] == "same");
  CHECK(keys("avg2d")["pool_size"] == json::parse("[3, 3]"));
  CHECK(keys("avg2d")["strides"] == json::parse("[3, 3]"));  // Keras writes the resolved strides
  CHECK(keys("up")["size"] == json::parse("[2, 1]"));
  CHECK(keys("up")["interpolation"] == "bilinear");
  CHECK(keys("drop2d")["rate"] == 0.3);
  CHECK(keys("drop2d")["seed"] == 4);
  CHECK(keys("drop2d")["data_format"] == "channels_last");
  CHECK_FALSE(keys("drop2d").contains("noise_shape"));
  CHECK(keys("gmp2d")["keepdims"] == true);
  CHECK(keys("max1d")["pool_size"] == json::parse("[2]"));
  CHECK(keys("avg1d")["data_format"] == "channels_first");
  CHECK(keys("drop1d")["seed"].is_null());

  // What Keras's constructors also take: ints for tuples, an (int, pair) padding, strides null.
  (*by_name.at("pad"))["config"]["padding"] = json::parse("[1, [0, 2]]");
  (*by_name.at("max2d"))["config"]["pool_size"] = 3;
  (*by_name.at("max2d"))["config"]["strides"] = nullptr;
  (*by_name.at("up"))["config"]["size"] = 2;
  auto edited_members = members;
  edited_members["config.json"] = config.dump();
  const std::string edited = dir.file("edited.keras");
  write_zip(edited, edited_members);
  auto loaded = models::load_model(edited);
  CHECK(dynamic_cast<const L::ZeroPadding2D&>(*loaded->get_layer("pad")).padding() ==
        std::vector<std::int64_t>{1, 1, 0, 2});
  const auto& max2d = dynamic_cast<const L::MaxPooling2D&>(*loaded->get_layer("max2d"));
  CHECK(max2d.pool_size() == std::vector<std::int64_t>{3, 3});
  CHECK(max2d.strides() == std::vector<std::int64_t>{3, 3});
  CHECK(dynamic_cast<const L::UpSampling2D&>(*loaded->get_layer("up")).size() == std::vector<std::int64_t>{2, 2});
  CHECK(loaded->predict(x, {.verbose = 0}).shape() == Shape{2, 2});

  // A Keras interpolation loom does not implement is a clear error.
  (*by_name.at("up"))["config"]["interpolation"] = "bicubic";
  edited_members["config.json"] = config.dump();
  write_zip(dir.file("bicubic.keras"), edited_members);
  CHECK_THROWS_WITH(models::load_model(dir.file("bicubic.keras")), Catch::Contains("up") && Catch::Contains("bicubic"));
}
