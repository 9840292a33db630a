// Nadam, Adafactor and the options every optimizer shares (use_ema, ema_overwrite_frequency, loss_scale_factor,
// gradient_accumulation_steps) in .keras archives and .weights.h5 files: archives Keras 3 wrote
// (tests/fixtures/make_optimizer_saving_fixtures.py) load their optimizer state in Keras's order and train as
// Keras's fit; loom writes them back with Keras's compile_config keys and continues identically.
#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <string>
#include <typeinfo>
#include <vector>

#include "layers/layers.hpp"
#include "models/models.hpp"
#include "models/saving/detail/serialization.hpp"
#include "optim/optim.hpp"
#include "tests/fixture_reader.hpp"
#include "tests/temp_files.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;
using json = nlohmann::ordered_json;

namespace {

std::string fixture_path(const std::string& relative) { return std::string(LOOM_FIXTURES_DIR) + "/" + relative; }

std::map<std::string, Tensor> state_map(const optim::Optimizer& opt, const std::vector<Variable>& vars) {
  const auto entries = opt.state(vars);
  return {entries.begin(), entries.end()};
}

std::shared_ptr<L::Model> small_model() {
  return std::make_shared<L::Sequential>(
      std::vector<L::LayerArg>{L::Input({4}), L::Dense(3, {.activation = "tanh"}), L::Dense(2)});
}

void check_tensor_close(const Tensor& got, const FixtureArray& want, double tol) {
  REQUIRE(got.shape() == want.shape);
  check_close(values(got), want.values, tol, tol);
}

/// The model's weights, as doubles, in weights() order.
std::vector<std::vector<double>> weight_values(const L::Model& model) {
  std::vector<std::vector<double>> out;
  for (const Variable& w : model.weights()) out.push_back(values(w.value()));
  return out;
}

}  // namespace

TEST_CASE("Keras's archives load Nadam and Adafactor with moving averages and accumulators and train as Keras's fit",
          "[models][saving][optim]") {
  const auto cases = read_fixture_cases("optimizer_saving_fixtures.txt");
  REQUIRE(cases.size() == 4);
  for (const auto& c : cases) {
    INFO("case " << c.name);
    auto model = models::load_model(fixture_path(c.words.at(0)));
    const optim::Optimizer& opt = *model->optimizer();
    const std::string class_name = c.option("class");
    if (class_name == "Nadam") CHECK(dynamic_cast<const optim::Nadam*>(&opt) != nullptr);
    if (class_name == "Adafactor") CHECK(dynamic_cast<const optim::Adafactor*>(&opt) != nullptr);
    if (class_name == "Adam") CHECK(dynamic_cast<const optim::Adam*>(&opt) != nullptr);
    const optim::BaseOptions& base = opt.shared_options();
    CHECK(base.use_ema == (c.option_or("use_ema", "0") == "1"));
    if (base.use_ema) CHECK(base.ema_momentum == std::stod(c.option("ema_momentum")));
    CHECK(base.ema_overwrite_frequency.value_or(0) == std::stoll(c.option_or("ema_overwrite_frequency", "0")));
    CHECK(base.gradient_accumulation_steps.value_or(0) ==
          std::stoll(c.option_or("gradient_accumulation_steps", "0")));
    CHECK(opt.apply_count() == 3);

    // The file's optimizer variables, in Keras's order, are loom's averages, accumulators, slots and u_product.
    const std::vector<Variable> trainable = model->trainable_weights();
    const std::vector<std::string> order = opt.keras_variable_order(trainable);
    const std::map<std::string, Tensor> state = state_map(opt, trainable);
    for (std::size_t i = 0; i < order.size(); ++i) {
      INFO("Keras optimizer variable " << i << ", loom's " << order[i]);
      check_close(values(state.at(order[i])), c.array("variable/" + std::to_string(i)).values, 0.0);
    }
    CHECK_FALSE(c.has("variable/" + std::to_string(order.size())));

    model->fit(c.array("x").tensor(DType::f32), c.array("y").tensor(DType::f32),
               {.batch_size = 4, .epochs = 1, .verbose = 0, .shuffle = false});
    const auto weights = model->weights();
    std::vector<std::string> stepped;
    for (const auto& name : c.array_names)
      if (name.rfind("stepped/", 0) == 0) stepped.push_back(name);
    REQUIRE(weights.size() == stepped.size());
    for (std::size_t i = 0; i < weights.size(); ++i) {
      INFO("weight " << stepped[i]);
      check_tensor_close(weights[i].value(), c.array(stepped[i]), 1e-5);
    }
  }
}

TEST_CASE("every optimizer option round-trips through a .keras archive and training continues identically",
          "[models][saving][optim]") {
  const std::vector<std::shared_ptr<optim::Optimizer>> optimizers = {
      // Constant rates exact in float32, the type the weights file holds them in, as Keras's.
      std::make_shared<optim::Nadam>(optim::NadamOptions{.learning_rate = 0.015625,
                                                         .beta_1 = 0.8,
                                                         .beta_2 = 0.99,
                                                         .epsilon = 1e-5,
                                                         .weight_decay = 0.01,
                                                         .clipnorm = 2.0,
                                                         .use_ema = true,
                                                         .ema_momentum = 0.9,
                                                         .ema_overwrite_frequency = 4,
                                                         .loss_scale_factor = 8.0,
                                                         .gradient_accumulation_steps = 2,
                                                         .name = "my_nadam"}),
      std::make_shared<optim::Adafactor>(optim::AdafactorOptions{.learning_rate = 0.0625,
                                                                 .beta_2_decay = -0.6,
                                                                 .epsilon_1 = 1e-20,
                                                                 .epsilon_2 = 2e-3,
                                                                 .clip_threshold = 0.7,
                                                                 .relative_step = false,
                                                                 .global_clipnorm = 1.0,
                                                                 .use_ema = true,
                                                                 .gradient_accumulation_steps = 3}),
      std::make_shared<optim::SGD>(optim::SGDOptions{.learning_rate = optim::ExponentialDecay({0.1, 2, 0.5, false}),
                                                     .momentum = 0.9,
                                                     .clipvalue = 0.5,
                                                     .use_ema = true,
                                                     .ema_momentum = 0.5,
                                                     .ema_overwrite_frequency = 1,
                                                     .loss_scale_factor = 0.25}),
      std::make_shared<optim::AdamW>(optim::AdamWOptions{.learning_rate = 0.0078125, .gradient_accumulation_steps = 4}),
  };
  const TempDir dir("optimizer-options-archive");
  const Tensor x = Tensor::randn({10, 4}, DType::f32, 3), y = Tensor::randn({10, 2}, DType::f32, 4);
  // 5 steps of 2 rows: every accumulation above stops part-way, so the saved accumulators are not zero.
  const L::FitOptions fit{.batch_size = 2, .epochs = 1, .verbose = 0, .shuffle = false};
  for (const auto& optimizer : optimizers) {
    INFO(optimizer->name());
    auto model = small_model();
    model->compile({.optimizer = optimizer, .loss = "mse"});
    model->fit(x, y, fit);
    const std::string path = dir.file(optimizer->name() + ".keras");
    model->save(path);
    auto restored = models::load_model(path);
    const optim::Optimizer& loaded = *restored->optimizer();
    const optim::Optimizer& original = *optimizer;
    CHECK(typeid(loaded) == typeid(original));
    CHECK(loaded.name() == optimizer->name());
    // The whole Keras get_config is written, and read back to the same config (a constant learning rate comes
    // back from the weights file's float32 variable, as in Keras).
    json written = models::detail::serialize_compile(*model)["optimizer"];
    json reread = models::detail::serialize_compile(*restored)["optimizer"];
    for (const char* key : {"name", "learning_rate", "weight_decay", "clipnorm", "global_clipnorm", "clipvalue",
                            "use_ema", "ema_momentum", "ema_overwrite_frequency", "loss_scale_factor",
                            "gradient_accumulation_steps"})
      CHECK(written["config"].contains(key));
    if (written["config"]["learning_rate"].is_number()) {
      CHECK(reread["config"]["learning_rate"].get<double>() ==
            Approx(written["config"]["learning_rate"].get<double>()).epsilon(1e-7));
      reread["config"].erase("learning_rate");
      written["config"].erase("learning_rate");
    }
    CHECK(reread == written);
    const optim::BaseOptions& a = optimizer->shared_options();
    const optim::BaseOptions& b = loaded.shared_options();
    CHECK(a.use_ema == b.use_ema);
    CHECK(a.ema_momentum == b.ema_momentum);
    CHECK(a.ema_overwrite_frequency == b.ema_overwrite_frequency);
    CHECK(a.loss_scale_factor == b.loss_scale_factor);
    CHECK(a.gradient_accumulation_steps == b.gradient_accumulation_steps);
    CHECK(a.weight_decay == b.weight_decay);
    CHECK(loaded.apply_count() == optimizer->apply_count());
    CHECK(loaded.iterations() == optimizer->iterations());
    const auto original_state = state_map(*optimizer, model->trainable_weights());
    const auto loaded_state = state_map(loaded, restored->trainable_weights());
    REQUIRE(original_state.size() == loaded_state.size());
    for (const auto& [key, value] : original_state) {
      INFO("state " << key);
      CHECK(values(loaded_state.at(key)) == values(value));
    }
    model->fit(x, y, fit);
    restored->fit(x, y, fit);
    CHECK(weight_values(*restored) == weight_values(*model));
  }
  auto fresh = small_model();
  fresh->compile({.optimizer = std::make_shared<optim::Adafactor>(optim::AdafactorOptions{
                      .beta_2_decay = -0.6, .relative_step = false, .gradient_accumulation_steps = 3}),
                  .loss = "mse"});
  const json adafactor = models::detail::serialize_compile(*fresh)["optimizer"];
  CHECK(adafactor["class_name"] == "Adafactor");
  CHECK(adafactor["config"]["beta_2_decay"] == -0.6);
  CHECK(adafactor["config"]["relative_step"] == false);
  CHECK(adafactor["config"]["gradient_accumulation_steps"] == 3);
  CHECK(adafactor["config"]["ema_overwrite_frequency"].is_null());
}

TEST_CASE("weights files keep the averages and accumulators and factored slots and u_product",
          "[models][keras_weights][optim]") {
  const TempDir dir("optimizer-weights-h5");
  const Tensor x = Tensor::randn({6, 4}, DType::f32, 5), y = Tensor::randn({6, 2}, DType::f32, 6);
  const L::FitOptions fit{.batch_size = 2, .epochs = 1, .verbose = 0, .shuffle = false};
  const auto make = [](int which) -> std::shared_ptr<optim::Optimizer> {
    if (which == 0)
      return std::make_shared<optim::Nadam>(
          optim::NadamOptions{.use_ema = true, .gradient_accumulation_steps = 2});
    return std::make_shared<optim::Adafactor>(
        optim::AdafactorOptions{.learning_rate = 0.1, .use_ema = true, .ema_overwrite_frequency = 2});
  };
  for (int run = 0; run < 4; ++run) {
    const int which = run % 2;
    const std::string path = dir.file(run < 2 ? "m.weights.h5" : "m.safetensors");
    auto model = small_model();
    model->compile({.optimizer = make(which), .loss = "mse"});
    INFO(model->optimizer()->name() << " in " << path);
    model->fit(x, y, fit);
    model->save_weights(path, {.include_optimizer = true});
    auto copy = small_model();
    copy->compile({.optimizer = make(which), .loss = "mse"});
    copy->predict(x, {.verbose = 0});  // builds it
    copy->load_weights(path, {.include_optimizer = true});
    CHECK(copy->optimizer()->apply_count() == 3);
    model->fit(x, y, fit);
    copy->fit(x, y, fit);
    CHECK(weight_values(*copy) == weight_values(*model));

    // An optimizer without the moving averages does not fit a .weights.h5 file (Keras's variables are by
    // position): a loom::Error naming the count. A .safetensors checkpoint is by name: the entries the
    // optimizer has no use for are ignored, as every other name.
    auto other = small_model();
    other->compile({.optimizer = which == 0 ? std::shared_ptr<optim::Optimizer>(std::make_shared<optim::Nadam>())
                                            : std::make_shared<optim::Adafactor>(),
                    .loss = "mse"});
    other->predict(x, {.verbose = 0});
    if (run < 2)
      CHECK_THROWS_WITH(other->load_weights(path, {.include_optimizer = true}),
                        Catch::Contains("optimizer variable(s)"));
    else
      CHECK_NOTHROW(other->load_weights(path, {.include_optimizer = true}));
  }
}

TEST_CASE("a compile_config with out-of-range optimizer options is a loom::Error naming the option",
          "[models][saving][optim][bad_input]") {
  const auto compile_error = [](json optimizer_config) {
    auto model = small_model();
    const json config = {{"optimizer", {{"module", "keras.optimizers"},
                                        {"class_name", "Nadam"},
                                        {"config", std::move(optimizer_config)},
                                        {"registered_name", nullptr}}},
                         {"loss", "mse"}};
    try {
      models::detail::compile_from_config(*model, config, "compile_config");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    FAIL("compile_from_config accepted the config");
    return std::string();
  };
  CHECK_THAT(compile_error({{"use_ema", true}, {"ema_momentum", 1.5}}),
             Catch::Contains("nadam") && Catch::Contains("ema_momentum") && Catch::Contains("1.5"));
  CHECK_THAT(compile_error({{"use_ema", true}, {"ema_overwrite_frequency", -2}}),
             Catch::Contains("ema_overwrite_frequency") && Catch::Contains("-2"));
  CHECK_THAT(compile_error({{"gradient_accumulation_steps", 1}}),
             Catch::Contains("gradient_accumulation_steps must be >= 2") && Catch::Contains("got 1"));
  CHECK_THAT(compile_error({{"loss_scale_factor", -4.0}}), Catch::Contains("loss_scale_factor"));
  CHECK_THAT(compile_error({{"beta_2", 1.0}}), Catch::Contains("Nadam: beta_2"));
  CHECK_THAT(compile_error({{"amsgrad", false}}), Catch::Contains("amsgrad"));  // not a Nadam argument

  // As Keras, 0 means none for both counts, and the moving-average options are not checked without use_ema.
  auto model = small_model();
  models::detail::compile_from_config(
      *model,
      {{"optimizer", {{"class_name", "Nadam"},
                      {"config", {{"gradient_accumulation_steps", 0}, {"ema_momentum", 7.0}}}}},
       {"loss", "mse"}},
      "compile_config");
  CHECK_FALSE(model->optimizer()->shared_options().gradient_accumulation_steps.has_value());
  CHECK_FALSE(model->optimizer()->shared_options().use_ema);
}
