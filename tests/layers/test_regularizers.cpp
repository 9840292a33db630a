// Regularizers (layers/regularizers/) and Layer::losses(): Keras's penalties and their gradients, the losses a
// layer and a model hold (weight penalties, activity penalties, add_loss) and when they are cleared, fits of
// models with regularizers and constraints, and their .keras configs both ways; all against Keras 3
// (tests/fixtures/make_regularizer_fixtures.py).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "loom.hpp"
#include "tests/bad_input_helpers.hpp"
#include "tests/fixture_reader.hpp"
#include "tests/temp_files.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;
namespace R = loom::layers::regularizers;
namespace C = loom::layers::constraints;

namespace {

const std::vector<FixtureCase>& fixtures() {
  static const auto cases = read_fixture_cases("regularizer_fixtures.txt");
  return cases;
}

std::vector<const FixtureCase*> cases_of(const std::string& kind) {
  std::vector<const FixtureCase*> out;
  for (const auto& c : fixtures())
    if (!c.words.empty() && c.words.front() == kind) out.push_back(&c);
  return out;
}

double number(const FixtureCase& c, const std::string& key) { return std::stod(c.option(key)); }

L::Regularizer regularizer_of(const FixtureCase& c) {
  if (c.options.count("name")) return L::Regularizer(c.option("name"));
  const std::string& k = c.option("class");
  if (k == "L1") return R::l1(number(c, "l1"));
  if (k == "L2") return R::l2(number(c, "l2"));
  if (k == "L1L2") return R::l1_l2(number(c, "l1"), number(c, "l2"));
  REQUIRE(k == "OrthogonalRegularizer");
  return R::orthogonal_regularizer(number(c, "factor"), c.option("mode"));
}

std::string fixture_path(const std::string& relative) { return std::string(LOOM_FIXTURES_DIR) + "/" + relative; }

/// build_model() of make_regularizer_fixtures.py.
Model make_fit_model(const std::string& kind) {
  L::reset_layer_names();
  if (kind == "dense") {
    Tensor in = L::Input({4}, {.dtype = DType::f64});
    Tensor h = L::Dense(5, {.activation = "sigmoid",
                            .kernel_regularizer = R::l1_l2(0.01, 0.02),
                            .bias_regularizer = R::l2(0.03),
                            .activity_regularizer = R::l1(0.01),
                            .kernel_constraint = C::max_norm(0.8),
                            .bias_constraint = C::non_neg()})(in);
    Tensor out = L::Dense(2, {.kernel_regularizer = R::orthogonal_regularizer(0.05, "columns"),
                              .activity_regularizer = R::l2(0.02),
                              .kernel_constraint = C::unit_norm(0)})(h);
    return Model(in, out);
  }
  if (kind == "conv") {
    Tensor in = L::Input({6, 6, 2}, {.dtype = DType::f64});
    Tensor h = L::Conv2D(3, {3, 3}, {.activation = "relu",
                                     .kernel_regularizer = R::l2(0.01),
                                     .bias_regularizer = R::l1(0.02),
                                     .activity_regularizer = R::l2(0.001),
                                     .kernel_constraint = C::max_norm(0.5, {0, 1, 2}),
                                     .bias_constraint = C::non_neg()})(in);
    h = L::DepthwiseConv2D({2, 2}, {.depthwise_regularizer = R::l1(0.01),
                                    .bias_regularizer = R::l2(0.05),
                                    .activity_regularizer = R::l1(0.002),
                                    .depthwise_constraint = C::min_max_norm(0.1, 0.6, 0.7, {0, 1}),
                                    .bias_constraint = C::max_norm(0.05, 0)})(h);
    h = L::Conv2DTranspose(2, {2, 2}, {.strides = {2, 2},
                                       .kernel_regularizer = R::l1_l2(0.003, 0.004),
                                       .activity_regularizer = R::l1(0.001),
                                       .kernel_constraint = C::unit_norm({0, 1, 3})})(h);
    h = L::GlobalAveragePooling2D()(h);
    return Model(in, L::Dense(2, {.kernel_regularizer = R::l2(0.02)})(h));
  }
  if (kind == "sequence") {
    Tensor in = L::Input({5, 3}, {.dtype = DType::f64});
    Tensor h = L::Conv1D(4, {2}, {.activation = "sigmoid",
                                  .kernel_regularizer = R::l1(0.02),
                                  .bias_regularizer = R::l2(0.1),
                                  .activity_regularizer = R::l2(0.01),
                                  .kernel_constraint = C::max_norm(0.7, {0, 1})})(in);
    h = L::EinsumDense("abc,cd->abd", {4, 3}, {.bias_axes = "d",
                                               .kernel_regularizer = R::orthogonal_regularizer(0.1, "rows"),
                                               .bias_regularizer = R::l1(0.03),
                                               .kernel_constraint = C::unit_norm(1),
                                               .bias_constraint = C::non_neg(),
                                               .activity_regularizer = R::l1(0.005)})(h);
    h = L::Flatten()(h);
    return Model(in, L::Dense(1, {.bias_regularizer = R::l2(0.5)})(h));
  }
  REQUIRE(kind == "embedding");
  Tensor in = L::Input({4}, {.dtype = DType::i64});
  L::Embedding embedding(7, 3, {.embeddings_regularizer = R::l2(0.05),
                                .embeddings_constraint = C::max_norm(0.3, 1),
                                .activity_regularizer = R::l1(0.01)});
  embedding.maybe_build({-1, 4}, DType::f64);  // Keras's float64 policy
  Tensor h = L::GlobalAveragePooling1D()(std::move(embedding)(in));
  Tensor out = L::Dense(3, {.activation = "softmax",
                            .kernel_regularizer = R::l1_l2(0.01, 0.01),
                            .kernel_constraint = C::min_max_norm(0.2, 0.5, 1.0, 0)})(h);
  return Model(in, out);
}

/// The model's layers that have weights, in order (the fixture's w<k>).
std::vector<std::shared_ptr<L::Layer>> weighted_layers(const Model& model) {
  std::vector<std::shared_ptr<L::Layer>> out;
  for (const auto& layer : model.layers())
    if (!layer->weights().empty()) out.push_back(layer);
  return out;
}

void assign_weights(const Model& model, const FixtureCase& f) {
  const auto layers = weighted_layers(model);
  for (std::size_t k = 0; k < layers.size(); ++k) {
    auto w = layers[k]->weights();
    for (std::size_t i = 0; i < w.size(); ++i)
      w[i].assign(f.array(fmt::format("w{}_{}", k, i)).tensor());
  }
}

void check_weights(const Model& model, const FixtureCase& f, const std::string& prefix, double tol) {
  const auto layers = weighted_layers(model);
  for (std::size_t k = 0; k < layers.size(); ++k) {
    auto w = layers[k]->weights();
    for (std::size_t i = 0; i < w.size(); ++i) {
      INFO(f.name << ": " << w[i].name());
      check_close(values(w[i].value()), f.array(fmt::format("{}w{}_{}", prefix, k, i)).values, tol);
    }
  }
}

Tensor fixture_x(const FixtureCase& f) {
  return f.option("model") == "embedding" ? f.array("x").tensor(DType::i64) : f.array("x").tensor();
}

Tensor fixture_y(const FixtureCase& f) {
  return f.option("model") == "embedding" ? f.array("y").tensor(DType::i64) : f.array("y").tensor();
}

double sum_of(const std::vector<Tensor>& losses) {
  double total = 0.0;
  for (const Tensor& loss : losses) total += ops::sum(loss).item<double>();
  return total;
}

/// Adds the sum of its input as a loss in every call, and calls an optional inner layer of the same kind.
class Penalized : public L::Layer {
 public:
  explicit Penalized(double scale, bool nested = false) : Layer("penalized"), scale_(scale) {
    if (nested) inner_ = &add_layer(Penalized(10.0 * scale));
  }
  Penalized* inner() const { return inner_; }

 protected:
  Tensor call(const Tensor& x, bool) override {
    add_loss(ops::sum(x) * scale_);
    return inner_ != nullptr ? (*inner_)(x) : x;
  }
  std::shared_ptr<Layer> move_into_shared() && override { return std::make_shared<Penalized>(std::move(*this)); }

 private:
  double scale_;
  Penalized* inner_ = nullptr;
};

}  // namespace

TEST_CASE("regularizers compute Keras's penalties and gradients in float64", "[regularizers]") {
  const auto cases = cases_of("regularizer");
  CHECK(cases.size() == 15);
  for (const FixtureCase* c : cases) {
    INFO(c->name);
    const L::Regularizer regularizer = regularizer_of(*c);
    Tensor x = c->array("x").tensor();
    GradientTape tape;
    tape.watch(x);
    const Tensor penalty = regularizer(x);
    CHECK(penalty.ndim() == 0);
    CHECK(penalty.dtype() == DType::f64);
    check_close({penalty.item<double>()}, {number(*c, "penalty")}, 1e-12);
    check_close(values(tape.gradient(penalty, std::vector<Tensor>{x})[0]), c->array("grad").values, 1e-12);
  }
}

TEST_CASE("regularizers pass gradcheck in float64", "[regularizers][gradcheck]") {
  for (const FixtureCase* c : cases_of("regularizer")) {
    // |x| has no derivative at 0, where central differences give 0 and Keras (JAX) 1: that case is checked
    // against Keras's gradient above.
    if (c->name == "reg_l1_with_zeros") continue;
    INFO(c->name);
    const L::Regularizer regularizer = regularizer_of(*c);
    require_gradcheck([&](const std::vector<Tensor>& in) { return regularizer(in[0]); }, {c->array("x").tensor()});
    require_gradgradcheck([&](const std::vector<Tensor>& in) { return regularizer(in[0]); },
                          {c->array("x").tensor()});
  }
}

TEST_CASE("regularizers by Keras name take Keras's defaults", "[regularizers]") {
  const auto numbers = [](const L::Regularizer& r) { return r.arguments()->numbers; };
  using Numbers = std::vector<std::pair<std::string, double>>;
  CHECK(L::Regularizer("l1").class_name() == "L1");
  CHECK(numbers("l1") == Numbers{{"l1", 0.01}});
  CHECK(numbers("L2") == Numbers{{"l2", 0.01}});
  CHECK(numbers("l1l2") == Numbers{{"l1", 0.0}, {"l2", 0.0}});       // keras.regularizers.get("l1l2")
  CHECK(numbers("l1_l2") == Numbers{{"l1", 0.01}, {"l2", 0.01}});    // the documented values
  const L::Regularizer orthogonal("orthogonal_regularizer");
  CHECK(orthogonal.class_name() == "OrthogonalRegularizer");
  CHECK(numbers(orthogonal) == Numbers{{"factor", 0.01}});
  CHECK(orthogonal.arguments()->mode == "rows");
  CHECK(orthogonal.describe() == "OrthogonalRegularizer(factor=0.01, mode='rows')");
  CHECK(L::Regularizer("l1l2")(f64({1, -2}, {2})).item<double>() == 0.0);
  CHECK_FALSE(static_cast<bool>(L::Regularizer()));
  const L::Regularizer callable = [](const Tensor& x) { return ops::sum(x); };
  CHECK(callable.class_name() == "callable");
  CHECK_FALSE(callable.arguments().has_value());
  CHECK(callable(f64({1, 2}, {2})).item<double>() == 3.0);
}

TEST_CASE("a layer's losses are its weight penalties and its latest call's activity penalty", "[regularizers]") {
  // Keras's Regularizer docstring: kernel L1 0.25 and activity 25 / batch 5.
  L::Dense dense(5, {.kernel_initializer = "ones", .kernel_regularizer = R::l1(0.01),
                     .activity_regularizer = R::l2(0.01)});
  CHECK(dense.losses().empty());  // not built
  const Tensor x = Tensor::full({5, 5}, 2.0, DType::f64);
  dense.maybe_build(x.shape(), DType::f64);
  REQUIRE(dense.losses().size() == 1);
  CHECK(dense.losses()[0].item<double>() == Approx(0.25).epsilon(1e-14));
  dense(x);
  auto losses = dense.losses();
  REQUIRE(losses.size() == 2);
  CHECK(losses[0].item<double>() == Approx(5.0).epsilon(1e-14));   // the call's activity penalty comes first
  CHECK(losses[1].item<double>() == Approx(0.25).epsilon(1e-14));
  dense(x);
  CHECK(dense.losses().size() == 2);  // each outermost call starts afresh
  // The weight penalty is computed when asked: on the caller's tape, with the current value.
  Variable(dense.kernel()).assign(Tensor::full({5, 5}, 3.0, DType::f64));
  GradientTape tape;
  const Tensor penalty = dense.losses().back();
  CHECK(penalty.item<double>() == Approx(0.75).epsilon(1e-14));
  const Tensor g = tape.gradient(penalty, std::vector<Tensor>{dense.kernel()})[0];
  check_close(values(g), std::vector<double>(25, 0.01), 1e-15);
  // A frozen layer's weights add no penalty (Keras's trainable_weights); its activity penalty stays.
  dense.set_trainable(false);
  dense(x);
  CHECK(dense.losses().size() == 1);
  // An empty batch gives an activity penalty of 0 (Keras's divide_no_nan).
  dense(Tensor::zeros({0, 5}, DType::f64));
  CHECK(dense.losses()[0].item<double>() == 0.0);
}

TEST_CASE("add_loss losses last until the next outermost call and gather from sublayers", "[regularizers]") {
  Penalized outer(1.0, /*nested=*/true);
  const Tensor x = f64({1, 2, 3}, {1, 3});
  outer(x);
  std::vector<Tensor> losses = outer.losses();
  REQUIRE(losses.size() == 2);
  CHECK(losses[0].item<double>() == 6.0);   // the outer call's own
  CHECK(losses[1].item<double>() == 60.0);  // the nested call's, kept through the outer call
  // Calling the inner layer directly is an outermost call of its own: it clears only its own losses.
  (*outer.inner())(f64({1, 1, 1}, {1, 3}));
  CHECK(outer.inner()->losses().size() == 1);
  losses = outer.losses();
  REQUIRE(losses.size() == 2);
  CHECK(losses[0].item<double>() == 6.0);
  CHECK(losses[1].item<double>() == 30.0);
  // An outer call clears every sublayer's.
  outer(f64({0, 0, 1}, {1, 3}));
  CHECK(sum_of(outer.losses()) == 11.0);
  // add_loss outside a call keeps the loss until the next call, as Keras.
  outer.add_loss(Tensor::scalar(4.0, DType::f64));
  CHECK(sum_of(outer.losses()) == 15.0);
  outer(f64({0, 0, 1}, {1, 3}));
  CHECK(sum_of(outer.losses()) == 11.0);
}

TEST_CASE("symbolic calls add no losses and a model gathers its layers' losses", "[regularizers]") {
  L::reset_layer_names();
  Tensor in = L::Input({3}, {.dtype = DType::f64});
  Tensor h = L::Dense(2, {.kernel_initializer = "ones", .kernel_regularizer = R::l2(0.5),
                          .activity_regularizer = R::l1(1.0)})(in);
  Tensor out = Penalized(2.0)(h);
  Model model(in, out);
  // Building the graph ran the layers on stand-ins: no activity or add_loss loss is kept from that.
  REQUIRE(model.losses().size() == 1);
  CHECK(model.losses()[0].item<double>() == 3.0);
  const Tensor x = f64({1, 2, 3, -1, 0, 0}, {2, 3});
  model(x);
  // Per layer in Keras's _flatten_layers order (the Dense's activity, the Penalized layer's), then the kernel's.
  const std::vector<Tensor> losses = model.losses();
  REQUIRE(losses.size() == 3);
  CHECK(losses[0].item<double>() == Approx((12.0 + 2.0) / 2.0).epsilon(1e-14));  // |6|+|6|+|-1|+|-1|, batch 2
  CHECK(losses[1].item<double>() == Approx(2.0 * (6 + 6 - 1 - 1)).epsilon(1e-14));
  CHECK(losses[2].item<double>() == 3.0);
  // A list of inputs calls the model as its own outermost call too.
  model(std::vector<Tensor>{x});
  CHECK(model.losses().size() == 3);
}

TEST_CASE("models with regularizers and constraints fit and evaluate as in Keras", "[regularizers][constraints]") {
  const auto cases = cases_of("fit");
  CHECK(cases.size() == 8);
  for (const FixtureCase* c : cases) {
    INFO(c->name);
    const FixtureCase& f = *c;
    Model model = make_fit_model(f.option("model"));
    assign_weights(model, f);
    const Tensor x = fixture_x(f), y = fixture_y(f);
    model(x);
    const std::vector<Tensor> losses = model.losses();
    CHECK(losses.size() == std::size_t(std::stoi(f.option("losses_count"))));
    check_close({sum_of(losses)}, {number(f, "losses_sum")}, 1e-12);
    const double lr = number(f, "lr");
    const std::string loss = f.option("model") == "embedding" ? "sparse_categorical_crossentropy" : "mse";
    if (f.option("optimizer") == "sgd")
      model.compile({.optimizer = optim::SGD({.learning_rate = lr}), .loss = loss});
    else
      model.compile({.optimizer = optim::Adam({.learning_rate = lr}), .loss = loss});
    const History h = model.fit(x, y, {.batch_size = x.shape()[0], .epochs = 3, .verbose = 0, .shuffle = false});
    const auto& logged = h.history.at("loss");
    REQUIRE(logged.size() == 3);
    for (std::size_t step = 0; step < 3; ++step) {
      INFO("step " << step);
      check_close({logged[step]}, {number(f, "loss_" + std::to_string(step))}, 1e-12);
    }
    check_weights(model, f, "final_", 1e-12);
    const L::Logs logs = model.evaluate(x, y, {.batch_size = x.shape()[0], .verbose = 0});
    check_close({logs.at("loss")}, {number(f, "evaluate_loss")}, 1e-12);
  }
}

TEST_CASE("Keras archives with regularizers and constraints load and train on as in Keras",
          "[regularizers][constraints][keras_archive]") {
  std::size_t archives = 0;
  for (const FixtureCase* c : cases_of("fit")) {
    if (!c->options.count("archive")) continue;
    ++archives;
    INFO(c->name);
    const FixtureCase& f = *c;
    auto model = models::load_model(fixture_path(f.option("archive")));
    check_weights(*model, f, "final_", 0.0);
    const Tensor x = fixture_x(f), y = fixture_y(f);
    const L::Logs logs = model->evaluate(x, y, {.batch_size = x.shape()[0], .verbose = 0});
    check_close({logs.at("loss")}, {number(f, "evaluate_loss")}, 1e-12);
    const History h = model->fit(x, y, {.batch_size = x.shape()[0], .epochs = 1, .verbose = 0, .shuffle = false});
    check_close({h.history.at("loss")[0]}, {number(f, "stepped_loss")}, 1e-12);
    check_weights(*model, f, "stepped_", 1e-12);
  }
  CHECK(archives == 4);
}

TEST_CASE("regularizers and constraints round-trip through loom's .keras archives",
          "[regularizers][constraints][keras_archive]") {
  const TempDir dir("regularizers");
  for (const std::string kind : {"dense", "conv", "sequence", "embedding"}) {
    INFO(kind);
    Model model = make_fit_model(kind);
    model.compile({.optimizer = optim::SGD({.learning_rate = 0.1}), .loss = "mse"});
    const std::string path = dir.file(kind + ".keras");
    model.save(path);
    auto restored = models::load_model(path);
    const auto original_layers = weighted_layers(model), restored_layers = weighted_layers(*restored);
    REQUIRE(original_layers.size() == restored_layers.size());
    for (std::size_t k = 0; k < original_layers.size(); ++k) {
      const auto a = original_layers[k]->weights(), b = restored_layers[k]->weights();
      REQUIRE(a.size() == b.size());
      CHECK(original_layers[k]->activity_regularizer().describe() ==
            restored_layers[k]->activity_regularizer().describe());
      for (std::size_t i = 0; i < a.size(); ++i) {
        INFO(a[i].name());
        CHECK(static_cast<bool>(a[i].regularizer()) == static_cast<bool>(b[i].regularizer()));
        CHECK(static_cast<bool>(a[i].constraint()) == static_cast<bool>(b[i].constraint()));
        if (a[i].constraint()) check_close(values(b[i].constraint()(b[i].value())),
                                           values(a[i].constraint()(a[i].value())), 0.0);
      }
    }
    const Tensor x = kind == "embedding" ? i64({1, 2, 3, 4, 0, 6, 5, 1}, {2, 4})
                     : kind == "dense"   ? randn({3, 4}, 1)
                     : kind == "conv"    ? randn({2, 6, 6, 2}, 2)
                                         : randn({2, 5, 3}, 3);
    model(x);
    (*restored)(x);
    check_close({sum_of(restored->losses())}, {sum_of(model.losses())}, 0.0);
    CHECK(restored->losses().size() == model.losses().size());
    // By hand, Keras loads these archives with their regularizers and constraints (Keras's model.losses after
    // model(x) sums to losses.npy): LOOM_KERAS_ARCHIVE_OUT names the folder to write them in.
    if (const char* out = std::getenv("LOOM_KERAS_ARCHIVE_OUT")) {
      model.save(fmt::format("{}/regularized_{}_loom.keras", out, kind));
      io::save_npy(fmt::format("{}/regularized_{}_loom_x.npy", out, kind), x);
      io::save_npy(fmt::format("{}/regularized_{}_loom_losses.npy", out, kind),
                   Tensor::scalar(sum_of(model.losses()), DType::f64));
    }
  }
  // The Keras form of each: the classes and arguments, and the axes as Keras writes them.
  L::reset_layer_names();
  Tensor in = L::Input({3}, {.dtype = DType::f64});
  Model model(in, L::Dense(2, {.kernel_regularizer = R::orthogonal_regularizer(0.2, "columns"),
                               .bias_regularizer = "l1_l2",
                               .kernel_constraint = C::min_max_norm(0.1, 0.9, 0.5, {0, 1}),
                               .bias_constraint = C::unit_norm({})})(in));
  const std::string path = dir.file("forms.keras");
  model.save(path);
  auto restored = models::load_model(path);
  const auto& dense = dynamic_cast<const L::Dense&>(*restored->layers().back());
  CHECK(dense.options().kernel_regularizer.describe() == "OrthogonalRegularizer(factor=0.2, mode='columns')");
  CHECK(dense.options().bias_regularizer.describe() == "L1L2(l1=0.01, l2=0.01)");
  CHECK(dense.options().kernel_constraint.describe() ==
        "MinMaxNorm(min_value=0.1, max_value=0.9, rate=0.5, axis=[0, 1])");
  CHECK(dense.options().bias_constraint.describe() == "UnitNorm(axis=None)");
}

TEST_CASE("callable regularizers and constraints work but cannot be saved", "[regularizers][constraints]") {
  L::reset_layer_names();
  Tensor in = L::Input({3}, {.dtype = DType::f64});
  Model model(in, L::Dense(2, {.kernel_initializer = "ones",
                               .kernel_regularizer = [](const Tensor& w) { return ops::sum(w) * 0.5; },
                               .bias_constraint = [](const Tensor& b) { return b + 1.0; }})(in));
  REQUIRE(model.losses().size() == 1);
  CHECK(model.losses()[0].item<double>() == 3.0);
  const TempDir dir("regularizers");
  run_bad_inputs("saving callables", {
      {"a callable regularizer", [&] { model.save(dir.file("callable.keras")); },
       {"callable regularizer cannot be saved"}},
  });
}

TEST_CASE("regularizers reject bad input", "[regularizers][bad_input]") {
  const Tensor cube = randn({2, 3, 4}, 5);
  run_bad_inputs("regularizers", {
      {"a negative l1", [] { R::l1(-0.1); }, {"L1", "l1", "-0.1", ">= 0"}},
      {"a NaN l2", [] { R::l2(std::nan("")); }, {"L2", "l2", "nan"}},
      {"a negative l1_l2 factor", [] { R::l1_l2(0.1, -2.0); }, {"L1L2", "l2", "-2"}},
      {"an infinite orthogonal factor", [] { R::orthogonal_regularizer(kInf); },
       {"OrthogonalRegularizer", "factor", "inf"}},
      {"an unknown orthogonal mode", [] { R::orthogonal_regularizer(0.1, "diagonal"); },
       {"OrthogonalRegularizer", "mode", "'diagonal'", "'rows' or 'columns'"}},
      {"an unknown name", [] { L::Regularizer("l3"); }, {"Regularizer", "unknown regularizer 'l3'", "l1", "l2"}},
      {"orthogonal on a rank-3 tensor", [&] { R::orthogonal_regularizer()(cube); },
       {"OrthogonalRegularizer(factor=0.01, mode='rows')", "rank-2", "[2, 3, 4]"}},
      {"orthogonal on a rank-3 kernel",
       [] {
         L::EinsumDense layer("ab,bcd->acd", {2, 3}, {.kernel_regularizer = "orthogonal_regularizer", .name = "proj"});
         layer(randn({2, 4}, 1));
       },
       {"proj", "weight 'kernel'", "OrthogonalRegularizer", "rank-2", "[4, 2, 3]"}},
      {"orthogonal rows of a one-row kernel",
       [] {
         L::Dense layer(3, {.kernel_regularizer = "orthogonal_regularizer", .name = "single"});
         layer(randn({2, 1}, 1));
       },
       {"single", "weight 'kernel'", "at least 2 rows", "[1, 3]"}},
      {"a callable returning integers",
       [] {
         const L::Regularizer r = [](const Tensor& x) { return Tensor::zeros(x.shape(), DType::i64); };
         r(randn({2}, 1));
       },
       {"callable", "floating", "i64"}},
      {"add_loss of a symbolic tensor",
       [] {
         L::Dense layer(2);
         layer.add_loss(L::Input({3}));
       },
       {"add_loss", "symbolic", "[-1, 3]"}},
  });
}
