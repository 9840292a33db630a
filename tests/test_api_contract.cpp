// The public API contract of DESIGN §2, written as users write it, all of it: tensors, autograd, gradcheck,
// attention, layers, models, optimizers, I/O and SIMD dispatch. It must keep compiling.
#include <catch2/catch.hpp>

#include <cstdio>
#include <sstream>

#include "loom.hpp"
#include "tests/temp_files.hpp"

using namespace loom;

TEST_CASE("the public API contract compiles and runs as written", "[api]") {
  Tensor t = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, Shape{2, 3});
  Tensor z = Tensor::zeros(Shape{2, 3}, DType::f64);
  Tensor n = Tensor::randn(Shape{2, 3}, DType::f32, /*seed=*/7);
  CHECK(t.shape() == Shape{2, 3});
  CHECK(t.dtype() == DType::f32);
  CHECK(t.numel() == 6);
  CHECK(t.to_vector<float>().size() == 6);
  CHECK(z.to(DType::f32).dtype() == DType::f32);
  CHECK(ops::sum(n * 0.0).item<double>() == 0.0);

  Tensor a = Tensor::randn({2, 3}, DType::f64, 1), b = Tensor::randn({3, 4}, DType::f64, 2);
  Tensor y = ops::matmul(a, b);
  CHECK(ops::softmax(y, -1).shape() == Shape{2, 4});
  CHECK(ops::mean(y, {-1}, /*keepdims=*/true).shape() == Shape{2, 1});

  Tensor x = Tensor::randn({4, 3}, DType::f64, 3);
  Tensor w = Tensor::randn({3, 2}, DType::f64, 4);
  {
    GradientTape tape;
    tape.watch(x);
    tape.watch(w);
    Tensor loss = ops::sum(ops::tanh(ops::matmul(x, w)));
    std::vector<Tensor> g = tape.gradient(loss, std::vector<Tensor>{x, w});
    CHECK(g[0].shape() == x.shape());
    CHECK(g[1].shape() == w.shape());
  }
  {
    GradientTape tape({.persistent = true});
    tape.watch(x);
    Tensor y2 = ops::sum(ops::square(x));
    CHECK(tape.gradient(y2, std::vector<Tensor>{x})[0].shape() == x.shape());
    CHECK(tape.gradient(y2, std::vector<Tensor>{x})[0].shape() == x.shape());  // persistent: asked twice
  }
  using Fn = TensorFn;
  Fn fn = [](const std::vector<Tensor>& in) { return ops::tanh(ops::matmul(in[0], in[1])); };
  GradcheckResult r = gradcheck(fn, {x, w}, {.eps = 1e-6, .atol = 1e-5, .rtol = 1e-3});
  GradcheckResult r2 = gradgradcheck(fn, {x, w});
  CHECK(r.ok);
  CHECK(r2.ok);

  Tensor q = Tensor::randn({1, 2, 5, 4}, DType::f32, 5);
  Tensor m = Tensor::ones({5, 5}, DType::boolean);
  Tensor o = ops::scaled_dot_product_attention(
      q, q, q, {.mask = m, .causal = true, .scale = std::nullopt, .sliding_window = 0, .impl = ops::AttentionImpl::Auto});
  CHECK(o.shape() == q.shape());

  namespace L = loom::layers;
  Tensor h_in = Tensor::randn({2, 5, 16}, DType::f32, 6);
  L::LayerNormalization ln({.axis = -1, .epsilon = 1e-3, .center = true, .scale = true});
  L::BatchNormalization bn({.axis = -1, .momentum = 0.99, .epsilon = 1e-3});
  L::GroupNormalization gn({.groups = 4, .axis = -1, .epsilon = 1e-3});
  L::MultiHeadAttention mha({.num_heads = 8, .key_dim = 64, .dropout = 0.0, .use_bias = true,
                             .flash_attention = std::nullopt /* auto */});
  Tensor h = ln(h_in);
  CHECK(gn(h_in).shape() == h_in.shape());
  Tensor query = h, value = h, key = h;
  Tensor mask = Tensor::ones({2, 5, 5}, DType::boolean);
  Tensor att = mha(query, value);
  Tensor c = mha(query, value, {.key = key, .attention_mask = mask, .training = true, .use_causal_mask = true});
  auto [out, scores] = mha.call_with_scores(query, value, {});
  CHECK(att.shape() == h.shape());
  CHECK(c.shape() == h.shape());
  CHECK(scores.shape() == Shape{2, 8, 5, 5});
  CHECK(out.shape() == h.shape());
  bn(h_in, /*training=*/true);
  std::vector<Variable> weights = mha.weights();
  CHECK(weights.size() == 8);
  mha.trainable_weights();
  mha.non_trainable_weights();
  weights[0].assign(weights[0].value());
  CHECK(weights[0].name() == mha.name() + "/query/kernel");
  Tensor as_tensor = weights[0];
  CHECK(as_tensor.shape() == Shape{16, 8, 64});

  const loom::testing::TempWorkingDirectory cwd("api-contract");  // the files below land there
  const std::string path = "api_contract_x.npy";
  io::save_npy(path, x);
  Tensor x2 = io::load_npy(path);
  std::remove(path.c_str());
  CHECK(x2.to_vector<double>() == x.to_vector<double>());
  BlasInfo info = blas_info();
  CHECK_FALSE(info.core.empty());
  try {
    ops::matmul(Tensor::ones({2, 3}), Tensor::ones({4, 5}));
    FAIL("matmul accepted mismatched shapes");
  } catch (const loom::Error& e) {
    CHECK(std::string(e.what()) == "matmul: inner dimensions differ: [2, 3] @ [4, 5] (3 != 4)");
  }
}

TEST_CASE("the models part of the public API contract compiles and runs as written", "[api]") {
  namespace L = loom::layers;
  L::reset_layer_names();  // the summary below expects this thread's first "dense"
  Tensor x = Tensor::randn({64, 16, 64}, DType::f32, 1);
  Tensor y = Tensor::randn({64, 16, 10}, DType::f32, 2);
  auto model = L::Sequential({L::Input({16, 64}), L::Dense(64, {.activation = "relu"}), L::Dense(10)});
  model.compile({.optimizer = optim::Adam({.learning_rate = 1e-3}), .loss = "mse", .metrics = {"mae"}});
  History hist = model.fit(x, y, {.batch_size = 32, .epochs = 5, .verbose = 0, .validation_split = 0.1});
  CHECK(hist.history.at("loss").size() == 5);
  model.evaluate(x, y, {.verbose = 0});
  CHECK(model.predict(x, {.verbose = 0}).shape() == Shape{64, 16, 10});
  std::ostringstream table;
  model.summary({.out = &table});
  CHECK(table.str().find("dense (Dense)") != std::string::npos);
  const loom::testing::TempWorkingDirectory cwd("api-contract");
  const std::string path = "api_contract_model.safetensors";
  model.save_weights(path);
  model.load_weights(path);
  std::remove(path.c_str());

  optim::Adam opt({.learning_rate = 1e-3});
  {
    GradientTape tape;
    Tensor l = losses::mean_squared_error(y, model(x, /*training=*/true));
    opt.apply_gradients(tape.gradient(l, model.trainable_weights()), model.trainable_weights());
  }
  CHECK(opt.iterations() == 1);
  CHECK((simd::active_isa() == "avx512" || simd::active_isa() == "avx2" || simd::active_isa() == "scalar"));
}

TEST_CASE("the Functional part of the public API contract compiles and runs as written", "[api]") {
  namespace L = loom::layers;
  L::reset_layer_names();
  // DESIGN §2, "Functional API", verbatim.
  Tensor tokens = L::Input({12}, {.dtype = DType::i64});
  Tensor e = L::Embedding(50, 16, {.mask_zero = true})(tokens);       // the mask flows to MHA and pooling
  Tensor att = L::MultiHeadAttention({.num_heads = 2, .key_dim = 8})(e, e);
  Tensor h = L::LayerNormalization()(e + att);                          // ops on symbolic tensors are graph nodes
  Tensor probs = L::Dense(3, {.activation = "softmax"})(L::GlobalAveragePooling1D()(h));
  Model classifier(tokens, probs);
  classifier.compile({.optimizer = optim::Adam({.learning_rate = 1e-3}), .loss = "sparse_categorical_crossentropy"});
  L::GroupQueryAttention gqa({.head_dim = 8, .num_query_heads = 4, .num_key_value_heads = 2});

  const Tensor ids = Tensor::from_vector(std::vector<std::int64_t>(4 * 12, 3), Shape{4, 12});
  const Tensor labels = Tensor::from_vector(std::vector<std::int64_t>{0, 1, 2, 1}, Shape{4});
  CHECK(classifier.fit(ids, labels, {.epochs = 1, .verbose = 0}).history.at("loss").size() == 1);
  CHECK(classifier.predict(ids, {.verbose = 0}).shape() == Shape{4, 3});
  const Tensor seq = Tensor::randn({2, 5, 16}, DType::f32, 3);
  CHECK(gqa(seq, seq).shape() == Shape{2, 5, 16});
}

TEST_CASE("the rematerialization and mixed precision part of the public API contract runs as written", "[api]") {
  namespace L = loom::layers;
  L::Dense block(4, {.activation = "relu"});
  Tensor x = Tensor::randn({2, 3}, DType::f32, 5);
  Tensor r = remat([&](const Tensor& t) { return block(t, true); })(x);   // recomputed in the backward pass
  CHECK(r.shape() == Shape{2, 4});
  mixed_precision::set_global_policy("mixed_bfloat16");                   // variables f32, compute bf16
  L::Dense mixed(4);
  mixed_precision::set_global_policy("float32");
  CHECK(mixed.dtype_policy().mixed_bfloat16);
  CHECK(mixed(x).dtype() == DType::f32);
  CHECK(mixed.kernel().value().dtype() == DType::f32);
}
