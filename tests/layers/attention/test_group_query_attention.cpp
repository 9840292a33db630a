// GroupQueryAttention: values, scores and gradients against Keras (tests/fixtures/make_gqa_fixtures.py) on
// every attention path, Keras's weights, equality with MultiHeadAttention on repeated key/value kernels,
// float64 gradchecks, dropout, masks carried by tensors, symbolic calls in Functional models, bad input.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "framework/runtime/simd.hpp"
#include "loom.hpp"
#include "tests/fixture_reader.hpp"
#include "tests/setting_guards.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

namespace {

std::vector<FixtureCase> read_cases() {
  auto cases = read_fixture_cases("gqa_fixtures.txt");
  for (const auto& c : cases) {
    INFO("case " << c.name);
    REQUIRE(c.words.empty());
  }
  return cases;
}

std::vector<std::string> weight_paths(const FixtureCase& c) {
  std::vector<std::string> paths;
  for (const auto& name : c.array_names)
    if (name.rfind("weight:", 0) == 0) paths.push_back(name.substr(7));
  return paths;
}

L::GroupQueryAttentionOptions options_of(const FixtureCase& c, ops::AttentionImpl impl) {
  const auto& o = c.options;
  L::GroupQueryAttentionOptions options{.head_dim = std::stoll(o.at("head_dim")),
                                        .num_query_heads = std::stoll(o.at("num_query_heads")),
                                        .num_key_value_heads = std::stoll(o.at("num_key_value_heads"))};
  options.use_bias = o.at("use_bias") == "1";
  options.use_gate = o.at("use_gate") == "1";
  if (o.at("sliding_window") != "0") options.sliding_window = std::stoll(o.at("sliding_window"));
  options.flash_attention = impl;
  return options;
}

struct Inputs {
  Tensor query, value;
  L::GroupQueryAttentionCall call;
};

Inputs inputs_of(const FixtureCase& c, DType dtype) {
  Inputs in;
  in.query = c.array("query").tensor(dtype);
  in.value = c.has("value") ? c.array("value").tensor(dtype) : in.query;
  if (c.has("key")) in.call.key = c.array("key").tensor(dtype);
  auto mask = [&](const char* name) {
    return c.has(name) ? ops::cast(c.array(name).tensor(), DType::boolean) : Tensor();
  };
  in.call.query_mask = mask("query_mask");
  in.call.value_mask = mask("value_mask");
  in.call.key_mask = mask("key_mask");
  in.call.attention_mask = mask("attention_mask");
  in.call.use_causal_mask = c.option("causal") == "1";
  return in;
}

L::GroupQueryAttention layer_for(const FixtureCase& c, DType dtype, ops::AttentionImpl impl) {
  L::GroupQueryAttention gqa(options_of(c, impl));
  const Inputs in = inputs_of(c, dtype);
  gqa(in.query, in.value, in.call);
  const auto weights = gqa.weights();
  const auto paths = weight_paths(c);
  REQUIRE(weights.size() == paths.size());
  for (std::size_t i = 0; i < weights.size(); ++i) {
    CHECK(weights[i].name() == gqa.name() + "/" + paths[i]);
    const FixtureArray& a = c.array("weight:" + paths[i]);
    REQUIRE(weights[i].shape() == a.shape);
    Variable(weights[i]).assign(a.tensor(dtype));
  }
  return gqa;
}

/// sum(output * cotangent) and its gradients w.r.t. the inputs and every weight.
std::map<std::string, Tensor> gradients(L::GroupQueryAttention& gqa, const FixtureCase& c, bool with_scores) {
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
    sources.push_back(gqa.weights()[i].value());
    names.push_back("grad:" + paths[i]);
  }
  const Tensor out = with_scores ? gqa.call_with_scores(in.query, in.value, in.call).output
                                 : gqa(in.query, in.value, in.call);
  const auto grads = tape.gradient(ops::sum(out * c.array("cotangent").tensor()), sources);
  std::map<std::string, Tensor> out_grads;
  for (std::size_t i = 0; i < grads.size(); ++i) out_grads[names[i]] = grads[i];
  return out_grads;
}

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

const std::vector<std::pair<const char*, ops::AttentionImpl>> kPaths{
    {"auto", ops::AttentionImpl::Auto}, {"math", ops::AttentionImpl::Math}, {"flash", ops::AttentionImpl::Flash}};

void gradcheck_layer(L::GroupQueryAttention& gqa, const std::vector<Tensor>& inputs, const TensorFn& fn) {
  std::vector<Tensor> all = inputs;
  for (const auto& w : gqa.trainable_weights()) all.push_back(w.value());
  require_gradcheck(fn, all);
}

}  // namespace

TEST_CASE("GroupQueryAttention matches Keras on the reference fixtures (float64)", "[layers][gqa]") {
  const auto cases = read_cases();
  REQUIRE(cases.size() >= 10);
  for (const FixtureCase& c : cases)
    for (const auto& [path, impl] : kPaths) {
      INFO("case " << c.name << ", " << path);
      L::GroupQueryAttention gqa = layer_for(c, DType::f64, impl);
      CHECK(gqa.count_params() == std::stoll(c.option("count_params")));
      const Inputs in = inputs_of(c, DType::f64);
      const auto [output, scores] = gqa.call_with_scores(in.query, in.value, in.call);
      check_close(values(output), c.array("output").values, kRtol64, kAtol64);
      REQUIRE(scores.shape() == c.array("scores").shape);
      check_close(values(scores), c.array("scores").values, kRtol64, kAtol64);
      // The plain call is Keras's fused path, which softmaxes in float32 on JAX and averages the values of a
      // fully masked query row where the manual path gives zero weights.
      const bool empty_row = has_empty_row(c.array("scores"));
      const Tensor plain = gqa(in.query, in.value, in.call);
      check_close(values(plain), c.array("output_fused").values, 1e-5, 1e-6);
      if (!empty_row) check_close(values(plain), c.array("output").values, kRtol64, kAtol64);
      for (const auto& [name, grad] : gradients(gqa, c, /*with_scores=*/true)) {
        INFO("gradients through call_with_scores: " << name);
        REQUIRE(grad.shape() == c.array(name).shape);
        check_close(values(grad), c.array(name).values, kRtol64, kAtol64);
      }
      for (const auto& [name, grad] : gradients(gqa, c, /*with_scores=*/false)) {
        INFO("gradients through the plain call: " << name);
        const std::string fused = "grad_fused:" + name.substr(5);
        REQUIRE(grad.shape() == c.array(fused).shape);
        check_close(values(grad), c.array(fused).values, 1e-5, 1e-5);
        if (!empty_row) check_close(values(grad), c.array(name).values, kRtol64, kAtol64);
      }
    }
}

TEST_CASE("GroupQueryAttention matches Keras in float32 on every path and SIMD level", "[layers][gqa]") {
  for (const FixtureCase& c : read_cases())
    for (const auto& [path, impl] : kPaths)
      for (const std::string& isa : simd::available_isas()) {
        if (impl != ops::AttentionImpl::Flash && isa != simd::available_isas().front()) continue;
        INFO("case " << c.name << ", " << path << " " << isa);
        IsaGuard guard(isa);
        L::GroupQueryAttention gqa = layer_for(c, DType::f32, impl);
        const Inputs in = inputs_of(c, DType::f32);
        const auto [output, scores] = gqa.call_with_scores(in.query, in.value, in.call);
        CHECK(output.dtype() == DType::f32);
        check_close(values(output), c.array("output").values, 1e-5, 1e-5);
        check_close(values(scores), c.array("scores").values, 1e-5, 1e-5);
        check_close(values(gqa(in.query, in.value, in.call)), c.array("output_fused").values, 1e-5, 1e-5);
      }
}

TEST_CASE("GroupQueryAttention has Keras's weights, names and defaults", "[layers][gqa]") {
  L::reset_layer_names();
  L::GroupQueryAttention gqa({.head_dim = 8, .num_query_heads = 4, .num_key_value_heads = 2});
  CHECK(gqa.name() == "grouped_query_attention");
  CHECK(gqa.class_name() == "GroupQueryAttention");
  CHECK(gqa.weights().empty());
  CHECK(gqa.head_dim() == 8);
  CHECK(gqa.num_query_heads() == 4);
  CHECK(gqa.num_key_value_heads() == 2);
  CHECK(gqa.dropout() == 0.0);
  CHECK(gqa.use_bias());
  CHECK_FALSE(gqa.use_gate());
  CHECK_FALSE(gqa.sliding_window());
  CHECK(gqa.flash_attention() == ops::AttentionImpl::Auto);
  CHECK(gqa.supports_masking());
  const Tensor x = Tensor::randn({3, 5, 16}, DType::f32, 1);
  CHECK(gqa(x, x).shape() == Shape{3, 5, 16});
  CHECK(gqa.compute_output_shape({3, 5, 16}) == Shape{3, 5, 16});
  CHECK(gqa.count_params() == 1616);  // Keras's count for this layer on width 16 (make_gqa_fixtures.py)
  const std::vector<std::pair<std::string, Shape>> expected{
      {"query/kernel", {16, 4, 8}},           {"query/bias", {4, 8}},     {"key/kernel", {16, 2, 8}},
      {"key/bias", {2, 8}},                   {"value/kernel", {16, 2, 8}}, {"value/bias", {2, 8}},
      {"attention_output/kernel", {4, 8, 16}}, {"attention_output/bias", {16}}};
  const auto w = gqa.weights();
  REQUIRE(w.size() == expected.size());
  for (std::size_t i = 0; i < w.size(); ++i) {
    CHECK(w[i].name() == "grouped_query_attention/" + expected[i].first);
    CHECK(w[i].shape() == expected[i].second);
  }
  // glorot_uniform with EinsumDense's fans: fan_in = 16, fan_out = 2 * 8 for the key kernel.
  const double limit = std::sqrt(6.0 / (16 + 16));
  for (double v : values(w[2].value())) CHECK(std::abs(v) <= limit);
  for (double v : values(w[3].value())) CHECK(v == 0.0);
  CHECK(gqa.layers().size() == 4);
  CHECK(gqa.query_dense()->name() == "query");
  CHECK(gqa.key_dense()->name() == "key");
  CHECK(gqa.value_dense()->name() == "value");
  CHECK(gqa.output_dense()->name() == "attention_output");
  CHECK(gqa.gate_dense() == nullptr);
}

TEST_CASE("GroupQueryAttention equals MultiHeadAttention with its key and value kernels repeated over the heads",
          "[layers][gqa]") {
  // Keras's definition: the projected keys and values repeated num_query_heads / num_key_value_heads times
  // along the heads, so key/value head h / 3 serves query head h.
  const Tensor q = randn({2, 4, 5}, 31), v = randn({2, 6, 3}, 32);
  const Tensor mask = ops::greater(Tensor::uniform({2, 4, 6}, 0, 1, DType::f64, 33), Tensor::scalar(0.3, DType::f64));
  for (const auto& [path, impl] : kPaths) {
    INFO(path);
    L::GroupQueryAttention gqa({.head_dim = 2, .num_query_heads = 6, .num_key_value_heads = 2,
                                .sliding_window = 3, .flash_attention = impl, .use_gate = true});
    L::MultiHeadAttention mha({.num_heads = 6, .key_dim = 2, .sliding_window = 3, .flash_attention = impl,
                               .use_gate = true});
    gqa(q, v);
    mha(q, v);
    for (const auto& w : gqa.weights()) Variable(w).assign(randn(w.shape(), 34) * 0.5);
    const Tensor index = Tensor::from_vector(std::vector<std::int64_t>{0, 0, 0, 1, 1, 1}, Shape{6});
    const auto gw = gqa.weights(), mw = mha.weights();
    REQUIRE(gw.size() == mw.size());
    for (std::size_t i = 0; i < gw.size(); ++i) {
      const bool kv = gw[i].name().find("/key/") != std::string::npos ||
                      gw[i].name().find("/value/") != std::string::npos;
      const Tensor w = gw[i].value();
      Variable(mw[i]).assign(kv ? ops::take(w, index, w.ndim() == 3 ? 1 : 0) : w);
    }
    for (bool causal : {false, true}) {
      const L::GroupQueryAttentionCall call{.attention_mask = mask, .use_causal_mask = causal};
      const auto a = gqa.call_with_scores(q, v, call), b = mha.call_with_scores(q, v, call);
      check_close(values(a.output), values(b.output), 1e-12);
      check_close(values(a.scores), values(b.scores), 1e-12);
      check_close(values(gqa(q, v, call)), values(mha(q, v, call)), 1e-12);
    }
  }
}

TEST_CASE("GroupQueryAttention gradcheck w.r.t. query, value, key and every weight", "[layers][gqa]") {
  const Tensor q = randn({2, 2, 3}, 40), v = randn({2, 3, 2}, 41), k = randn({2, 3, 4}, 42);
  const Tensor mask = ops::cast(f64({1, 1, 0, 0, 1, 1, 1, 0, 1, 0, 0, 0}, {2, 2, 3}), DType::boolean);
  for (const auto& [path, impl] : kPaths) {
    INFO(path);
    L::GroupQueryAttention gqa({.head_dim = 2, .num_query_heads = 4, .num_key_value_heads = 2,
                                .flash_attention = impl, .use_gate = true});
    gqa(q, v, {.key = k});
    for (const auto& w : gqa.weights()) Variable(w).assign(w.value() + randn(w.shape(), 43) * 0.1);
    gradcheck_layer(gqa, {q, v, k}, [&](const std::vector<Tensor>& in) {
      return gqa(in[0], in[1], {.key = in[2], .attention_mask = mask, .use_causal_mask = true});
    });
    gradcheck_layer(gqa, {q, v, k}, [&](const std::vector<Tensor>& in) {
      return gqa.call_with_scores(in[0], in[1], {.key = in[2], .attention_mask = mask}).output;
    });
  }
  // The scores (math path: differentiable), multi-query attention with a window, self-attention.
  L::GroupQueryAttention mqa({.head_dim = 2, .num_query_heads = 3, .num_key_value_heads = 1, .sliding_window = 2,
                              .flash_attention = false});
  const Tensor x = randn({1, 4, 3}, 44);
  mqa(x);
  for (const auto& w : mqa.weights()) Variable(w).assign(w.value() + randn(w.shape(), 45) * 0.1);
  gradcheck_layer(mqa, {x}, [&](const std::vector<Tensor>& in) { return mqa(in[0]); });
  gradcheck_layer(mqa, {x}, [&](const std::vector<Tensor>& in) {
    return mqa.call_with_scores(in[0], in[0], {.use_causal_mask = true}).scores;
  });
}

TEST_CASE("GroupQueryAttention dropout acts on the probabilities only while training", "[layers][gqa]") {
  const Tensor x = randn({2, 4, 4}, 50);
  auto make = [&](double rate) {
    L::GroupQueryAttention g({.head_dim = 2, .num_query_heads = 4, .num_key_value_heads = 2, .dropout = rate,
                              .seed = 3});
    g(x);
    return g;
  };
  L::GroupQueryAttention a = make(0.5), b = make(0.5), plain = make(0.0);
  for (std::size_t i = 0; i < a.weights().size(); ++i) {
    Variable(b.weights()[i]).assign(a.weights()[i].value());
    Variable(plain.weights()[i]).assign(a.weights()[i].value());
  }
  check_close(values(a(x, x)), values(plain(x, x)), 1e-12);  // inference: no dropout
  const auto [train1, scores1] = a.call_with_scores(x, x, {.training = true});
  const Tensor train2 = a(x, x, {.training = true});
  CHECK(values(train1) != values(train2));  // a new mask per call
  check_close(values(b.call_with_scores(x, x, {.training = true}).output), values(train1), 1e-15);  // same seed
  check_close(values(scores1), values(plain.call_with_scores(x, x).scores), 1e-12);  // scores before dropout
  // Training with dropout is differentiable (the math probabilities).
  GradientTape tape;
  tape.watch(x);
  const Tensor g = tape.gradient(ops::sum(a(x, x, {.training = true})), {x})[0];
  for (double value : values(g)) CHECK(std::isfinite(value));
}

TEST_CASE("GroupQueryAttention takes the masks its inputs carry and gives the output the query's",
          "[layers][gqa]") {
  L::Embedding embedding(10, 4, {.mask_zero = true});
  const Tensor ids = Tensor::from_vector(std::vector<std::int64_t>{3, 5, 0, 0, 2, 7, 1, 0}, {2, 4});
  const Tensor e = embedding(ids);
  L::GroupQueryAttention gqa({.head_dim = 2, .num_query_heads = 2, .num_key_value_heads = 1});
  const Tensor out = gqa(e, e);
  REQUIRE(out.keras_mask().defined());
  check_close(values(out.keras_mask()), values(e.keras_mask()));
  const Tensor plain = e.with_keras_mask({});
  check_close(values(out), values(gqa(plain, plain, {.query_mask = e.keras_mask(), .value_mask = e.keras_mask()})),
              1e-12);
  CHECK_FALSE(values(out) == values(gqa(plain, plain)));
}

TEST_CASE("GroupQueryAttention on symbolic tensors builds Functional models", "[layers][gqa][functional]") {
  L::reset_layer_names();
  Tensor query = loom::Input({5, 6}, {.dtype = DType::f64});
  Tensor value = loom::Input({7, 3}, {.dtype = DType::f64});
  L::GroupQueryAttention gqa({.head_dim = 2, .num_query_heads = 4, .num_key_value_heads = 2, .name = "gqa"});
  const auto symbolic = gqa.call_with_scores(query, value, {.use_causal_mask = true});
  CHECK(symbolic.output.shape() == Shape{-1, 5, 6});
  CHECK(symbolic.scores.shape() == Shape{-1, 4, 5, 7});
  loom::Model model({query, value}, {symbolic.output, symbolic.scores});
  const Tensor q = randn({2, 5, 6}, 60), v = randn({2, 7, 3}, 61);
  const auto got = model.predict({q, v}, {.verbose = 0});
  REQUIRE(got.size() == 2);
  const auto eager = gqa.call_with_scores(q, v, {.use_causal_mask = true});
  check_close(values(got[0]), values(eager.output), 1e-12);
  check_close(values(got[1]), values(eager.scores), 1e-12);

  // A temporary moves into the graph; an Embedding's mask reaches it through the graph.
  Tensor tokens = loom::Input({4}, {.dtype = DType::i64});
  L::Embedding embedding(10, 4, {.mask_zero = true});
  embedding.maybe_build({-1, 4}, DType::f64);
  Tensor e = embedding(tokens);
  Tensor att = L::GroupQueryAttention({.head_dim = 2, .num_query_heads = 2, .num_key_value_heads = 1})(e, e);
  CHECK(att.shape() == Shape{-1, 4, 4});
  CHECK(att.keras_mask().defined());
  loom::Model masked(tokens, att);
  const Tensor ids = Tensor::from_vector(std::vector<std::int64_t>{3, 5, 0, 0, 2, 7, 1, 0}, {2, 4});
  const Tensor once = masked.predict(ids, {.verbose = 0});
  auto& inner = dynamic_cast<L::GroupQueryAttention&>(*masked.layers().back());
  check_close(values(once), values(inner(embedding(ids), embedding(ids))), 1e-12);
}

TEST_CASE("GroupQueryAttention rejects bad options and inputs with the layer name and shapes", "[layers][gqa]") {
  using Catch::Contains;
  REQUIRE_THROWS_WITH(L::GroupQueryAttention({.head_dim = 0, .num_query_heads = 2, .num_key_value_heads = 1,
                                              .name = "g0"}),
                      Contains("g0") && Contains("head_dim"));
  REQUIRE_THROWS_WITH(L::GroupQueryAttention({.head_dim = 2, .num_query_heads = 0, .num_key_value_heads = 1}),
                      Contains("num_query_heads"));
  REQUIRE_THROWS_WITH(L::GroupQueryAttention({.head_dim = 2, .num_query_heads = 2, .num_key_value_heads = -1}),
                      Contains("num_key_value_heads"));
  REQUIRE_THROWS_WITH(L::GroupQueryAttention({.head_dim = 2, .num_query_heads = 4, .num_key_value_heads = 3,
                                              .name = "g43"}),
                      Contains("g43") && Contains("divisible") && Contains("4") && Contains("3"));
  REQUIRE_THROWS_WITH(L::GroupQueryAttention({.head_dim = 2, .num_query_heads = 2, .num_key_value_heads = 1,
                                              .dropout = 1.0}),
                      Contains("dropout"));
  REQUIRE_THROWS_WITH(L::GroupQueryAttention({.head_dim = 2, .num_query_heads = 2, .num_key_value_heads = 1,
                                              .sliding_window = 0}),
                      Contains("sliding_window"));
  REQUIRE_THROWS_WITH(L::GroupQueryAttention({.head_dim = 2, .num_query_heads = 2, .num_key_value_heads = 1,
                                              .dropout = 0.1, .flash_attention = true}),
                      Contains("Dropout is not supported when flash attention"));

  L::GroupQueryAttention gqa({.head_dim = 2, .num_query_heads = 2, .num_key_value_heads = 1, .name = "bad"});
  const Tensor q = randn({2, 3, 4}, 70), v = randn({2, 5, 4}, 71);
  REQUIRE_THROWS_WITH(gqa(randn({3, 4}, 1), randn({3, 4}, 1)), Contains("bad") && Contains("rank 3") &&
                                                                   Contains("[3, 4]"));
  REQUIRE_THROWS_WITH(gqa(randn({1, 2, 3, 4}, 1), randn({1, 2, 3, 4}, 1)),
                      Contains("bad") && Contains("rank 3") && Contains("[1, 2, 3, 4]"));
  REQUIRE_THROWS_WITH(gqa(q, v, {.key = randn({2, 4, 4}, 1)}),
                      Contains("bad") && Contains("[2, 5, 4]") && Contains("[2, 4, 4]"));
  CHECK_FALSE(gqa.built());
  gqa(q, v);
  REQUIRE_THROWS_WITH(gqa(q, randn({3, 5, 4}, 1)), Contains("bad") && Contains("batch size") &&
                                                       Contains("[3, 5, 4]"));
  REQUIRE_THROWS_WITH(gqa(q, randn({2, 5, 7}, 1)), Contains("bad") && Contains("feature sizes") &&
                                                       Contains("[2, 5, 7]"));
  REQUIRE_THROWS_WITH(gqa(q.to(DType::f32), v.to(DType::f32)), Contains("bad") && Contains("f32"));
  REQUIRE_THROWS_WITH(gqa(q, v.to(DType::f32)), Contains("bad") && Contains("float64"));
  REQUIRE_THROWS_WITH(gqa(q, v, {.attention_mask = Tensor::ones({2, 3, 4}, DType::boolean)}),
                      Contains("bad") && Contains("attention_mask") && Contains("[2, 3, 4]") &&
                          Contains("[2, 3, 5]"));
  CHECK(gqa(q, v, {.attention_mask = Tensor::ones({2, 1, 3, 5}, DType::boolean)}).shape() == Shape{2, 3, 4});
  REQUIRE_THROWS_WITH(gqa(q, v, {.attention_mask = Tensor::ones({2, 3, 3, 5}, DType::boolean)}),
                      Contains("attention_mask") && Contains("[2, 3, 3, 5]") && Contains("[2, 2, 3, 5]"));
  REQUIRE_THROWS_WITH(gqa(q, v, {.query_mask = Tensor::ones({2, 5}, DType::boolean)}),
                      Contains("bad") && Contains("query_mask") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(gqa(q, v, {.value_mask = Tensor::ones({2, 3}, DType::boolean)}),
                      Contains("value_mask") && Contains("[2, 5]"));
  REQUIRE_THROWS_WITH(gqa(q, v, {.key_mask = Tensor::ones({5}, DType::boolean)}), Contains("key_mask"));
  REQUIRE_THROWS_WITH(gqa.compute_output_shape({3, 4}), Contains("bad") && Contains("rank 3"));
}
