#include <catch2/catch.hpp>

#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "layers/attention/transformer_encoder.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

namespace {

/// Gives every weight of `layer` seeded random values (non-trivial gammas and biases too).
void randomize(const L::Layer& layer, std::uint64_t seed) {
  for (const auto& w : layer.weights()) Variable(w).assign(Tensor::randn(w.shape(), w.dtype(), seed++) * 0.4);
}

void copy_weights(const L::Layer& from, const L::Layer& to) {
  const auto a = from.weights(), b = to.weights();
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) Variable(b[i]).assign(a[i].value());
}

}  // namespace

TEST_CASE("TransformerEncoder shapes, weight names and order", "[layers][transformer_encoder]") {
  L::TransformerEncoder enc({.num_heads = 2, .ff_dim = 8, .name = "enc"});
  const Tensor x = Tensor::randn({2, 5, 6}, DType::f32, 1);
  CHECK(enc.compute_output_shape(x.shape()) == x.shape());
  CHECK(enc(x).shape() == Shape{2, 5, 6});
  const std::vector<std::pair<std::string, Shape>> expected{
      {"enc/self_attention_layer/query/kernel", {6, 2, 3}},
      {"enc/self_attention_layer/query/bias", {2, 3}},
      {"enc/self_attention_layer/key/kernel", {6, 2, 3}},
      {"enc/self_attention_layer/key/bias", {2, 3}},
      {"enc/self_attention_layer/value/kernel", {6, 2, 3}},
      {"enc/self_attention_layer/value/bias", {2, 3}},
      {"enc/self_attention_layer/attention_output/kernel", {2, 3, 6}},
      {"enc/self_attention_layer/attention_output/bias", {6}},
      {"enc/self_attention_layer_norm/gamma", {6}},
      {"enc/self_attention_layer_norm/beta", {6}},
      {"enc/feedforward_layer_norm/gamma", {6}},
      {"enc/feedforward_layer_norm/beta", {6}},
      {"enc/feedforward_intermediate_dense/kernel", {6, 8}},
      {"enc/feedforward_intermediate_dense/bias", {8}},
      {"enc/feedforward_output_dense/kernel", {8, 6}},
      {"enc/feedforward_output_dense/bias", {6}}};
  const auto w = enc.trainable_weights();
  REQUIRE(w.size() == expected.size());
  for (std::size_t i = 0; i < w.size(); ++i) {
    CHECK(w[i].name() == expected[i].first);
    CHECK(w[i].shape() == expected[i].second);
  }
  CHECK(enc.count_params() == 168 + 24 + (6 * 8 + 8) + (8 * 6 + 6));
  CHECK(enc.attention()->key_dim() == 3);  // d_model / num_heads

  L::TransformerEncoder wide({.num_heads = 2, .key_dim = 5, .d_model = 6, .ff_dim = 4});
  CHECK(wide(x).shape() == x.shape());
  CHECK(wide.attention()->key_dim() == 5);
}

TEST_CASE("TransformerEncoder pre-norm and post-norm equal a hand composition of its children",
          "[layers][transformer_encoder]") {
  const Tensor x = randn({2, 4, 6}, 2);
  const Tensor mask = ops::greater(Tensor::uniform({2, 4, 4}, 0, 1, DType::f64, 3), Tensor::scalar(0.2, DType::f64));
  for (bool norm_first : {true, false}) {
    INFO("norm_first " << norm_first);
    L::TransformerEncoder enc({.num_heads = 3, .ff_dim = 5, .norm_first = norm_first, .activation = "gelu"});
    enc(x);
    randomize(enc, 10);
    auto& mha = *enc.attention();
    auto& ln1 = *enc.attention_norm();
    auto& ln2 = *enc.feedforward_norm();
    auto ffn = [&](const Tensor& h) { return (*enc.output_dense())((*enc.intermediate_dense())(h)); };
    auto attend = [&](const Tensor& h) { return mha(h, h, {.attention_mask = mask, .use_causal_mask = true}); };
    Tensor expected;
    if (norm_first) {
      const Tensor h = x + attend(ln1(x));
      expected = h + ffn(ln2(h));
    } else {
      const Tensor h = ln1(x + attend(x));
      expected = ln2(h + ffn(h));
    }
    const Tensor got = enc(x, {.attention_mask = mask, .use_causal_mask = true});
    check_close(values(got), values(expected), 1e-13);
    // The FFN's activation is gelu: relu would give something else.
    CHECK(std::abs(values(enc.intermediate_dense()->operator()(x))[0] -
                   values(ops::gelu(ops::matmul(x, enc.intermediate_dense()->kernel()) +
                                    enc.intermediate_dense()->bias().value()))[0]) < 1e-14);
  }
  // The same weights, the other arrangement: a different function.
  L::TransformerEncoder pre({.num_heads = 2, .ff_dim = 4, .norm_first = true});
  L::TransformerEncoder post({.num_heads = 2, .ff_dim = 4, .norm_first = false});
  pre(x);
  post(x);
  randomize(pre, 30);
  copy_weights(pre, post);
  CHECK(values(pre(x)) != values(post(x)));
}

TEST_CASE("TransformerEncoder masks: causal and padding", "[layers][transformer_encoder]") {
  L::TransformerEncoder enc({.num_heads = 2, .ff_dim = 4, .norm_first = true});
  const Tensor x = randn({1, 4, 4}, 4);
  enc(x);
  randomize(enc, 40);
  Tensor later = x.clone();
  later.data<double>()[3 * 4 + 1] += 1.0;  // change the last token
  const auto a = values(enc(x, {.use_causal_mask = true})), b = values(enc(later, {.use_causal_mask = true}));
  for (std::size_t i = 0; i < 12; ++i) CHECK(a[i] == Approx(b[i]).epsilon(1e-14));  // earlier tokens ignore it
  CHECK(a[13] != Approx(b[13]).epsilon(1e-6));
  // A padded token is attended by nobody: the other tokens' outputs do not depend on it.
  const Tensor keep = ops::cast(f64({1, 1, 1, 0}, {1, 4}), DType::boolean);
  const auto c = values(enc(x, {.padding_mask = keep})), d = values(enc(later, {.padding_mask = keep}));
  for (std::size_t i = 0; i < 12; ++i) CHECK(c[i] == Approx(d[i]).epsilon(1e-14));
}

TEST_CASE("TransformerEncoder gradcheck w.r.t. the input and every weight", "[layers][transformer_encoder]") {
  const Tensor x = randn({1, 3, 4}, 5);
  for (bool norm_first : {true, false}) {
    INFO("norm_first " << norm_first);
    L::TransformerEncoder enc({.num_heads = 2, .ff_dim = 3, .norm_first = norm_first,
                               .activation = norm_first ? "gelu" : "tanh"});
    enc(x);
    randomize(enc, 50);
    std::vector<Tensor> inputs{x};
    for (const auto& w : enc.trainable_weights()) inputs.push_back(w.value());
    require_gradcheck([&](const std::vector<Tensor>& in) { return enc(in[0], {.use_causal_mask = true}); }, inputs);
  }
}

TEST_CASE("TransformerEncoder dropout only while training", "[layers][transformer_encoder]") {
  const Tensor x = randn({2, 3, 4}, 6);
  L::TransformerEncoder drop({.num_heads = 2, .ff_dim = 4, .dropout = 0.5, .attention_dropout = 0.3});
  L::TransformerEncoder none({.num_heads = 2, .ff_dim = 4});
  drop(x);
  none(x);
  randomize(drop, 60);
  copy_weights(drop, none);
  check_close(values(drop(x)), values(none(x)), 1e-13);
  CHECK(values(drop(x, true)) != values(none(x, true)));
}

TEST_CASE("TransformerEncoder trains: the loss falls on a tiny task", "[layers][transformer_encoder]") {
  random::set_seed(7);
  L::TransformerEncoder enc({.num_heads = 2, .ff_dim = 16, .norm_first = true});
  const Tensor x = Tensor::randn({4, 6, 8}, DType::f32, 70);
  const Tensor target = ops::broadcast_to(ops::mean(x, {1}, true), x.shape());  // each token -> the mean token
  auto loss_of = [&] { return ops::mean(ops::square(enc(x) - target)); };
  const double before = loss_of().item<double>();
  for (int step = 0; step < 30; ++step) {
    GradientTape tape;
    const Tensor loss = loss_of();
    const auto weights = enc.trainable_weights();
    const auto grads = tape.gradient(loss, weights);
    for (std::size_t i = 0; i < weights.size(); ++i) Variable(weights[i]).assign_sub(grads[i] * 0.05);
  }
  CHECK(loss_of().item<double>() < 0.7 * before);
}

TEST_CASE("TransformerEncoder rejects bad options and inputs", "[layers][transformer_encoder]") {
  REQUIRE_THROWS_WITH(L::TransformerEncoder({.num_heads = 0, .ff_dim = 4, .name = "t0"}),
                      Catch::Contains("t0") && Catch::Contains("num_heads"));
  REQUIRE_THROWS_WITH(L::TransformerEncoder({.num_heads = 2, .ff_dim = 0}), Catch::Contains("ff_dim"));
  REQUIRE_THROWS_WITH(L::TransformerEncoder({.num_heads = 3, .d_model = 8, .ff_dim = 4}),
                      Catch::Contains("d_model 8") && Catch::Contains("num_heads 3"));
  REQUIRE_THROWS_WITH(L::TransformerEncoder({.num_heads = 2, .ff_dim = 4, .dropout = 1.0}),
                      Catch::Contains("dropout"));
  REQUIRE_THROWS_WITH(L::TransformerEncoder({.num_heads = 2, .ff_dim = 4, .activation = "nope"}),
                      Catch::Contains("nope"));

  L::TransformerEncoder enc({.num_heads = 2, .d_model = 8, .ff_dim = 4, .name = "t1"});
  REQUIRE_THROWS_WITH(enc(randn({2, 3, 6}, 1)), Catch::Contains("t1") && Catch::Contains("d_model = 8") &&
                                                    Catch::Contains("[2, 3, 6]"));
  REQUIRE_THROWS_WITH(enc(randn({2, 8}, 1)), Catch::Contains("t1") && Catch::Contains("rank 3"));
  L::TransformerEncoder odd({.num_heads = 3, .ff_dim = 4, .name = "t2"});
  REQUIRE_THROWS_WITH(odd(randn({1, 2, 4}, 1)), Catch::Contains("t2") && Catch::Contains("divisible"));
  CHECK_FALSE(odd.built());
}
