// The bad-input battery of the layers, losses, metrics, models and optimizers: wrong ranks, shapes and
// dtypes, impossible options, calls that do not fit the built weights, masks of the wrong shape, training
// calls with x and y that do not match. Each must throw loom::Error naming the layer (or loss, metric,
// optimizer) and the offending shapes or values; none may crash, abort or return garbage.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "loom.hpp"
#include "tests/bad_input_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

namespace {

const Tensor x23 = Tensor::ones({2, 3});
const Tensor x45 = Tensor::ones({4, 5});
const Tensor x234 = Tensor::ones({2, 3, 4});
const Tensor undefined;

/// A layer built by a first good call, then called with `bad`.
template <class Layer>
void call_after_build(Layer layer, const Tensor& good, const Tensor& bad) {
  layer(good);
  layer(bad);
}

Tensor ids(const std::vector<std::int64_t>& values) { return Tensor::from_vector(values); }

/// A compiled Sequential for [batch, 3] inputs and [batch, 1] targets, silent.
std::shared_ptr<L::Sequential> regression_model() {
  auto model = std::make_shared<L::Sequential>(std::vector<L::LayerArg>{L::Input({3}), L::Dense(1)});
  model->compile({.optimizer = "sgd", .loss = "mse"});
  return model;
}

}  // namespace

TEST_CASE("core layers reject bad inputs and options naming the layer and the shapes", "[bad_input]") {
  run_bad_inputs("core layers", {
    {"Dense: a rank-1 input", [] { L::Dense(4)(Tensor::ones({3})); }, {"dense", "[3]"}},
    {"Dense: a rank-0 input", [] { L::Dense(4)(Tensor::scalar(1.0)); }, {"dense", "[]"}},
    {"Dense: another feature size than built", [] { call_after_build(L::Dense(4), x23, x45); },
     {"dense", "[4, 5]", "3"}},
    {"Dense: another dtype than built", [] { call_after_build(L::Dense(4), x23, x23.to(DType::f64)); },
     {"dense", "f64", "f32"}},
    {"Dense: an i64 input", [] { L::Dense(4)(Tensor::zeros({2, 3}, DType::i64)); }, {"dense", "i64", "[2, 3]"}},
    {"Dense: zero units", [] { L::Dense(0); }, {"dense", "units", "0"}},
    {"Dense: negative units", [] { L::Dense(-3); }, {"dense", "units", "-3"}},
    {"Dense: an unknown activation", [] { L::Dense(4, {.activation = "nope"}); }, {"dense", "nope"}},
    {"Dense: an unknown initializer", [] { L::Dense(4, {.kernel_initializer = "nope"}); }, {"nope"}},
    {"Dense::compute_output_shape: a rank-1 shape", [] { L::Dense(4).compute_output_shape({3}); }, {"dense", "[3]"}},
    {"EinsumDense: no arrow", [] { L::EinsumDense("abc,cd", {-1, 4}); }, {"einsum_dense", "abc,cd"}},
    {"EinsumDense: an ellipsis", [] { L::EinsumDense("...b,bc->...c", {4}); }, {"einsum_dense", "...b,bc->...c"}},
    {"EinsumDense: output_shape of the wrong length", [] { L::EinsumDense("abc,cd->abd", {4})(x234); },
     {"einsum_dense", "[4]"}},
    {"EinsumDense: an input of another rank than the equation",
     [] { L::EinsumDense("abc,cd->abd", {-1, 4})(x23); },
     {"einsum_dense", "abc", "[2, 3]"}},
    {"EinsumDense: a bias axis not in the output",
     [] { L::EinsumDense("abc,cd->abd", {-1, 4}, {.bias_axes = "z"})(x234); },
     {"einsum_dense", "z"}},
    {"EinsumDense: another feature size than built",
     [] { call_after_build(L::EinsumDense("abc,cd->abd", {-1, 4}), x234, Tensor::ones({2, 3, 5})); },
     {"einsum_dense", "[2, 3, 5]"}},
    {"EinsumDense: a fixed output size the input contradicts",
     [] { L::EinsumDense("abc,cd->abd", {7, 4})(x234); },
     {"einsum_dense", "[2, 3, 4]", "7"}},
    {"Embedding: an id past input_dim", [] { L::Embedding(5, 2)(ids({0, 5})); }, {"embedding", "5", "[2]"}},
    {"Embedding: a negative id", [] { L::Embedding(5, 2)(ids({-1, 0})); }, {"embedding", "-1", "[2]"}},
    {"Embedding: float ids", [] { L::Embedding(5, 2)(x23); }, {"embedding", "f32", "[2, 3]"}},
    {"Embedding: input_dim 0", [] { L::Embedding(0, 2); }, {"embedding", "input_dim", "0"}},
    {"Embedding: a negative output_dim", [] { L::Embedding(5, -2); }, {"embedding", "output_dim", "-2"}},
    {"Dropout: a negative rate", [] { L::Dropout(-0.1); }, {"dropout", "-0.1"}},
    {"Dropout: a rate above 1", [] { L::Dropout(1.5); }, {"dropout", "1.5"}},
    {"Dropout: a noise_shape of another rank", [] { L::Dropout(0.5, {.noise_shape = Shape{2}})(x23, true); },
     {"dropout", "[2]", "[2, 3]"}},
    {"Dropout: a noise_shape that does not fit", [] { L::Dropout(0.5, {.noise_shape = Shape{2, 4}})(x23, true); },
     {"dropout", "[2, 4]", "[2, 3]"}},
    {"Dropout: an i64 input while training", [] { L::Dropout(0.5)(Tensor::zeros({2, 3}, DType::i64), true); },
     {"dropout", "i64", "[2, 3]"}},
    {"Activation: an unknown name", [] { L::Activation("nope"); }, {"activation", "nope"}},
    {"Activation: an i64 input", [] { L::Activation("relu")(Tensor::zeros({2, 3}, DType::i64)); },
     {"activation", "i64", "[2, 3]"}},
    {"activations::get: an unknown name", [] { L::activations::get("nope"); }, {"activations", "nope"}},
    {"Add: no inputs", [] { L::Add()({}); }, {"add"}},
    {"Add: different batch sizes", [] { L::Add()({x23, Tensor::ones({4, 3})}); }, {"add", "[2, 3]", "[4, 3]"}},
    {"Add: shapes that do not broadcast", [] { L::Add()({x234, Tensor::ones({2, 5, 4})}); },
     {"add", "[2, 3, 4]", "[2, 5, 4]"}},
    {"Add: different dtypes", [] { L::Add()({x23, x23.to(DType::f64)}); }, {"add", "f32", "f64"}},
    {"Add: an undefined input", [] { L::Add()({x23, undefined}); }, {"add", "undefined"}},
    {"Add::compute_output_shape: different batch sizes", [] { L::Add().compute_output_shape({{2, 3}, {4, 3}}); },
     {"add", "[2, 3]", "[4, 3]"}},
    {"Flatten: an unknown data_format", [] { L::Flatten({.data_format = "nope"}); }, {"flatten", "nope"}},
    {"Flatten: a rank-0 input", [] { L::Flatten()(Tensor::scalar(1.0)); }, {"flatten", "scalar"}},
    {"Reshape: another element count", [] { L::Reshape({4, 2})(x234); }, {"reshape", "[2, 3, 4]", "[4, 2]"}},
    {"Reshape: two -1", [] { L::Reshape({-1, -1}); }, {"reshape", "[-1, -1]"}},
    {"Reshape: a negative size", [] { L::Reshape({-2, 6}); }, {"reshape", "[-2, 6]"}},
    {"Reshape: -1 that cannot be inferred", [] { L::Reshape({-1, 5})(x234); }, {"reshape", "[2, 3, 4]", "[-1, 5]"}},
    {"Reshape::compute_output_shape: another element count",
     [] { L::Reshape({5}).compute_output_shape({2, 3, 4}); },
     {"reshape", "[2, 3, 4]", "[5]"}},
    {"Input: another feature size", [] { L::Input({4})(x23); }, {"input", "[-1, 4]", "[2, 3]"}},
    {"Input: another rank", [] { L::Input({3})(x234); }, {"input", "[-1, 3]", "[2, 3, 4]"}},
    {"Input: another batch size", [] { L::Input({3}, {.batch_size = 5})(x23); }, {"input", "5", "[2, 3]"}},
    {"Input: another dtype", [] { L::Input({3}, {.dtype = DType::f64})(x23); }, {"input", "f64", "f32"}},
    {"Input: a negative size", [] { L::Input({-2}); }, {"input", "[-2]"}},
    {"Input: a batch size of 0", [] { L::Input({3}, {.batch_size = 0}); }, {"input", "batch_size", "0"}},
    {"Input::compute_output_shape: another feature size", [] { L::Input({4}).compute_output_shape({2, 3}); },
     {"input", "[-1, 4]", "[2, 3]"}},
  });
}

TEST_CASE("normalization layers reject bad inputs and options naming the layer and the shapes", "[bad_input]") {
  run_bad_inputs("normalization layers",
                 {
                     {"BatchNormalization: an axis past the rank", [] { L::BatchNormalization({.axis = 2})(x23); },
                      {"batch_normalization", "axis 2", "rank 2"}},
                     {"BatchNormalization: epsilon 0", [] { L::BatchNormalization({.epsilon = 0.0}); },
                      {"batch_normalization", "epsilon"}},
                     {"BatchNormalization: momentum above 1", [] { L::BatchNormalization({.momentum = 1.5}); },
                      {"batch_normalization", "momentum", "1.5"}},
                     {"BatchNormalization: another channel count than built",
                      [] { call_after_build(L::BatchNormalization(), x23, x45); },
                      {"batch_normalization", "[4, 5]", "[2, 3]"}},
                     {"BatchNormalization: another rank than built",
                      [] { call_after_build(L::BatchNormalization(), x23, Tensor::ones({2, 2, 3})); },
                      {"batch_normalization", "[2, 2, 3]", "[2, 3]"}},
                     {"BatchNormalization: another dtype than built",
                      [] { call_after_build(L::BatchNormalization(), x23, x23.to(DType::f64)); },
                      {"batch_normalization", "f64", "f32"}},
                     {"BatchNormalization: an i64 input",
                      [] { L::BatchNormalization()(Tensor::zeros({2, 3}, DType::i64)); },
                      {"batch_normalization", "i64", "[2, 3]"}},
                     {"BatchNormalization: a rank-0 input", [] { L::BatchNormalization()(Tensor::scalar(1.0)); },
                      {"batch_normalization", "rank 0"}},
                     {"BatchNormalization: an empty batch while training",
                      [] { L::BatchNormalization()(Tensor::zeros({0, 3}), true); },
                      {"batch_norm", "[0, 3]"}},
                     {"LayerNormalization: an axis past the rank", [] { L::LayerNormalization({.axis = 2})(x23); },
                      {"layer_normalization", "axis 2", "rank 2"}},
                     {"LayerNormalization: a repeated axis", [] { L::LayerNormalization({.axis = {1, -1}})(x23); },
                      {"layer_normalization", "repeated", "[1, -1]"}},
                     {"LayerNormalization: no axis",
                      [] { L::LayerNormalization({.axis = std::vector<std::int64_t>{}})(x23); },
                      {"layer_normalization", "axis"}},
                     {"LayerNormalization: a negative epsilon", [] { L::LayerNormalization({.epsilon = -1.0}); },
                      {"layer_normalization", "epsilon", "-1"}},
                     {"LayerNormalization: another feature size than built",
                      [] { call_after_build(L::LayerNormalization(), x23, x45); },
                      {"layer_normalization", "[4, 5]", "[2, 3]"}},
                     {"LayerNormalization: an i64 input",
                      [] { L::LayerNormalization()(Tensor::zeros({2, 3}, DType::i64)); },
                      {"layer_normalization", "i64", "[2, 3]"}},
                     {"GroupNormalization: groups that do not divide the channels",
                      [] { L::GroupNormalization({.groups = 2})(x23); },
                      {"group_normalization", "2", "[2, 3]"}},
                     {"GroupNormalization: more groups than channels",
                      [] { L::GroupNormalization({.groups = 6})(x23); },
                      {"group_normalization", "6", "[2, 3]"}},
                     {"GroupNormalization: groups 0", [] { L::GroupNormalization({.groups = 0}); },
                      {"group_normalization", "groups", "0"}},
                     {"GroupNormalization: groups -2", [] { L::GroupNormalization({.groups = -2}); },
                      {"group_normalization", "groups", "-2"}},
                     {"GroupNormalization: the batch axis",
                      [] { L::GroupNormalization({.groups = 1, .axis = 0})(x23); },
                      {"group_normalization", "[2, 3]"}},
                     {"GroupNormalization: a rank-1 input",
                      [] { L::GroupNormalization({.groups = 1})(Tensor::ones({3})); },
                      {"group_normalization", "[3]"}},
                     {"GroupNormalization: an axis past the rank",
                      [] { L::GroupNormalization({.groups = 1, .axis = 3})(x23); },
                      {"group_normalization", "axis 3", "rank 2"}},
                     {"GroupNormalization: a zero epsilon",
                      [] { L::GroupNormalization({.groups = 1, .epsilon = 0.0}); },
                      {"group_normalization", "epsilon"}},
                     {"GroupNormalization: another channel count than built",
                      [] { call_after_build(L::GroupNormalization({.groups = 1}), x23, x45); },
                      {"group_normalization", "[4, 5]", "[2, 3]"}},
                     {"RMSNormalization: an axis past the rank", [] { L::RMSNormalization({.axis = -3})(x23); },
                      {"rms_normalization", "axis -3", "rank 2"}},
                     {"RMSNormalization: a negative epsilon", [] { L::RMSNormalization({.epsilon = -1e-6}); },
                      {"rms_normalization", "epsilon"}},
                     {"RMSNormalization: another feature size than built",
                      [] { call_after_build(L::RMSNormalization(), x23, x45); },
                      {"rms_normalization", "[4, 5]", "[2, 3]"}},
                     {"RMSNormalization: another dtype than built",
                      [] { call_after_build(L::RMSNormalization(), x23, x23.to(DType::f64)); },
                      {"rms_normalization", "f64", "f32"}},
                 });
}

TEST_CASE("attention layers reject bad shapes, masks and options naming the layer and the shapes", "[bad_input]") {
  const Tensor q = Tensor::ones({2, 3, 8});
  const Tensor v = Tensor::ones({2, 5, 8});
  const auto mha = [] { return L::MultiHeadAttention({.num_heads = 2, .key_dim = 4}); };
  const auto encoder = [] { return L::TransformerEncoder({.num_heads = 2, .ff_dim = 16}); };
  run_bad_inputs("attention layers", {
    {"MultiHeadAttention: num_heads 0", [] { L::MultiHeadAttention({.num_heads = 0, .key_dim = 4}); },
     {"multi_head_attention", "num_heads", "0"}},
    {"MultiHeadAttention: key_dim -4", [] { L::MultiHeadAttention({.num_heads = 2, .key_dim = -4}); },
     {"multi_head_attention", "key_dim", "-4"}},
    {"MultiHeadAttention: dropout 1.5",
     [] { L::MultiHeadAttention({.num_heads = 2, .key_dim = 4, .dropout = 1.5}); },
     {"multi_head_attention", "dropout", "1.5"}},
    {"MultiHeadAttention: flash with dropout",
     [] { L::MultiHeadAttention({.num_heads = 2, .key_dim = 4, .dropout = 0.1, .flash_attention = true}); },
     {"multi_head_attention", "flash", "dropout"}},
    {"MultiHeadAttention: a rank-2 query", [=] { mha()(Tensor::ones({3, 8}), v); }, {"multi_head_attention", "[3, 8]"}},
    {"MultiHeadAttention: batch sizes differ", [=] { mha()(q, Tensor::ones({4, 5, 8})); },
     {"multi_head_attention", "[2, 3, 8]", "[4, 5, 8]"}},
    {"MultiHeadAttention: key and value lengths differ", [=] { mha()(q, v, {.key = Tensor::ones({2, 6, 8})}); },
     {"multi_head_attention", "[2, 6, 8]", "[2, 5, 8]"}},
    {"MultiHeadAttention: query and value dtypes differ", [=] { mha()(q, v.to(DType::f64)); },
     {"multi_head_attention", "f32", "f64"}},
    {"MultiHeadAttention: an attention_mask of the wrong shape",
     [=] { mha()(q, v, {.attention_mask = Tensor::ones({2, 3, 4}, DType::boolean)}); },
     {"multi_head_attention", "[2, 3, 4]", "[2, 3, 5]"}},
    {"MultiHeadAttention: a query_mask of the wrong shape",
     [=] { mha()(q, v, {.query_mask = Tensor::ones({2, 5}, DType::boolean)}); },
     {"multi_head_attention", "[2, 5]", "[2, 3]"}},
    {"MultiHeadAttention: a value_mask of the wrong shape",
     [=] { mha()(q, v, {.value_mask = Tensor::ones({2, 3}, DType::boolean)}); },
     {"multi_head_attention", "[2, 3]", "[2, 5]"}},
    {"MultiHeadAttention: a key_mask of the wrong shape",
     [=] { mha()(q, v, {.key_mask = Tensor::ones({3, 5}, DType::boolean)}); },
     {"multi_head_attention", "[3, 5]", "[2, 5]"}},
    {"MultiHeadAttention: another query size than built",
     [=] {
       auto layer = mha();
       layer(q, v);
       layer(Tensor::ones({2, 3, 6}), v);
     },
     {"multi_head_attention", "[2, 3, 6]"}},
    {"MultiHeadAttention: attention_axes past the rank",
     [=] {
       L::MultiHeadAttention({.num_heads = 2, .key_dim = 4, .attention_axes = std::vector<std::int64_t>{5}})(q,
                                                                                                             v);
     },
     {"multi_head_attention", "5"}},
    {"MultiHeadAttention: an undefined value", [=] { mha()(q, undefined); }, {"multi_head_attention", "defined"}},
    {"TransformerEncoder: num_heads 0", [] { L::TransformerEncoder({.num_heads = 0, .ff_dim = 16}); },
     {"transformer_encoder", "num_heads", "0"}},
    {"TransformerEncoder: ff_dim 0", [] { L::TransformerEncoder({.num_heads = 2, .ff_dim = 0}); },
     {"transformer_encoder", "ff_dim", "0"}},
    {"TransformerEncoder: dropout 1",
     [] { L::TransformerEncoder({.num_heads = 2, .ff_dim = 16, .dropout = 1.0}); },
     {"transformer_encoder", "dropout", "1"}},
    {"TransformerEncoder: d_model the input contradicts",
     [=] { L::TransformerEncoder({.num_heads = 2, .d_model = 6, .ff_dim = 16})(q); },
     {"transformer_encoder", "6", "[2, 3, 8]"}},
    {"TransformerEncoder: d_model not divisible by num_heads",
     [] { L::TransformerEncoder({.num_heads = 3, .ff_dim = 16})(Tensor::ones({2, 3, 8})); },
     {"transformer_encoder", "3", "[2, 3, 8]"}},
    {"TransformerEncoder: a rank-2 input", [=] { encoder()(Tensor::ones({3, 8})); }, {"transformer_encoder", "[3, 8]"}},
    {"TransformerEncoder: a padding_mask of the wrong shape",
     [=] { encoder()(q, {.padding_mask = Tensor::ones({2, 5}, DType::boolean)}); },
     {"transformer_encoder", "[2, 5]", "[2, 3]"}},
    {"TransformerEncoder: an attention_mask of the wrong shape",
     [=] { encoder()(q, {.attention_mask = Tensor::ones({2, 3, 5}, DType::boolean)}); },
     {"[2, 3, 5]", "[2, 3, 3]"}},
    {"TransformerEncoder: another width than built",
     [=] {
       auto layer = encoder();
       layer(q);
       layer(Tensor::ones({2, 3, 6}));
     },
     {"[2, 3, 6]"}},
  });
}

TEST_CASE("losses and metrics reject mismatched y_true and y_pred naming them and the shapes", "[bad_input]") {
  const Tensor p23 = Tensor::full({2, 3}, 0.5);
  const Tensor labels = ids({0, 3});
  namespace M = L::metrics;
  run_bad_inputs("losses and metrics",
                 {
                     {"mean_squared_error: shapes differ", [] { losses::mean_squared_error(x23, x45); },
                      {"mean_squared_error", "[2, 3]", "[4, 5]"}},
                     {"mean_absolute_error: shapes differ",
                      [] { losses::mean_absolute_error(x23, Tensor::ones({2, 4})); },
                      {"mean_absolute_error", "[2, 3]", "[2, 4]"}},
                     {"mean_squared_error: an undefined y_pred", [] { losses::mean_squared_error(x23, undefined); },
                      {"mean_squared_error", "undefined"}},
                     {"mean_squared_error: an i64 y_pred",
                      [] { losses::mean_squared_error(x23, Tensor::zeros({2, 3}, DType::i64)); },
                      {"mean_squared_error", "i64", "[2, 3]"}},
                     {"binary_crossentropy: shapes differ",
                      [=] { losses::binary_crossentropy(x23, Tensor::full({3, 2}, 0.5)); },
                      {"binary_crossentropy", "[2, 3]", "[3, 2]"}},
                     {"binary_crossentropy: label_smoothing 2",
                      [=] { losses::binary_crossentropy(x23, p23, {.from_logits = false, .label_smoothing = 2.0}); },
                      {"binary_crossentropy", "label_smoothing", "2"}},
                     {"binary_crossentropy: an axis past the rank",
                      [=] { losses::binary_crossentropy(x23, p23, {.from_logits = false, .label_smoothing = 0.0, .axis = 2}); },
                      {"binary_crossentropy", "axis 2", "rank 2"}},
                     {"categorical_crossentropy: shapes differ",
                      [=] { losses::categorical_crossentropy(x23, Tensor::full({2, 4}, 0.25)); },
                      {"categorical_crossentropy", "[2, 3]", "[2, 4]"}},
                     {"categorical_crossentropy: label_smoothing -0.5",
                      [=] { losses::categorical_crossentropy(x23, p23, {.from_logits = false, .label_smoothing = -0.5}); },
                      {"categorical_crossentropy", "label_smoothing"}},
                     {"categorical_crossentropy: an axis past the rank",
                      [=] { losses::categorical_crossentropy(x23, p23, {.from_logits = true, .label_smoothing = 0.0, .axis = -3}); },
                      {"categorical_crossentropy", "axis -3", "rank 2"}},
                     {"sparse_categorical_crossentropy: a label past the classes",
                      [=] { losses::sparse_categorical_crossentropy(labels, p23); },
                      {"sparse_categorical_crossentropy", "3"}},
                     {"sparse_categorical_crossentropy: float labels",
                      [=] { losses::sparse_categorical_crossentropy(p23, p23); },
                      {"sparse_categorical_crossentropy", "f32", "[2, 3]"}},
                     {"sparse_categorical_crossentropy: labels of another batch",
                      [=] { losses::sparse_categorical_crossentropy(ids({0, 1, 2}), p23); },
                      {"sparse_categorical_crossentropy", "[3]", "[2, 3]"}},
                     {"sparse_categorical_crossentropy: an axis past the rank",
                      [=] { losses::sparse_categorical_crossentropy(ids({0, 1}), p23, {.from_logits = true, .axis = 2}); },
                      {"sparse_categorical_crossentropy", "axis 2", "rank 2"}},
                     {"MeanSquaredError: shapes differ", [] { M::MeanSquaredError().update_state(x23, x45); },
                      {"mean_squared_error", "[2, 3]", "[4, 5]"}},
                     {"MeanAbsoluteError: shapes differ", [] { M::MeanAbsoluteError().update_state(x23, x45); },
                      {"mean_absolute_error", "[2, 3]", "[4, 5]"}},
                     {"BinaryAccuracy: shapes differ", [] { M::BinaryAccuracy().update_state(x23, x45); },
                      {"binary_accuracy", "[2, 3]", "[4, 5]"}},
                     {"CategoricalAccuracy: shapes differ", [] { M::CategoricalAccuracy().update_state(x23, x45); },
                      {"categorical_accuracy", "[2, 3]", "[4, 5]"}},
                     {"SparseCategoricalAccuracy: a label past the classes",
                      [=] { M::SparseCategoricalAccuracy().update_state(labels, p23); },
                      {"sparse_categorical_accuracy", "3"}},
                     {"SparseCategoricalAccuracy: labels of another batch",
                      [=] { M::SparseCategoricalAccuracy().update_state(ids({0, 1, 2}), p23); },
                      {"sparse_categorical_accuracy", "[3]", "[2, 3]"}},
                     {"SparseCategoricalAccuracy: float labels",
                      [=] { M::SparseCategoricalAccuracy().update_state(p23, p23); },
                      {"sparse_categorical_accuracy", "f32", "[2, 3]"}},
                     {"binary_accuracy: shapes differ", [] { M::binary_accuracy(x23, x45); },
                      {"binary_accuracy", "[2, 3]", "[4, 5]"}},
                     {"categorical_accuracy: shapes differ", [] { M::categorical_accuracy(x23, x45); },
                      {"categorical_accuracy", "[2, 3]", "[4, 5]"}},
                     {"sparse_categorical_accuracy: a label past the classes",
                      [=] { M::sparse_categorical_accuracy(labels, p23); },
                      {"sparse_categorical_accuracy", "3"}},
                     {"metrics::get: an unknown name", [] { M::get("nope", {2}, {2}); }, {"nope"}},
                     {"Mean: a negative weight", [] { M::Mean().update_state(1.0, -1.0); }, {"mean", "-1"}},
                     {"Mean: a NaN weight", [] { M::Mean().update_state(1.0, std::nan("")); }, {"mean", "nan"}},
                     {"Mean: an undefined tensor", [] { M::Mean().update_state(undefined); }, {"mean", "undefined"}},
                 });
}

TEST_CASE("Model and Sequential reject bad compile options and x, y that do not fit", "[bad_input]") {
  const Tensor x = Tensor::ones({6, 3});
  const Tensor y = Tensor::ones({6, 1});
  run_bad_inputs("models", {
    {"fit before compile",
     [=] {
       L::Sequential model({L::Input({3}), L::Dense(1)});
       model.fit(x, y, {.verbose = 0});
     },
     {"fit", "compile"}},
    {"evaluate before compile",
     [=] {
       L::Sequential model({L::Input({3}), L::Dense(1)});
       model.evaluate(x, y, {.verbose = 0});
     },
     {"evaluate", "compile"}},
    {"train_on_batch before compile",
     [=] {
       L::Sequential model({L::Input({3}), L::Dense(1)});
       model.train_on_batch(x, y);
     },
     {"train_on_batch", "compile"}},
    {"compile: an unknown loss",
     [] {
       L::Sequential model({L::Input({3}), L::Dense(1)});
       model.compile({.loss = "nope"});
     },
     {"nope"}},
    {"compile: an unknown optimizer",
     [] {
       L::Sequential model({L::Input({3}), L::Dense(1)});
       model.compile({.optimizer = "nope", .loss = "mse"});
     },
     {"nope"}},
    {"fit: an unknown metric",
     [=] {
       L::Sequential model({L::Input({3}), L::Dense(1)});
       model.compile({.optimizer = "sgd", .loss = "mse", .metrics = {"nope"}});
       model.fit(x, y, {.verbose = 0});
     },
     {"nope"}},
    {"fit: x and y of different batch sizes",
     [=] { regression_model()->fit(x, Tensor::ones({5, 1}), {.verbose = 0}); },
     {"fit", "[6, 3]", "[5, 1]"}},
    {"fit: x that does not fit the Input",
     [=] { regression_model()->fit(Tensor::ones({6, 4}), y, {.verbose = 0}); },
     {"[6, 4]"}},
    {"fit: y that does not fit the output",
     [=] { regression_model()->fit(x, Tensor::ones({6, 2}), {.verbose = 0}); },
     {"[6, 2]", "[6, 1]"}},
    {"fit: batch_size 0", [=] { regression_model()->fit(x, y, {.batch_size = 0, .verbose = 0}); },
     {"fit", "batch_size", "0"}},
    {"fit: negative epochs", [=] { regression_model()->fit(x, y, {.epochs = -1, .verbose = 0}); },
     {"fit", "epochs", "-1"}},
    {"fit: validation_split 1.5", [=] { regression_model()->fit(x, y, {.verbose = 0, .validation_split = 1.5}); },
     {"fit", "validation_split", "1.5"}},
    {"fit: validation_data of another feature size",
     [=] {
       regression_model()->fit(
           x, y, {.verbose = 0, .validation_data = std::pair{Tensor::ones({2, 4}), Tensor::ones({2, 1})}});
     },
     {"[2, 4]"}},
    {"fit: a rank-0 x", [=] { regression_model()->fit(Tensor::scalar(1.0), y, {.verbose = 0}); }, {"fit", "scalar"}},
    {"fit: an undefined y", [=] { regression_model()->fit(x, undefined, {.verbose = 0}); }, {"fit", "undefined"}},
    {"evaluate: x and y of different batch sizes",
     [=] { regression_model()->evaluate(x, Tensor::ones({5, 1}), {.verbose = 0}); },
     {"evaluate", "[6, 3]", "[5, 1]"}},
    {"evaluate: batch_size -1", [=] { regression_model()->evaluate(x, y, {.batch_size = -1, .verbose = 0}); },
     {"evaluate", "batch_size", "-1"}},
    {"predict: x that does not fit the Input",
     [] { regression_model()->predict(Tensor::ones({6, 4}), {.verbose = 0}); },
     {"[6, 4]"}},
    {"predict: batch_size 0", [=] { regression_model()->predict(x, {.batch_size = 0, .verbose = 0}); },
     {"predict", "batch_size", "0"}},
    {"train_on_batch: x and y of different batch sizes",
     [=] { regression_model()->train_on_batch(x, Tensor::ones({5, 1})); },
     {"train_on_batch", "[6, 3]", "[5, 1]"}},
    {"test_on_batch: x and y of different batch sizes",
     [=] { regression_model()->test_on_batch(x, Tensor::ones({5, 1})); },
     {"test_on_batch", "[6, 3]", "[5, 1]"}},
    {"Sequential: an Input that is not first", [] { L::Sequential({L::Dense(1), L::Input({3})}); },
     {"sequential", "Input"}},
    {"Sequential::pop: no layers", [] { L::Sequential().pop(); }, {"sequential", "pop"}},
    {"Sequential: a layer the Input shape does not fit",
     [] { L::Sequential({L::Input({3}), L::Reshape({2, 2})}); },
     {"reshape", "[-1, 3]", "[2, 2]"}},
  });
}

TEST_CASE("optimizers, schedules, initializers and callbacks reject bad options and gradients", "[bad_input]") {
  const auto var = [] { return Variable(Tensor::ones({2, 3}), "w"); };
  run_bad_inputs("optimizers", {
    {"SGD: momentum -0.5", [] { optim::SGD({.momentum = -0.5}); }, {"SGD", "momentum", "-0.5"}},
    {"SGD: momentum 1.5", [] { optim::SGD({.momentum = 1.5}); }, {"SGD", "momentum", "1.5"}},
    {"SGD: a negative learning rate", [] { optim::SGD({.learning_rate = -0.1}); }, {"LearningRate", "-0.1"}},
    {"Adam: beta_1 1.5", [] { optim::Adam({.beta_1 = 1.5}); }, {"adam", "beta_1", "1.5"}},
    {"Adam: beta_2 -1", [] { optim::Adam({.beta_2 = -1.0}); }, {"adam", "beta_2", "-1"}},
    {"Adam: a negative epsilon", [] { optim::Adam({.epsilon = -1.0}); }, {"adam", "epsilon", "-1"}},
    {"AdamW: a negative weight_decay", [] { optim::AdamW({.weight_decay = -0.1}); }, {"adamw", "weight_decay", "-0.1"}},
    {"RMSprop: rho 1.5", [] { optim::RMSprop({.rho = 1.5}); }, {"RMSprop", "rho", "1.5"}},
    {"RMSprop: a negative momentum", [] { optim::RMSprop({.momentum = -1.0}); }, {"RMSprop", "momentum", "-1"}},
    {"clipnorm and clipvalue together", [] { optim::SGD({.clipnorm = 1.0, .clipvalue = 1.0}); },
     {"sgd", "clipnorm", "clipvalue"}},
    {"a negative clipnorm", [] { optim::Adam({.clipnorm = -1.0}); }, {"adam", "clipnorm", "-1"}},
    {"a zero global_clipnorm", [] { optim::Adam({.global_clipnorm = 0.0}); }, {"adam", "global_clipnorm", "0"}},
    {"optim::get: an unknown name", [] { optim::get("nope"); }, {"nope"}},
    {"apply_gradients: fewer gradients than variables", [=] { optim::SGD().apply_gradients({}, {var()}); },
     {"apply_gradients", "0", "1"}},
    {"apply_gradients: a gradient of another shape",
     [=] { optim::SGD().apply_gradients({Tensor::ones({3, 2})}, {var()}); },
     {"apply_gradients", "w", "[3, 2]", "[2, 3]"}},
    {"apply_gradients: a gradient of another dtype",
     [=] { optim::Adam().apply_gradients({Tensor::ones({2, 3}, DType::f64)}, {var()}); },
     {"apply_gradients", "w", "f64", "f32"}},
    {"apply_gradients: only undefined gradients", [=] { optim::RMSprop().apply_gradients({undefined}, {var()}); },
     {"apply_gradients", "\"w\""}},
    {"apply_gradients: an undefined variable",
     [] { optim::SGD().apply_gradients({Tensor::ones({2})}, {Variable()}); },
     {"apply_gradients"}},
    {"load_state: a slot of another shape",
     [=] {
       optim::Adam opt;
       const Variable w = var();
       opt.apply_gradients({Tensor::ones({2, 3})}, {w});
       auto state = opt.state({w});
       std::map<std::string, Tensor> loaded(state.begin(), state.end());
       loaded["w/m"] = Tensor::ones({3, 2});
       opt.load_state(loaded, {w});
     },
     {"w/m", "[3, 2]", "[2, 3]"}},
    {"ExponentialDecay: decay_steps 0",
     [] { optim::ExponentialDecay({.initial_learning_rate = 0.1, .decay_steps = 0}); },
     {"ExponentialDecay", "decay_steps", "0"}},
    {"CosineDecay: decay_steps -5", [] { optim::CosineDecay({.initial_learning_rate = 0.1, .decay_steps = -5}); },
     {"CosineDecay", "decay_steps", "-5"}},
    {"CosineDecay: negative warmup_steps",
     [] { optim::CosineDecay({.initial_learning_rate = 0.1, .decay_steps = 5, .warmup_steps = -1}); },
     {"CosineDecay", "warmup_steps", "-1"}},
    {"PolynomialDecay: decay_steps 0",
     [] { optim::PolynomialDecay({.initial_learning_rate = 0.1, .decay_steps = 0}); },
     {"PolynomialDecay", "decay_steps", "0"}},
    {"Initializer: an unknown name", [] { L::Initializer("nope"); }, {"nope"}},
    {"variance_scaling: an unknown mode", [] { L::initializers::variance_scaling(1.0, "nope", "uniform"); },
     {"variance_scaling", "nope"}},
    {"variance_scaling: an unknown distribution",
     [] { L::initializers::variance_scaling(1.0, "fan_in", "nope"); },
     {"variance_scaling", "nope"}},
    {"variance_scaling: scale 0", [] { L::initializers::variance_scaling(0.0, "fan_in", "uniform"); },
     {"variance_scaling", "scale", "0"}},
    {"random_uniform: minval above maxval", [] { L::initializers::random_uniform(1.0, -1.0)({2}, DType::f32); },
     {"uniform"}},
    {"random_normal: a negative stddev", [] { L::initializers::random_normal(0.0, -1.0); },
     {"random_normal", "stddev", "-1"}},
    {"an initializer asked for a negative shape", [] { L::Initializer("zeros")({-2, 3}, DType::f32); }, {"[-2, 3]"}},
    {"EarlyStopping: an unknown mode", [] { L::EarlyStopping({.mode = "sideways"}); }, {"EarlyStopping", "sideways"}},
    {"EarlyStopping: negative patience", [] { L::EarlyStopping({.patience = -1}); },
     {"EarlyStopping", "patience", "-1"}},
    {"ModelCheckpoint: an empty filepath", [] { L::ModelCheckpoint({.filepath = ""}); },
     {"ModelCheckpoint", "filepath"}},
    {"ModelCheckpoint: save_weights_only false",
     [] { L::ModelCheckpoint({.filepath = "w.safetensors", .save_weights_only = false}); },
     {"ModelCheckpoint", "save_weights_only"}},
    {"ModelCheckpoint: save_freq 0", [] { L::ModelCheckpoint({.filepath = "w.safetensors", .save_freq = 0}); },
     {"ModelCheckpoint", "save_freq", "0"}},
  });
}

TEST_CASE("layers built ahead of data reject impossible input shapes naming the layer", "[bad_input]") {
  run_bad_inputs("builds before data", {
    {"Dense: a negative feature size", [] { L::Dense(4).maybe_build({2, -3}); }, {"dense", "[2, -3]"}},
    {"Dense: an unknown feature size", [] { L::Dense(4).maybe_build({-1, -1}); }, {"dense", "kernel", "[-1, 4]"}},
    {"Dense: a rank-1 shape", [] { L::Dense(4).maybe_build({3}); }, {"dense", "[3]"}},
    {"EinsumDense: an unknown contracted size",
     [] { L::EinsumDense("abc,cd->abd", {-1, 4}).maybe_build({2, 3, -1}); },
     {"einsum_dense", "kernel", "[-1, 4]"}},
    {"Embedding: a negative size", [] { L::Embedding(5, 2).maybe_build({-3}); }, {"embedding", "[-3]"}},
    {"BatchNormalization: an unknown channel count", [] { L::BatchNormalization().maybe_build({2, -1}); },
     {"batch_normalization", "[-1]"}},
    {"LayerNormalization: a negative size", [] { L::LayerNormalization().maybe_build({2, -2}); },
     {"layer_normalization", "[2, -2]"}},
    {"GroupNormalization: an unknown channel count",
     [] { L::GroupNormalization({.groups = 1}).maybe_build({2, -1}); },
     {"group_normalization", "[2, -1]"}},
    {"RMSNormalization: a negative size", [] { L::RMSNormalization().maybe_build({2, -5}); },
     {"rms_normalization", "[2, -5]"}},
    {"MultiHeadAttention: a negative feature size",
     [] { L::MultiHeadAttention({.num_heads = 2, .key_dim = 4}).maybe_build({2, 3, -8}); },
     {"multi_head_attention", "[2, 3, -8]"}},
    {"TransformerEncoder: an unknown width",
     [] { L::TransformerEncoder({.num_heads = 2, .ff_dim = 16}).maybe_build({2, 3, -1}); },
     {"transformer_encoder", "[2, 3, -1]"}},
    {"Sequential: an Input with a negative size before a Dense",
     [] { L::Sequential({L::Input({3, -2}), L::Dense(4)}); },
     {"[3, -2]"}},
    {"Sequential: an Input with an unknown feature size before a Dense",
     [] { L::Sequential({L::Input({-1}), L::Dense(4)}); },
     {"dense", "kernel", "[-1, 4]"}},
  });
}

TEST_CASE("a layer that rejected its first input still builds from a good one", "[bad_input]") {
  // A build that throws halfway must not leave half the weights behind: the next call would find them.
  const Tensor x24 = Tensor::ones({2, 4});
  const auto bad_then_good = [](L::Layer& layer, const Tensor& bad, const Tensor& good, std::size_t weights) {
    INFO(layer.name());
    CHECK_THROWS_AS(layer(bad), Error);
    CHECK_FALSE(layer.built());
    CHECK_NOTHROW(layer(good));
    CHECK(layer.weights().size() == weights);
  };
  L::GroupNormalization group_norm({.groups = 2});
  bad_then_good(group_norm, x23, x24, 2);
  L::Dense dense(3);
  bad_then_good(dense, Tensor::ones({3}), x24, 2);
  L::BatchNormalization batch_norm({.axis = 2});
  bad_then_good(batch_norm, x23, x234, 4);
  L::LayerNormalization layer_norm({.axis = 2});
  bad_then_good(layer_norm, x23, x234, 2);
  L::MultiHeadAttention mha({.num_heads = 2, .key_dim = 4});
  INFO("multi_head_attention");
  CHECK_THROWS_AS(mha(Tensor::ones({2, 3, 8}), Tensor::ones({4, 5, 8})), Error);
  CHECK_NOTHROW(mha(Tensor::ones({2, 3, 8}), Tensor::ones({2, 5, 8})));
  CHECK(mha.weights().size() == 8);
  L::TransformerEncoder encoder({.num_heads = 3, .ff_dim = 16});
  bad_then_good(encoder, Tensor::ones({2, 3, 8}), Tensor::ones({2, 3, 6}), 16);
  L::EinsumDense einsum_dense("abc,cd->abd", {7, 4});
  bad_then_good(einsum_dense, x234, Tensor::ones({2, 7, 4}), 1);
}
