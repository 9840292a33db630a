#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <sstream>
#include <string>

#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "layers/attention/multi_head_attention.hpp"
#include "tests/fixture_reader.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

namespace {

/// The cases of tests/fixtures/mha_fixtures.txt (see make_mha_fixtures.py for the format).
std::vector<FixtureCase> read_cases() {
  auto cases = read_fixture_cases("mha_fixtures.txt");
  for (const auto& c : cases) {
    INFO("case " << c.name);
    REQUIRE(c.words.empty());  // every setting is a key=value option
  }
  return cases;
}

/// The case's weight paths in the fixture's (Keras's) order.
std::vector<std::string> weight_paths(const FixtureCase& c) {
  std::vector<std::string> paths;
  for (const auto& name : c.array_names)
    if (name.rfind("weight:", 0) == 0) paths.push_back(name.substr(7));
  return paths;
}

std::vector<std::int64_t> integers(const std::string& text, char separator) {
  std::vector<std::int64_t> out;
  std::istringstream in(text);
  for (std::string part; std::getline(in, part, separator);) out.push_back(std::stoll(part));
  return out;
}

L::MultiHeadAttentionOptions options_of(const FixtureCase& c) {
  const auto& o = c.options;
  L::MultiHeadAttentionOptions options{.num_heads = std::stoll(o.at("num_heads")),
                                       .key_dim = std::stoll(o.at("key_dim"))};
  if (o.at("value_dim") != "none") options.value_dim = std::stoll(o.at("value_dim"));
  if (o.at("output_shape") != "none") options.output_shape = Shape(integers(o.at("output_shape"), 'x'));
  if (o.at("attention_axes") != "none") options.attention_axes = integers(o.at("attention_axes"), ',');
  if (o.at("sliding_window") != "0") options.sliding_window = std::stoll(o.at("sliding_window"));
  options.use_bias = o.at("use_bias") == "1";
  options.use_gate = o.at("use_gate") == "1";
  return options;
}

/// The case's inputs in `dtype`, fresh tensors (so a tape can watch them).
struct Inputs {
  Tensor query, value;
  L::MultiHeadAttentionCall call;
};

Inputs inputs_of(const FixtureCase& c, DType dtype) {
  Inputs in;
  in.query = c.arrays.at("query").tensor(dtype);
  in.value = c.has("value") ? c.arrays.at("value").tensor(dtype) : in.query;
  if (c.has("key")) in.call.key = c.arrays.at("key").tensor(dtype);
  auto mask = [&](const char* name) { return c.has(name) ? ops::cast(c.arrays.at(name).tensor(), DType::boolean) : Tensor(); };
  in.call.query_mask = mask("query_mask");
  in.call.value_mask = mask("value_mask");
  in.call.key_mask = mask("key_mask");
  in.call.attention_mask = mask("attention_mask");
  in.call.use_causal_mask = c.options.at("causal") == "1";
  return in;
}

/// A layer built for the case, holding the fixture's weights in `dtype`.
L::MultiHeadAttention layer_for(const FixtureCase& c, DType dtype) {
  L::MultiHeadAttention mha(options_of(c));
  const Inputs in = inputs_of(c, dtype);
  mha(in.query, in.value, in.call);
  const auto weights = mha.weights();
  const auto paths = weight_paths(c);
  REQUIRE(weights.size() == paths.size());
  for (std::size_t i = 0; i < weights.size(); ++i) {
    CHECK(weights[i].name() == mha.name() + "/" + paths[i]);
    const FixtureArray& a = c.arrays.at("weight:" + paths[i]);
    REQUIRE(weights[i].shape() == a.shape);
    Variable(weights[i]).assign(a.tensor(dtype));
  }
  return mha;
}

/// sum(output * cotangent) and its gradients w.r.t. the inputs and every weight, by either path.
std::map<std::string, Tensor> gradients(L::MultiHeadAttention& mha, const FixtureCase& c, bool with_scores) {
  Inputs in = inputs_of(c, DType::f64);
  GradientTape tape;
  std::vector<Tensor> sources{in.query};
  std::vector<std::string> names{"grad:query"};
  if (c.has("value")) {
    sources.push_back(in.value);
    names.push_back("grad:value");
  }
  if (c.has("key")) {
    sources.push_back(in.call.key);
    names.push_back("grad:key");
  }
  tape.watch(sources);
  const auto paths = weight_paths(c);
  for (std::size_t i = 0; i < paths.size(); ++i) {
    sources.push_back(mha.weights()[i].value());
    names.push_back("grad:" + paths[i]);
  }
  const Tensor out = with_scores ? mha.call_with_scores(in.query, in.value, in.call).output
                                 : mha(in.query, in.value, in.call);
  const Tensor loss = ops::sum(out * c.arrays.at("cotangent").tensor());
  const auto grads = tape.gradient(loss, sources);
  std::map<std::string, Tensor> out_grads;
  for (std::size_t i = 0; i < grads.size(); ++i) out_grads[names[i]] = grads[i];
  return out_grads;
}

/// True when some query row of the scores attends no key (all zeros).
bool has_empty_row(const FixtureArray& scores) {
  const std::int64_t s = scores.shape.back();
  for (std::size_t row = 0; row < scores.values.size(); row += std::size_t(s)) {
    double total = 0;
    for (std::int64_t j = 0; j < s; ++j) total += scores.values[row + std::size_t(j)];
    if (total == 0.0) return true;
  }
  return false;
}

constexpr double kRtol64 = 1e-9, kAtol64 = 1e-11;

Tensor rand64(const Shape& shape, std::uint64_t seed) { return randn(shape, seed); }

/// gradcheck of fn w.r.t. the given inputs and every trainable weight of the layer.
void gradcheck_layer(L::MultiHeadAttention& mha, const std::vector<Tensor>& inputs,
                     const std::function<Tensor(const std::vector<Tensor>&)>& fn) {
  std::vector<Tensor> all = inputs;
  for (const auto& w : mha.trainable_weights()) all.push_back(w.value());
  require_gradcheck(fn, all);
}

}  // namespace

TEST_CASE("MultiHeadAttention matches Keras on the reference fixtures (float64)", "[layers][multi_head_attention]") {
  const auto cases = read_cases();
  REQUIRE(cases.size() >= 14);
  for (const FixtureCase& c : cases) {
    INFO("case " << c.name);
    L::MultiHeadAttention mha = layer_for(c, DType::f64);
    CHECK(mha.count_params() == std::stoll(c.option("count_params")));
    const Inputs in = inputs_of(c, DType::f64);
    const auto [output, scores] = mha.call_with_scores(in.query, in.value, in.call);
    check_close(values(output), c.arrays.at("output").values, kRtol64, kAtol64);
    REQUIRE(scores.shape() == c.arrays.at("scores").shape);
    check_close(values(scores), c.arrays.at("scores").values, kRtol64, kAtol64);

    // The plain call takes the fused path (rank 3). Where every query row has a key, computed in float64, it
    // matches Keras's manual path; a fully masked row averages the values there as in Keras's fused path (which
    // softmaxes in float32), where the manual path gives zeros.
    const bool empty_row = has_empty_row(c.arrays.at("scores"));
    const Tensor plain = mha(in.query, in.value, in.call);
    if (!empty_row) check_close(values(plain), c.arrays.at("output").values, kRtol64, kAtol64);
    if (c.has("output_fused")) check_close(values(plain), c.arrays.at("output_fused").values, 1e-5, 1e-6);

    for (bool with_scores : {true, false}) {
      if (!with_scores && empty_row) continue;  // Keras's gradients are the manual path's
      INFO("gradients through " << (with_scores ? "the manual path" : "the plain call"));
      for (const auto& [name, grad] : gradients(mha, c, with_scores)) {
        INFO(name);
        REQUIRE(grad.shape() == c.arrays.at(name).shape);
        check_close(values(grad), c.arrays.at(name).values, kRtol64, kAtol64);
      }
    }
  }
}

TEST_CASE("MultiHeadAttention matches Keras on the reference fixtures (float32)", "[layers][multi_head_attention]") {
  for (const FixtureCase& c : read_cases()) {
    INFO("case " << c.name);
    L::MultiHeadAttention mha = layer_for(c, DType::f32);
    const Inputs in = inputs_of(c, DType::f32);
    const auto [output, scores] = mha.call_with_scores(in.query, in.value, in.call);
    CHECK(output.dtype() == DType::f32);
    check_close(values(output), c.arrays.at("output").values, 1e-4, 1e-4);
    check_close(values(scores), c.arrays.at("scores").values, 1e-4, 1e-4);
    const bool empty_row = has_empty_row(c.arrays.at("scores"));
    check_close(values(mha(in.query, in.value, in.call)), c.arrays.at(empty_row ? "output_fused" : "output").values,
                1e-4, 1e-4);
  }
}

TEST_CASE("MultiHeadAttention has Keras's weights: 284 parameters for 2 heads of 2 on width 16",
          "[layers][multi_head_attention]") {
  L::MultiHeadAttention mha({.num_heads = 2, .key_dim = 2, .name = "mha"});
  CHECK(mha.weights().empty());
  const Tensor x = Tensor::randn({3, 5, 16}, DType::f32, 1);
  CHECK(mha(x, x).shape() == Shape{3, 5, 16});
  CHECK(mha.count_params() == 284);
  const auto w = mha.trainable_weights();
  REQUIRE(w.size() == 8);
  CHECK(mha.non_trainable_weights().empty());
  const std::vector<std::pair<std::string, Shape>> expected{
      {"mha/query/kernel", {16, 2, 2}}, {"mha/query/bias", {2, 2}},
      {"mha/key/kernel", {16, 2, 2}},   {"mha/key/bias", {2, 2}},
      {"mha/value/kernel", {16, 2, 2}}, {"mha/value/bias", {2, 2}},
      {"mha/attention_output/kernel", {2, 2, 16}}, {"mha/attention_output/bias", {16}}};
  for (std::size_t i = 0; i < w.size(); ++i) {
    CHECK(w[i].name() == expected[i].first);
    CHECK(w[i].shape() == expected[i].second);
  }
  // Keras's default kernels are glorot_uniform with EinsumDense's fans: fan_in = D, fan_out = heads * key_dim.
  const double limit = std::sqrt(6.0 / (16 + 4));
  for (double v : values(w[0].value())) CHECK(std::abs(v) <= limit);
  for (double v : values(w[1].value())) CHECK(v == 0.0);
  CHECK(mha.query_dense() != nullptr);
  CHECK(mha.gate_dense() == nullptr);
  CHECK(mha.layers().size() == 4);
}

TEST_CASE("MultiHeadAttention weight shapes follow value_dim, output_shape, key width and use_gate",
          "[layers][multi_head_attention]") {
  L::MultiHeadAttention mha({.num_heads = 3, .key_dim = 4, .value_dim = 5, .use_bias = true,
                             .output_shape = Shape{2, 7}, .use_gate = true});
  const Tensor q = Tensor::randn({2, 3, 6}, DType::f32, 1), v = Tensor::randn({2, 4, 8}, DType::f32, 2),
               k = Tensor::randn({2, 4, 9}, DType::f32, 3);
  CHECK(mha(q, v, {.key = k}).shape() == Shape{2, 3, 2, 7});
  CHECK(mha.compute_output_shape(q.shape()) == Shape{2, 3, 2, 7});
  const std::vector<std::pair<std::string, Shape>> expected{
      {"query/kernel", {6, 3, 4}},  {"query/bias", {3, 4}}, {"key/kernel", {9, 3, 4}},   {"key/bias", {3, 4}},
      {"gate/kernel", {6, 3, 5}},   {"gate/bias", {3, 5}},  {"value/kernel", {8, 3, 5}}, {"value/bias", {3, 5}},
      {"attention_output/kernel", {3, 5, 2, 7}},             {"attention_output/bias", {2, 7}}};
  const auto w = mha.weights();
  REQUIRE(w.size() == expected.size());
  for (std::size_t i = 0; i < w.size(); ++i) {
    CHECK(w[i].name() == mha.name() + "/" + expected[i].first);
    CHECK(w[i].shape() == expected[i].second);
  }

  L::MultiHeadAttention no_bias({.num_heads = 2, .key_dim = 3, .use_bias = false, .output_shape = 5});
  CHECK(no_bias(q, q).shape() == Shape{2, 3, 5});
  CHECK(no_bias.weights().size() == 4);
  CHECK(no_bias.count_params() == 6 * 6 * 3 + 6 * 5);
  CHECK(no_bias.compute_output_shape({7, 1, 6}) == Shape{7, 1, 5});
}

TEST_CASE("MultiHeadAttention scores are probabilities with masked keys at zero", "[layers][multi_head_attention]") {
  L::MultiHeadAttention mha({.num_heads = 2, .key_dim = 3});
  const Tensor q = rand64({2, 3, 4}, 1), v = rand64({2, 5, 4}, 2);
  Tensor mask = Tensor::ones({2, 3, 5}, DType::f64);
  mask.data<double>()[1 * 5 + 2] = 0;                                            // batch 0, query 1, key 2
  for (int j = 0; j < 5; ++j) mask.data<double>()[15 + 2 * 5 + j] = 0;           // batch 1, query 2: none
  const auto [out, scores] =
      mha.call_with_scores(q, v, {.attention_mask = ops::cast(mask, DType::boolean), .use_causal_mask = true});
  REQUIRE(scores.shape() == Shape{2, 2, 3, 5});
  CHECK(out.shape() == Shape{2, 3, 4});
  const auto p = values(scores);
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t h = 0; h < 2; ++h)
      for (std::int64_t i = 0; i < 3; ++i) {
        double total = 0;
        for (std::int64_t j = 0; j < 5; ++j) {
          const double pij = p[std::size_t(((b * 2 + h) * 3 + i) * 5 + j)];
          total += pij;
          const bool allowed = j <= i && mask.data<double>()[(b * 3 + i) * 5 + j] != 0;  // causal, top-left
          if (!allowed) CHECK(pij == 0.0);
          else CHECK(pij > 0.0);
        }
        CHECK(total == Approx(b == 1 && i == 2 ? 0.0 : 1.0).margin(1e-12));
      }
  // The fully masked query row attends nothing: its output is the output projection's bias alone.
  const auto o = values(out);
  const auto bias = values(mha.output_dense()->bias().value());
  for (std::size_t e = 0; e < 4; ++e) CHECK(o[(3 + 2) * 4 + e] == Approx(bias[e]).margin(1e-12));
}

TEST_CASE("MultiHeadAttention sliding_window keeps a band and query/value/key masks combine",
          "[layers][multi_head_attention]") {
  L::MultiHeadAttention mha({.num_heads = 1, .key_dim = 2, .sliding_window = 2});
  const Tensor x = rand64({1, 4, 3}, 3);
  const Tensor value_mask = ops::cast(f64({1, 1, 1, 0}, {1, 4}), DType::boolean);
  const Tensor query_mask = ops::cast(f64({1, 0, 1, 1}, {1, 4}), DType::boolean);
  const auto p = values(mha.call_with_scores(x, x, {.query_mask = query_mask, .value_mask = value_mask}).scores);
  for (std::int64_t i = 0; i < 4; ++i)
    for (std::int64_t j = 0; j < 4; ++j) {
      const bool allowed = std::abs(i - j) < 2 && j != 3 && i != 1;
      CHECK((p[std::size_t(i * 4 + j)] > 0.0) == allowed);
    }
  // key_mask is ANDed like value_mask.
  const auto p2 = values(mha.call_with_scores(x, x, {.query_mask = query_mask, .key_mask = value_mask}).scores);
  check_close(p2, p);
}

/// The fused call against the manual path's output and scores [B, heads, T, S]: equal on every query row that
/// has a key in every head; a row with none averages the values on the fused path (Keras's fused path) and is
/// zeros on the manual path (Keras's), so it is not compared. Returns the number of rows compared.
std::int64_t check_paths_agree(const Tensor& fused, const L::AttentionWithScores& manual) {
  const std::int64_t batch = manual.scores.size(0), heads = manual.scores.size(1), t = manual.scores.size(2),
                     s = manual.scores.size(3), width = fused.size(2);
  const auto p = values(manual.scores), got = values(fused), want = values(manual.output);
  std::int64_t compared = 0;
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t i = 0; i < t; ++i) {
      bool every_head_has_a_key = true;
      for (std::int64_t h = 0; h < heads; ++h) {
        double total = 0;
        for (std::int64_t j = 0; j < s; ++j) total += p[std::size_t(((b * heads + h) * t + i) * s + j)];
        every_head_has_a_key = every_head_has_a_key && total > 0.5;
      }
      if (!every_head_has_a_key) continue;
      ++compared;
      for (std::int64_t e = 0; e < width; ++e) {
        const auto at = std::size_t((b * t + i) * width + e);
        CHECK(got[at] == Approx(want[at]).margin(1e-12));
      }
    }
  return compared;
}

TEST_CASE("MultiHeadAttention fused and manual paths agree", "[layers][multi_head_attention]") {
  const Tensor q = rand64({2, 4, 5}, 4), v = rand64({2, 6, 3}, 5), k = rand64({2, 6, 2}, 6);
  const Tensor mask = ops::greater(Tensor::uniform({2, 4, 6}, 0, 1, DType::f64, 7), Tensor::scalar(0.3, DType::f64));
  for (const auto& flash : {std::optional<bool>{}, std::optional<bool>{false}}) {
    L::MultiHeadAttention mha({.num_heads = 3, .key_dim = 2, .value_dim = 4, .sliding_window = 3,
                               .flash_attention = flash});
    for (bool causal : {false, true}) {
      const L::MultiHeadAttentionCall call{.key = k, .attention_mask = mask, .use_causal_mask = causal};
      CHECK(check_paths_agree(mha(q, v, call), mha.call_with_scores(q, v, call)) > 0);
      const L::MultiHeadAttentionCall structural_only{.key = k, .use_causal_mask = causal};
      check_close(values(mha(q, v, structural_only)), values(mha.call_with_scores(q, v, structural_only).output),
                  1e-12);
    }
    // A [T, S] mask and a per-head [B, heads, T, S] one.
    const Tensor ts = ops::greater(Tensor::uniform({4, 6}, 0, 1, DType::f64, 8), Tensor::scalar(0.2, DType::f64));
    const Tensor per_head =
        ops::greater(Tensor::uniform({2, 3, 4, 6}, 0, 1, DType::f64, 9), Tensor::scalar(0.2, DType::f64));
    for (const Tensor& m : {ts, per_head}) {
      const L::MultiHeadAttentionCall call{.key = k, .value_mask = ops::cast(f64({1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1},
                                                                                 {2, 6}),
                                                                             DType::boolean),
                                           .attention_mask = m};
      CHECK(check_paths_agree(mha(q, v, call), mha.call_with_scores(q, v, call)) > 0);
    }
  }
}

TEST_CASE("MultiHeadAttention's plain call averages the values for a fully masked query row, as Keras's fused path",
          "[layers][multi_head_attention]") {
  for (const auto& flash : {std::optional<bool>{}, std::optional<bool>{true}, std::optional<bool>{false}}) {
    L::MultiHeadAttention mha({.num_heads = 2, .key_dim = 3, .flash_attention = flash});
    const Tensor q = rand64({2, 3, 4}, 21), v = rand64({2, 5, 4}, 22);
    Tensor mask = Tensor::ones({2, 3, 5}, DType::f64);
    for (int j = 0; j < 5; ++j) mask.data<double>()[15 + 1 * 5 + j] = 0;  // batch 1, query 1: no key
    const Tensor out = mha(q, v, {.attention_mask = ops::cast(mask, DType::boolean)});
    // Uniform attention: the mean of the projected values, through the output projection.
    const Tensor mean_value = ops::mean((*mha.value_dense())(v), {1}, /*keepdims=*/true);  // [2, 1, 2, 3]
    const auto want = values((*mha.output_dense())(mean_value));                            // [2, 1, 4]
    const auto got = values(out);
    for (std::size_t e = 0; e < 4; ++e) CHECK(got[(3 + 1) * 4 + e] == Approx(want[4 + e]).margin(1e-12));
  }
}

TEST_CASE("MultiHeadAttention single-tensor call is self-attention", "[layers][multi_head_attention]") {
  L::MultiHeadAttention mha({.num_heads = 2, .key_dim = 3});
  const Tensor x = rand64({2, 3, 4}, 8);
  const Tensor y = mha(x);
  CHECK(y.shape() == Shape{2, 3, 4});
  check_close(values(y), values(mha(x, x)), 1e-15);
  check_close(values(mha(x, /*training=*/true)), values(y), 1e-15);
  CHECK(mha.compute_output_shape(x.shape()) == y.shape());
}

TEST_CASE("MultiHeadAttention gradcheck w.r.t. query, value, key and every weight", "[layers][multi_head_attention]") {
  const Tensor q = rand64({2, 2, 3}, 10), v = rand64({2, 3, 2}, 11), k = rand64({2, 3, 4}, 12);
  const Tensor mask = ops::cast(f64({1, 1, 0, 0, 1, 1, 1, 0, 1, 0, 0, 0}, {2, 2, 3}), DType::boolean);
  L::MultiHeadAttention mha({.num_heads = 2, .key_dim = 2, .value_dim = 3, .output_shape = Shape{2, 2},
                             .use_gate = true});
  mha(q, v, {.key = k});
  for (const auto& w : mha.weights()) Variable(w).assign(w.value() + rand64(w.shape(), 13) * 0.1);  // non-zero biases
  SECTION("fused path, mask with a fully masked row, causal") {
    gradcheck_layer(mha, {q, v, k}, [&](const std::vector<Tensor>& in) {
      return mha(in[0], in[1], {.key = in[2], .attention_mask = mask, .use_causal_mask = true});
    });
  }
  SECTION("manual path: output and scores") {
    gradcheck_layer(mha, {q, v, k}, [&](const std::vector<Tensor>& in) {
      return mha.call_with_scores(in[0], in[1], {.key = in[2], .attention_mask = mask}).output;
    });
    gradcheck_layer(mha, {q, v, k}, [&](const std::vector<Tensor>& in) {
      return mha.call_with_scores(in[0], in[1], {.key = in[2], .use_causal_mask = true}).scores;
    });
  }
  SECTION("self-attention, one input") {
    L::MultiHeadAttention self({.num_heads = 1, .key_dim = 2, .sliding_window = 1});
    const Tensor x = rand64({1, 3, 2}, 14);
    self(x);
    gradcheck_layer(self, {x}, [&](const std::vector<Tensor>& in) { return self(in[0]); });
  }
}

TEST_CASE("MultiHeadAttention over rank-4 inputs and attention_axes", "[layers][multi_head_attention]") {
  const Tensor q = rand64({1, 2, 3, 2}, 15), v = rand64({1, 2, 2, 3}, 16);
  L::MultiHeadAttention both({.num_heads = 2, .key_dim = 2});
  const auto [out, scores] = both.call_with_scores(q, v);
  CHECK(out.shape() == Shape{1, 2, 3, 2});
  CHECK(scores.shape() == Shape{1, 2, 2, 3, 2, 2});  // [B, heads, X_q, Y_q, X_s, Y_s]
  gradcheck_layer(both, {q, v}, [&](const std::vector<Tensor>& in) { return both(in[0], in[1]); });

  L::MultiHeadAttention last({.num_heads = 1, .key_dim = 2, .attention_axes = std::vector<std::int64_t>{-2}});
  CHECK(last.call_with_scores(q, v).scores.shape() == Shape{1, 2, 1, 3, 2});  // attention over axis 2 only
  gradcheck_layer(last, {q, v}, [&](const std::vector<Tensor>& in) { return last(in[0], in[1]); });
}

TEST_CASE("MultiHeadAttention dropout acts on the probabilities only while training",
          "[layers][multi_head_attention]") {
  const Tensor x = rand64({2, 4, 4}, 17);
  L::MultiHeadAttention a({.num_heads = 2, .key_dim = 2, .dropout = 0.5, .seed = 3});
  L::MultiHeadAttention b({.num_heads = 2, .key_dim = 2, .dropout = 0.5, .seed = 3});
  a(x);
  b(x);
  for (std::size_t i = 0; i < a.weights().size(); ++i) Variable(b.weights()[i]).assign(a.weights()[i].value());
  L::MultiHeadAttention plain({.num_heads = 2, .key_dim = 2});
  plain(x);
  for (std::size_t i = 0; i < a.weights().size(); ++i) Variable(plain.weights()[i]).assign(a.weights()[i].value());

  check_close(values(a(x, x)), values(plain(x, x)), 1e-12);  // inference: no dropout
  const auto [train1, scores1] = a.call_with_scores(x, x, {.training = true});
  const Tensor train2 = a(x, x, {.training = true});
  CHECK(values(train1) != values(train2));                             // a new mask per call
  check_close(values(b.call_with_scores(x, x, {.training = true}).output), values(train1), 1e-15);  // same seed
  // The returned scores are taken before dropout.
  check_close(values(scores1), values(plain.call_with_scores(x, x).scores), 1e-12);
}

TEST_CASE("MultiHeadAttention flash_attention: dropout is an error as in Keras, scores work", "[layers][multi_head_attention]") {
  REQUIRE_THROWS_WITH(L::MultiHeadAttention({.num_heads = 2, .key_dim = 2, .dropout = 0.1, .flash_attention = true,
                                             .name = "flashy"}),
                      Catch::Contains("flashy") && Catch::Contains("Dropout is not supported when flash attention"));
  // Unlike Keras, flash attention returns scores: recomputed from the kernel's saved logsumexp.
  L::MultiHeadAttention flash({.num_heads = 2, .key_dim = 2, .flash_attention = true, .name = "flash_scores"});
  L::MultiHeadAttention plain({.num_heads = 2, .key_dim = 2, .flash_attention = false});
  const Tensor x = rand64({1, 3, 4}, 18);
  const auto [out, scores] = flash.call_with_scores(x, x, {.use_causal_mask = true});
  (void)plain(x, x);
  for (std::size_t i = 0; i < flash.weights().size(); ++i) plain.weights()[i].assign(flash.weights()[i].value());
  const auto reference = plain.call_with_scores(x, x, {.use_causal_mask = true});
  check_close(values(out), values(reference.output), 1e-12);
  check_close(values(scores), values(reference.scores), 1e-12);
  // flash_attention = false forces the math implementation; with dropout that is fine.
  L::MultiHeadAttention math({.num_heads = 2, .key_dim = 2, .dropout = 0.1, .flash_attention = false});
  CHECK(math(x, x).shape() == Shape{1, 3, 4});
}

TEST_CASE("MultiHeadAttention trains: the loss falls on a tiny task", "[layers][multi_head_attention]") {
  // Target: each position's output is the mean of the values (uniform attention), from a fixed projection.
  L::MultiHeadAttention mha({.num_heads = 2, .key_dim = 4,
                             .kernel_initializer = L::initializers::glorot_uniform(5)});
  const Tensor x = Tensor::randn({4, 5, 6}, DType::f32, 19);
  const Tensor target = ops::broadcast_to(ops::mean(x, {1}, true), x.shape()) * 0.5;
  auto loss_of = [&] { return ops::mean(ops::square(mha(x) - target)); };
  const double before = loss_of().item<double>();
  for (int step = 0; step < 20; ++step) {
    GradientTape tape;
    const Tensor loss = loss_of();
    const auto grads = tape.gradient(loss, mha.trainable_weights());
    const auto weights = mha.trainable_weights();
    for (std::size_t i = 0; i < weights.size(); ++i) Variable(weights[i]).assign_sub(grads[i] * 0.1);
  }
  const double after = loss_of().item<double>();
  CHECK(after < 0.8 * before);
}

TEST_CASE("MultiHeadAttention rejects bad options and inputs with the layer name and shapes",
          "[layers][multi_head_attention]") {
  REQUIRE_THROWS_WITH(L::MultiHeadAttention({.num_heads = 0, .key_dim = 2, .name = "m0"}),
                      Catch::Contains("m0") && Catch::Contains("num_heads"));
  REQUIRE_THROWS_WITH(L::MultiHeadAttention({.num_heads = 2, .key_dim = -1}), Catch::Contains("key_dim"));
  REQUIRE_THROWS_WITH(L::MultiHeadAttention({.num_heads = 2, .key_dim = 2, .value_dim = 0}),
                      Catch::Contains("value_dim"));
  REQUIRE_THROWS_WITH(L::MultiHeadAttention({.num_heads = 2, .key_dim = 2, .dropout = 1.0}),
                      Catch::Contains("dropout"));
  REQUIRE_THROWS_WITH(L::MultiHeadAttention({.num_heads = 2, .key_dim = 2, .output_shape = Shape{2, 0}}),
                      Catch::Contains("output_shape") && Catch::Contains("[2, 0]"));
  REQUIRE_THROWS_WITH(L::MultiHeadAttention({.num_heads = 2, .key_dim = 2, .sliding_window = 0}),
                      Catch::Contains("sliding_window"));

  L::MultiHeadAttention mha({.num_heads = 2, .key_dim = 2, .name = "bad"});
  const Tensor q = rand64({2, 3, 4}, 20), v = rand64({2, 5, 4}, 21);
  REQUIRE_THROWS_WITH(mha(rand64({3, 4}, 1), rand64({3, 4}, 1)),
                      Catch::Contains("bad") && Catch::Contains("rank >= 3") && Catch::Contains("[3, 4]"));
  REQUIRE_THROWS_WITH(mha(q, rand64({2, 5, 4, 1}, 1)), Catch::Contains("bad") && Catch::Contains("same rank"));
  CHECK_FALSE(mha.built());
  mha(q, v);
  REQUIRE_THROWS_WITH(mha(q, rand64({3, 5, 4}, 1)),
                      Catch::Contains("bad") && Catch::Contains("batch size") && Catch::Contains("[3, 5, 4]"));
  REQUIRE_THROWS_WITH(mha(q, rand64({2, 5, 7}, 1)),
                      Catch::Contains("bad") && Catch::Contains("feature sizes") && Catch::Contains("[2, 5, 7]"));
  REQUIRE_THROWS_WITH(mha(q, v, {.key = rand64({2, 4, 4}, 1)}),
                      Catch::Contains("bad") && Catch::Contains("[2, 5, 4]") && Catch::Contains("[2, 4, 4]"));
  REQUIRE_THROWS_WITH(mha(q.to(DType::f32), v.to(DType::f32)), Catch::Contains("bad") && Catch::Contains("f32"));
  REQUIRE_THROWS_WITH(mha(q, v.to(DType::f32)), Catch::Contains("bad") && Catch::Contains("float64"));
  REQUIRE_THROWS_WITH(mha(q, v, {.attention_mask = Tensor::ones({2, 3, 4}, DType::boolean)}),
                      Catch::Contains("bad") && Catch::Contains("attention_mask") && Catch::Contains("[2, 3, 4]") &&
                          Catch::Contains("[2, 3, 5]"));
  REQUIRE_THROWS_WITH(mha(q, v, {.attention_mask = Tensor::ones({5}, DType::boolean)}),
                      Catch::Contains("attention_mask") && Catch::Contains("[5]"));
  REQUIRE_THROWS_WITH(mha(q, v, {.query_mask = Tensor::ones({2, 5}, DType::boolean)}),
                      Catch::Contains("bad") && Catch::Contains("query_mask") && Catch::Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(mha(q, v, {.value_mask = Tensor::ones({2, 3}, DType::boolean)}),
                      Catch::Contains("value_mask") && Catch::Contains("[2, 5]"));
  REQUIRE_THROWS_WITH(mha(q, v, {.key_mask = Tensor::ones({5}, DType::boolean)}), Catch::Contains("key_mask"));

  L::MultiHeadAttention rank4({.num_heads = 1, .key_dim = 2, .name = "r4"});
  const Tensor x4 = rand64({1, 2, 3, 2}, 22);
  REQUIRE_THROWS_WITH(rank4(x4, x4, {.use_causal_mask = true}),
                      Catch::Contains("r4") && Catch::Contains("rank 3") && Catch::Contains("[1, 2, 3, 2]"));
  L::MultiHeadAttention axes({.num_heads = 1, .key_dim = 2, .attention_axes = std::vector<std::int64_t>{3}});
  REQUIRE_THROWS_WITH(axes(x4, x4), Catch::Contains("attention_axes") && Catch::Contains("[1, 2, 3, 2]"));
}
