// GroupQueryAttention: Keras's weights and shapes, grouped heads equal to key/value heads repeated as Keras
// repeats them, equal to MultiHeadAttention when every query head has its own key/value head, float64
// gradcheck, and use on symbolic tensors.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "loom.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

namespace {

/// Repeats each head of a [.., heads, head_dim] projection weight `times` times along its heads axis, as
/// Keras's ops.repeat(key, repeats, axis=2) repeats the projected keys.
Tensor repeat_heads(const Tensor& w, std::int64_t times) {
  const std::int64_t axis = w.ndim() - 2;
  std::vector<Tensor> parts;
  for (std::int64_t h = 0; h < w.shape()[std::size_t(axis)]; ++h)
    for (std::int64_t r = 0; r < times; ++r) parts.push_back(ops::slice(w, axis, h, h + 1));
  return ops::concat(parts, axis);
}

}  // namespace

TEST_CASE("GroupQueryAttention has Keras's weights, in Keras's order", "[layers][attention][gqa]") {
  L::GroupQueryAttention gqa({.head_dim = 3, .num_query_heads = 4, .num_key_value_heads = 2});
  const Tensor q = randn({2, 5, 6}, 1), v = randn({2, 7, 6}, 2);
  CHECK(gqa(q, v).shape() == Shape{2, 5, 6});
  const auto w = gqa.weights();
  REQUIRE(w.size() == 8);
  const std::vector<Shape> shapes = {{6, 4, 3}, {4, 3}, {6, 2, 3}, {2, 3}, {6, 2, 3}, {2, 3}, {4, 3, 6}, {6}};
  for (std::size_t i = 0; i < w.size(); ++i) CHECK(w[i].shape() == shapes[i]);
  CHECK(gqa.class_name() == "GroupQueryAttention");
  CHECK_THROWS_WITH(L::GroupQueryAttention({.head_dim = 3, .num_query_heads = 4, .num_key_value_heads = 3}),
                    Catch::Contains("4") && Catch::Contains("3"));
}

TEST_CASE("GroupQueryAttention's groups equal key/value heads repeated as Keras repeats them",
          "[layers][attention][gqa]") {
  const Tensor q = randn({2, 5, 6}, 3), v = randn({2, 7, 6}, 4);
  for (bool causal : {false, true}) {
    for (ops::AttentionImpl impl : {ops::AttentionImpl(false), ops::AttentionImpl(true)}) {
      INFO("causal " << causal);
      L::GroupQueryAttention grouped({.head_dim = 3, .num_query_heads = 4, .num_key_value_heads = 2,
                                      .flash_attention = impl});
      L::GroupQueryAttention repeated({.head_dim = 3, .num_query_heads = 4, .num_key_value_heads = 4,
                                       .flash_attention = impl});
      grouped.maybe_build(q.shape(), DType::f64);
      repeated.maybe_build(q.shape(), DType::f64);
      const Tensor y0 = grouped(q, v, {.use_causal_mask = causal});
      repeated(q, v);
      auto g = grouped.weights(), r = repeated.weights();
      for (std::size_t i = 0; i < g.size(); ++i) {
        const bool key_or_value = i >= 2 && i < 6;
        r[i].assign(key_or_value ? repeat_heads(g[i].value(), 2) : g[i].value());
      }
      check_close(values(repeated(q, v, {.use_causal_mask = causal})), values(y0), 1e-12);
    }
  }
}

TEST_CASE("GroupQueryAttention with a key/value head per query head is MultiHeadAttention",
          "[layers][attention][gqa]") {
  const Tensor q = randn({2, 5, 6}, 5), v = randn({2, 7, 6}, 6);
  L::GroupQueryAttention gqa({.head_dim = 3, .num_query_heads = 2, .num_key_value_heads = 2});
  L::MultiHeadAttention mha({.num_heads = 2, .key_dim = 3});
  const Tensor y = gqa(q, v);
  mha(q, v);
  auto g = gqa.weights(), m = mha.weights();
  REQUIRE(g.size() == m.size());
  for (std::size_t i = 0; i < g.size(); ++i) m[i].assign(g[i].value());
  check_close(values(mha(q, v)), values(y), 1e-12);
}

TEST_CASE("GroupQueryAttention passes float64 gradcheck, with masks", "[layers][attention][gqa]") {
  L::GroupQueryAttention gqa({.head_dim = 2, .num_query_heads = 2, .num_key_value_heads = 1});
  const Tensor q = randn({1, 3, 4}, 7), v = randn({1, 4, 4}, 8);
  gqa(q, v);
  const Tensor mask = Tensor::from_vector(std::vector<double>{1, 1, 0, 1}, Shape{1, 4}).to(DType::boolean);
  require_gradcheck([&](const std::vector<Tensor>& in) { return gqa(in[0], in[1], {.value_mask = mask}); },
                    {q, v});
  auto w = gqa.trainable_weights();
  require_gradcheck(
      [&](const std::vector<Tensor>& in) {
        w[2].assign(in[0]);
        return gqa(q, v, {.use_causal_mask = true});
      },
      {w[2].value()});
}

TEST_CASE("GroupQueryAttention on symbolic tensors is a node of a Functional model", "[layers][attention][gqa]") {
  L::reset_layer_names();
  Tensor x = L::Input({5, 6}, {.dtype = DType::f64});
  auto gqa = std::make_shared<L::GroupQueryAttention>(
      L::GroupQueryAttentionOptions{.head_dim = 3, .num_query_heads = 4, .num_key_value_heads = 2});
  Tensor y = (*gqa)(x, x, {.use_causal_mask = true});
  CHECK(y.shape() == Shape{-1, 5, 6});
  Model model(x, y);
  const Tensor data = randn({2, 5, 6}, 9);
  check_close(values(model.predict(data, {.verbose = 0})), values((*gqa)(data, data, {.use_causal_mask = true})),
              1e-12);
}
