// The Functional API: symbolic inputs, layers and ops recording graph nodes, Model(inputs, outputs), checked
// against Keras (tests/fixtures/make_functional_fixtures.py): the layer order, the summary table with its
// "Connected to" column, and predictions for the same weights.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "loom.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

namespace {

struct FunctionalFixture {
  std::vector<std::string> layers, operations;
  std::map<int, std::string> summaries;                        // by line length
  std::vector<std::pair<std::string, Tensor>> weights;         // (layer, value) in file order
  std::vector<Tensor> inputs, outputs;
};

Tensor read_array(std::istringstream& in) {
  std::size_t rank = 0;
  in >> rank;
  Shape shape(rank);
  for (auto& d : shape) in >> d;
  std::vector<double> values(std::size_t(numel(shape)));
  for (auto& v : values) in >> v;
  return Tensor::from_vector(values, shape);
}

std::map<std::string, FunctionalFixture> read_functional_fixtures() {
  std::ifstream file(std::string(LOOM_FIXTURES_DIR) + "/functional_fixtures.txt");
  REQUIRE(file.good());
  std::map<std::string, FunctionalFixture> cases;
  FunctionalFixture* current = nullptr;
  for (std::string line; std::getline(file, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string key;
    in >> key;
    if (key == "case") {
      std::string name;
      in >> name;
      current = &cases[name];
      continue;
    }
    REQUIRE(current != nullptr);
    if (key == "layers" || key == "operations") {
      auto& names = key == "layers" ? current->layers : current->operations;
      for (std::string name; in >> name;) names.push_back(name);
    } else if (key == "summary") {
      int length = 0, count = 0;
      in >> length >> count;
      std::string text;
      for (int i = 0; i < count; ++i) {
        std::string row;
        REQUIRE(std::getline(file, row));
        text += row + "\n";
      }
      current->summaries[length] = text;
    } else if (key == "weight") {
      std::string layer;
      in >> layer;
      current->weights.emplace_back(layer, read_array(in));
    } else if (key == "input") {
      current->inputs.push_back(read_array(in));
    } else if (key == "output") {
      current->outputs.push_back(read_array(in));
    } else {
      FAIL("unknown fixture line: " << line);
    }
  }
  return cases;
}

const FunctionalFixture& fixture(const std::string& name) {
  static const auto cases = read_functional_fixtures();
  INFO("fixture case " << name);
  REQUIRE(cases.count(name) == 1);
  return cases.at(name);
}

/// Assigns the fixture's weights layer by layer, in each layer's weight order (Keras's layer.weights: its
/// sub-layers' too).
void assign_weights(Model& model, const FunctionalFixture& f) {
  std::map<std::string, std::size_t> next;
  for (const auto& [layer_name, value] : f.weights) {
    auto own = model.get_layer(layer_name)->weights();
    const std::size_t i = next[layer_name]++;
    REQUIRE(i < own.size());
    INFO(layer_name << " weight " << i);
    REQUIRE(own[i].value().shape() == value.shape());
    own[i].assign(value.to(own[i].dtype()));
  }
  for (const auto& layer : model.layers()) CHECK(next[layer->name()] == layer->weights().size());
}

std::vector<std::string> names_of(const std::vector<std::shared_ptr<L::Layer>>& layers) {
  std::vector<std::string> out;
  for (const auto& layer : layers) out.push_back(layer->name());
  return out;
}

void check_summaries(const Model& model, const FunctionalFixture& f) {
  for (const auto& [length, text] : f.summaries) {
    INFO("line_length " << length);
    CHECK(model.summary_string({.line_length = length}) == text);
  }
}

/// two_towers of make_functional_fixtures.py.
Model two_towers() {
  Tensor a = L::Input({4}, {.dtype = DType::f64});
  Tensor b = L::Input({4}, {.dtype = DType::f64});
  auto shared = std::make_shared<L::Dense>(3, L::DenseOptions{.activation = "sigmoid"});  // the model shares it
  Tensor ha = (*shared)(a), hb = (*shared)(b);
  Tensor s = ops::relu(ha + hb) * ha;
  Tensor r = ops::reshape(s, {-1, 3, 1});
  Tensor n = L::LayerNormalization({.axis = -2})(r);
  Tensor out1 = L::Dense(2)(L::Flatten()(n));
  Tensor out2 = L::Dense(1, {.activation = "sigmoid"})(ha - hb);
  return Model({a, b}, {out1, out2});
}

}  // namespace

TEST_CASE("Input gives a symbolic tensor with the batch dimension free and no data", "[functional]") {
  Tensor x = L::Input({12}, {.dtype = DType::i64, .name = "tokens"});
  CHECK(graph::is_symbolic(x));
  CHECK(x.shape() == Shape{-1, 12});
  CHECK(x.dtype() == DType::i64);
  CHECK(graph::origin(x).node->name == "tokens");
  CHECK(graph::origin(x).node->class_name == "InputLayer");
  CHECK_THROWS_WITH(x.to_vector<double>(), Catch::Contains("symbolic") && Catch::Contains("[-1, 12]"));
  CHECK(to_string(x) == "KerasTensor(shape=[-1, 12], dtype=i64)");
  Tensor y = L::Input({3}, {.batch_size = 8});
  CHECK(y.shape() == Shape{8, 3});
  CHECK(y.dtype() == DType::f32);
}

TEST_CASE("Ops on symbolic tensors become graph nodes with the shapes they will have", "[functional]") {
  L::reset_layer_names();
  Tensor x = L::Input({-1, 6});  // [batch, steps, 6], both free
  Tensor y = ops::reshape(ops::relu(x * 2.0 + 1.0), {-1, 2, 3});
  CHECK(graph::is_symbolic(y));
  CHECK(y.shape() == Shape{-1, 2, 3});
  CHECK(graph::origin(y).node->name == "reshape");
  CHECK(ops::relu(x).shape() == Shape{-1, -1, 6});
  Tensor m = ops::mean(y, {-1});
  CHECK(m.shape() == Shape{-1, 2});
  Tensor t = ops::concat({m, m}, -1);
  CHECK(t.shape() == Shape{-1, 4});
  // A shape error shows when the graph is built, with the op's own message.
  Tensor z = L::Input({5});
  CHECK_THROWS_WITH(L::Dense(3)(z) + L::Dense(4)(z), Catch::Contains("add") && Catch::Contains("[-1, 3]") &&
                                                          Catch::Contains("[-1, 4]"));
}

TEST_CASE("A Functional model computes what its layers and ops compute on data", "[functional]") {
  L::reset_layer_names();
  Tensor a = L::Input({4}, {.dtype = DType::f64});
  L::Dense dense(3, {.activation = "tanh"});
  L::LayerNormalization norm;
  Tensor h = dense(a);
  Tensor y = norm(ops::relu(h) + h);
  Model model(a, y);
  CHECK(model.name() == "functional");
  CHECK(model.is_functional());
  CHECK(names_of(model.layers()) == std::vector<std::string>{"input_layer", "dense", "layer_normalization"});
  CHECK(model.weights().size() == 4);
  const Tensor x = randn({5, 4}, 1);
  const Tensor want = norm(ops::relu(dense(x)) + dense(x));
  check_close(values(model(x)), values(want));
  check_close(values(model.predict(x, {.verbose = 0})), values(want));
  CHECK(model.get_layer("dense").get() == &dense);
  CHECK_THROWS_WITH(model.get_layer("conv"), Catch::Contains("conv") && Catch::Contains("dense"));
  CHECK_THROWS_WITH(model(randn({5, 3}, 2)), Catch::Contains("[-1, 4]") && Catch::Contains("[5, 3]"));
}

TEST_CASE("Functional models match Keras: layer order, summary and predictions", "[functional]") {
  SECTION("two inputs, a shared layer, ops between layers, two outputs") {
    L::reset_layer_names();
    Model model = two_towers();
    const auto& f = fixture("two_towers");
    CHECK(names_of(model.layers()) == f.layers);
    check_summaries(model, f);
    assign_weights(model, f);
    const auto outputs = model(f.inputs);
    REQUIRE(outputs.size() == f.outputs.size());
    // Keras on JAX takes LayerNormalization's rsqrt from XLA's CPU kernel, good to about 1e-7 in float64.
    for (std::size_t i = 0; i < outputs.size(); ++i) check_close(values(outputs[i]), values(f.outputs[i]), 1e-6);
  }
  SECTION("a chain prints as Keras prints a Sequential") {
    L::reset_layer_names();
    Tensor x = L::Input({6}, {.dtype = DType::f64});
    Tensor h = L::Dropout(0.5)(L::Dense(8, {.activation = "relu"})(x));
    Model model(x, L::Dense(3, {.activation = "softmax"})(h));
    const auto& f = fixture("chain");
    CHECK(names_of(model.layers()) == f.layers);
    check_summaries(model, f);
    assign_weights(model, f);
    check_close(values(model.predict(f.inputs[0], {.verbose = 0})), values(f.outputs[0]), 1e-12);
  }
  SECTION("Embedding's mask reaches the attention") {
    L::reset_layer_names();
    Tensor tokens = L::Input({6}, {.dtype = DType::i64});
    L::Embedding embedding(20, 8, {.mask_zero = true});
    embedding.maybe_build({-1, 6}, DType::f64);  // Keras's float64 policy; the layers after it follow
    Tensor e = embedding(tokens);
    Tensor att = L::MultiHeadAttention({.num_heads = 2, .key_dim = 4})(e, e);
    Tensor h = L::LayerNormalization()(e + att);
    Model model(tokens, L::Dense(3)(h));
    CHECK(e.keras_mask().defined());
    CHECK(e.keras_mask().shape() == Shape{-1, 6});
    const auto& f = fixture("masked_attention");
    CHECK(names_of(model.layers()) == f.layers);
    check_summaries(model, f);
    assign_weights(model, f);
    // Padding tokens attend no key: Keras's fused path then averages every value, loom (as Keras's manual
    // path, docs/layers.md) attends nothing; the rows of real tokens agree.
    const Tensor ids = f.inputs[0].to(DType::i64);
    const auto got = values(model.predict(ids, {.verbose = 0})), want = values(f.outputs[0]);
    const auto id = values(ids);
    for (std::size_t token = 0; token < id.size(); ++token)
      if (id[token] != 0)
        for (std::size_t c = 0; c < 3; ++c) CHECK(got[token * 3 + c] == Approx(want[token * 3 + c]).margin(1e-6));
  }
}

TEST_CASE("A shared layer is one set of weights, and a Functional model nests as a layer", "[functional]") {
  L::reset_layer_names();
  Tensor a = L::Input({4}, {.dtype = DType::f64});
  Tensor b = L::Input({4}, {.dtype = DType::f64});
  L::Dense shared(2);
  Model twice({a, b}, {shared(a) + shared(b)});
  CHECK(twice.weights().size() == 2);
  const Tensor xa = randn({3, 4}, 3), xb = randn({3, 4}, 4);
  check_close(values(twice({xa, xb})[0]), values(shared(xa) + shared(xb)));

  // Outputs by name (Keras's dict) come in the names' order.
  Model named({a, b}, std::map<std::string, Tensor>{{"sum", a + b}, {"difference", a - b}});
  CHECK(named.output_names() == std::vector<std::string>{"difference", "sum"});
  const auto both = named({xa, xb});
  check_close(values(both[0]), values(xa - xb));
  check_close(values(both[1]), values(xa + xb));
  CHECK(twice.output_names() == std::vector<std::string>{"add"});

  // The model as a layer of another: called on symbolic tensors it is one node.
  Tensor c = L::Input({4}, {.dtype = DType::f64});
  Tensor d = L::Input({4}, {.dtype = DType::f64});
  Tensor inner = twice({c, d})[0];
  Model outer({c, d}, L::Dense(1)(inner));
  CHECK(outer.layers().size() == 4);  // two inputs, the inner model, the Dense
  CHECK(outer.get_layer(twice.name()).get() == &twice);
  const Tensor want = (*outer.get_layer("dense_1"))(shared(xa) + shared(xb));
  check_close(values(outer({xa, xb})[0]), values(want));
}

TEST_CASE("A Functional model trains with fit and inside a GradientTape", "[functional]") {
  L::reset_layer_names();
  random::set_seed(3);
  Tensor x = L::Input({3});
  Tensor h = L::Dense(16, {.activation = "relu"})(x);
  Model model(x, L::Dense(1)(h + L::Dense(16)(x)));
  const Tensor inputs = Tensor::uniform({64, 3}, -1, 1, DType::f32, 5);
  const Tensor targets = ops::sum(inputs * inputs, {1}, true);
  model.compile({.optimizer = optim::Adam({.learning_rate = 1e-2}), .loss = "mse"});
  const History history = model.fit(inputs, targets, {.batch_size = 16, .epochs = 20, .verbose = 0});
  CHECK(history.history.at("loss").back() < 0.5 * history.history.at("loss").front());

  // A tape sees the graph's ops as ops on data: the gradients are those of the layers called directly.
  GradientTape tape;
  const Tensor loss = ops::mean(ops::square(model(inputs, true) - targets));
  const auto grads = tape.gradient(loss, model.trainable_weights());
  REQUIRE(grads.size() == 6);
  for (const auto& g : grads) CHECK(g.defined());
}

TEST_CASE("Bad graphs give errors naming the model and the tensors", "[functional]") {
  L::reset_layer_names();
  Tensor a = L::Input({4});
  Tensor b = L::Input({4});
  Tensor y = L::Dense(2)(a + b);
  CHECK_THROWS_WITH(Model(a, y), Catch::Contains("disconnected") && Catch::Contains("input_layer_1"));
  CHECK_THROWS_WITH(Model(a, Tensor::zeros({2, 2})), Catch::Contains("output 0") &&
                                                          Catch::Contains("not a symbolic tensor"));
  CHECK_THROWS_WITH(Model(Tensor::zeros({2, 4}), y), Catch::Contains("input 0") &&
                                                          Catch::Contains("not a symbolic tensor"));
  Tensor c = L::Input({4}, {.name = "same"});
  Tensor d = L::Input({4}, {.name = "same"});
  CHECK_THROWS_WITH(Model({c, d}, {c + d}), Catch::Contains("\"same\" is used 2 times"));
}

TEST_CASE("A layer object called on symbolic tensors must outlive the model", "[functional]") {
  L::reset_layer_names();
  Tensor x = L::Input({4});
  std::optional<L::Dense> dense(L::Dense(2));
  Tensor y = (*dense)(x);
  Model model(x, y);
  L::Dense moved = std::move(*dense);  // the model follows the layer where it moves
  CHECK(model.get_layer("dense").get() == &moved);
  CHECK(model(Tensor::ones({1, 4})).shape() == Shape{1, 2});
  dense.reset();

  std::optional<Model> orphan;
  {
    L::Dense temporary_owner(2);
    orphan.emplace(x, temporary_owner(x));
  }
  CHECK_THROWS_WITH((*orphan)(Tensor::ones({1, 4})), Catch::Contains("destroyed"));
}

TEST_CASE("Keras masks travel on tensors through the layers that support them", "[functional]") {
  L::Embedding embedding(10, 4, {.mask_zero = true});
  const Tensor ids = Tensor::from_vector(std::vector<std::int64_t>{3, 5, 0, 0, 2, 7, 1, 0}, {2, 4});
  const Tensor e = embedding(ids);
  REQUIRE(e.keras_mask().defined());
  CHECK(values(e.keras_mask()) == std::vector<double>{1, 1, 0, 0, 1, 1, 1, 0});
  CHECK(L::Dense(3)(e).keras_mask().defined());       // supports masking: passes it on
  CHECK(!L::Flatten()(e).keras_mask().defined());     // does not: drops it
  CHECK(!(e * 2.0).keras_mask().defined());           // ops drop it, as keras.ops
  // MultiHeadAttention takes the inputs' masks as its query and value masks, and gives the output the query's.
  L::MultiHeadAttention mha({.num_heads = 2, .key_dim = 2});
  const Tensor out = mha(e, e);
  REQUIRE(out.keras_mask().defined());
  const Tensor plain = e.with_keras_mask({});
  const Tensor explicit_masks = mha(plain, plain, {.query_mask = e.keras_mask(), .value_mask = e.keras_mask()});
  check_close(values(out), values(explicit_masks), 1e-12);
  CHECK_FALSE(values(out) == values(mha(plain, plain)));
}
