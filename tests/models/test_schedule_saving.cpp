// Every learning-rate schedule saves into a .keras archive's compile_config as Keras writes it, and loads back
// computing the same rates.
#include <catch2/catch.hpp>

#include "layers/layers.hpp"
#include "models/models.hpp"
#include "optim/optim.hpp"
#include "tests/temp_files.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

TEST_CASE("Every schedule round-trips through a .keras archive", "[models][saving][optim]") {
  const std::vector<std::pair<std::string, optim::LearningRate>> schedules = {
      {"ExponentialDecay", optim::ExponentialDecay({0.1, 3, 0.5, true})},
      {"CosineDecay", optim::CosineDecay({0.0, 10, 0.1, 0.05, 4})},
      {"PolynomialDecay", optim::PolynomialDecay({0.1, 5, 0.001, 2.0, true})},
      {"InverseTimeDecay", optim::InverseTimeDecay({0.1, 4, 0.5, false})},
      {"PiecewiseConstantDecay", optim::PiecewiseConstantDecay({{2, 6}, {0.1, 0.05, 0.01}})},
      {"CosineDecayRestarts", optim::CosineDecayRestarts({0.1, 3, 1.5, 0.7, 0.05})},
  };
  const TempDir dir("schedule-archive");
  for (const auto& [name, rate] : schedules) {
    INFO(name);
    auto model = L::Sequential({L::Input({2}), L::Dense(1)});
    model.compile({.optimizer = std::make_shared<optim::Adam>(optim::AdamOptions{.learning_rate = rate}),
                   .loss = "mse"});
    const std::string path = dir.file(name + ".keras");
    model.save(path);
    auto restored = models::load_model(path);
    const optim::LearningRate& loaded = restored->optimizer()->learning_rate_setting();
    REQUIRE(loaded.is_schedule());
    for (std::int64_t step = 0; step < 20; ++step) CHECK(loaded.at(step) == rate.at(step));
  }
}

TEST_CASE("Adagrad\\, Adamax\\, Adadelta and Lion save their arguments and state and continue identically",
          "[models][saving][optim]") {
  const std::vector<std::shared_ptr<optim::Optimizer>> optimizers = {
      std::make_shared<optim::Adagrad>(optim::AdagradOptions{.learning_rate = 0.05, .initial_accumulator_value = 0.3}),
      std::make_shared<optim::Adamax>(optim::AdamaxOptions{.learning_rate = 0.02, .beta_1 = 0.8}),
      std::make_shared<optim::Adadelta>(optim::AdadeltaOptions{.learning_rate = 0.5, .rho = 0.9}),
      std::make_shared<optim::Lion>(optim::LionOptions{.learning_rate = 0.01, .beta_2 = 0.95}),
  };
  const TempDir dir("optimizer-archive");
  const Tensor x = Tensor::randn({6, 2}, DType::f32, 1), y = Tensor::randn({6, 1}, DType::f32, 2);
  const L::FitOptions fit{.batch_size = 3, .epochs = 1, .verbose = 0, .shuffle = false};
  for (const auto& optimizer : optimizers) {
    INFO(optimizer->name());
    auto model = L::Sequential({L::Input({2}), L::Dense(3, {.activation = "tanh"}), L::Dense(1)});
    model.compile({.optimizer = optimizer, .loss = "mse"});
    model.fit(x, y, fit);
    const std::string path = dir.file(optimizer->name() + ".keras");
    model.save(path);
    auto restored = models::load_model(path);
    REQUIRE(restored->optimizer()->name() == optimizer->name());
    model.fit(x, y, fit);
    restored->fit(x, y, fit);
    const auto a = model.weights(), b = restored->weights();
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i].value().to_vector<double>() == b[i].value().to_vector<double>());
  }
  for (const char* name : {"adagrad", "adamax", "adadelta", "lion"}) CHECK(optim::get(name)->name() == name);
}
