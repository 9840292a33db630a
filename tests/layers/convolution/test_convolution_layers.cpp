#include <catch2/catch.hpp>

#include "framework/ops/ops.hpp"
#include "layers/layers.hpp"
#include "models/models.hpp"
#include "tests/bad_input_helpers.hpp"
#include "tests/layers/normalization/normalization_helpers.hpp"
#include "tests/temp_files.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

namespace {

/// The layer's kernel and bias set to random values (the bias nonzero, so that its place is checked).
void randomize_weights(L::Layer& layer, std::uint64_t seed) {
  for (auto& w : layer.weights()) w.assign(randn(w.shape(), seed++) * 0.5);
}

/// What every convolution layer computes: activation(op(x, kernel) + bias), the bias on the channel axis.
Tensor add_bias(const Tensor& y, const Tensor& bias, bool channels_first) {
  if (!channels_first) return y + bias;
  Shape shape{bias.shape()[0]};
  shape.resize(std::size_t(y.ndim()) - 1, 1);
  return y + ops::reshape(bias, shape);
}

/// A layer moved behind a pointer, for tables of layers of several classes.
template <class ConvLayer>
std::shared_ptr<L::Layer> shared(ConvLayer layer) {
  return std::make_shared<ConvLayer>(std::move(layer));
}

}  // namespace

TEST_CASE("Conv2D creates its kernel (kh\\, kw\\, in\\, filters) and bias with Keras's defaults", "[layers][conv]") {
  L::reset_layer_names();
  L::Conv2D conv(6, {3, 2});
  CHECK(conv.name() == "conv2d");
  CHECK(conv.filters() == 6);
  CHECK(conv.strides() == std::vector<std::int64_t>{1, 1});
  CHECK(conv.dilation_rate() == std::vector<std::int64_t>{1, 1});
  CHECK(conv.padding() == "valid");
  CHECK(conv.data_format() == "channels_last");
  const Tensor y = conv(Tensor::randn({2, 7, 5, 4}, DType::f32, 1));
  CHECK(y.shape() == Shape{2, 5, 4, 6});
  CHECK(y.dtype() == DType::f32);
  const auto w = conv.weights();
  REQUIRE(w.size() == 2);
  CHECK(w[0].name() == "conv2d/kernel");
  CHECK(w[0].shape() == Shape{3, 2, 4, 6});
  CHECK(w[1].name() == "conv2d/bias");
  CHECK(w[1].shape() == Shape{6});
  CHECK(values(w[1].value()) == std::vector<double>(6, 0.0));  // bias_initializer "zeros"

  L::Conv2D grouped(6, {3, 3}, {.padding = "SAME", .groups = 3, .use_bias = false});
  CHECK(grouped.padding() == "same");
  CHECK(grouped(Tensor::randn({1, 4, 4, 9}, DType::f32, 2)).shape() == Shape{1, 4, 4, 6});
  REQUIRE(grouped.weights().size() == 1);
  CHECK(grouped.kernel().shape() == Shape{3, 3, 3, 6});
  CHECK_FALSE(grouped.bias().defined());

  L::Conv1D conv1d(3, {2});
  CHECK(conv1d.name() == "conv1d");
  CHECK(conv1d(Tensor::randn({2, 6, 5}, DType::f32, 3)).shape() == Shape{2, 5, 3});
  CHECK(conv1d.kernel().shape() == Shape{2, 5, 3});

  L::DepthwiseConv2D dw({3, 3}, {.depth_multiplier = 2});
  CHECK(dw.name() == "depthwise_conv2d");
  CHECK(dw(Tensor::randn({2, 5, 5, 3}, DType::f32, 4)).shape() == Shape{2, 3, 3, 6});
  CHECK(dw.kernel().shape() == Shape{3, 3, 3, 2});
  CHECK(dw.bias().shape() == Shape{6});

  L::Conv2DTranspose up(4, {3, 3}, {.strides = {2}});
  CHECK(up.name() == "conv2d_transpose");
  CHECK(up(Tensor::randn({2, 3, 4, 5}, DType::f32, 5)).shape() == Shape{2, 7, 9, 4});
  CHECK(up.kernel().shape() == Shape{3, 3, 4, 5});
  CHECK(up.bias().shape() == Shape{4});
}

TEST_CASE("The DESIGN spellings of the convolution layers compile and run", "[layers][conv]") {
  L::Conv2D conv(16, {3, 3}, {.strides = {2, 2}, .padding = "same", .dilation_rate = {1, 1}, .groups = 1,
                              .activation = "relu"});
  L::Conv1D causal_conv(8, {3}, {.padding = "causal", .dilation_rate = {2}});
  L::DepthwiseConv2D dw({3, 3}, {.padding = "same", .depth_multiplier = 2});
  CHECK(conv(Tensor::randn({2, 32, 32, 3}, DType::f32, 1)).shape() == Shape{2, 16, 16, 16});
  CHECK(causal_conv(Tensor::randn({2, 10, 4}, DType::f32, 2)).shape() == Shape{2, 10, 8});
  CHECK(dw(Tensor::randn({2, 6, 6, 3}, DType::f32, 3)).shape() == Shape{2, 6, 6, 6});
}

TEST_CASE("compute_output_shape is the shape of the output, with unknown sizes kept unknown", "[layers][conv]") {
  struct Case {
    std::shared_ptr<L::Layer> layer;
    Shape input;
  };
  const std::vector<Case> cases = {
      {shared(L::Conv1D(4, {3}, {.strides = {2}, .padding = "same"})), {2, 9, 3}},
      {shared(L::Conv1D(4, {3}, {.padding = "causal", .dilation_rate = {2}})), {2, 7, 3}},
      {shared(L::Conv1D(4, {2}, {.data_format = "channels_first"})), {2, 3, 6}},
      {shared(L::Conv2D(4, {3, 3}, {.strides = {2, 1}, .padding = "same"})), {2, 7, 6, 2}},
      {shared(L::Conv2D(6, {2, 3}, {.dilation_rate = {2, 1}, .groups = 2})), {2, 7, 6, 4}},
      {shared(L::Conv2D(4, {3, 3}, {.data_format = "channels_first"})), {2, 2, 6, 5}},
      {shared(L::DepthwiseConv2D({3, 3}, {.strides = {2}, .depth_multiplier = 3})), {2, 7, 6, 2}},
      {shared(L::DepthwiseConv2D({2, 2}, {.padding = "same", .data_format = "channels_first"})), {2, 3, 5, 4}},
      {shared(L::Conv2DTranspose(3, {3, 3}, {.strides = {2}, .padding = "same"})), {2, 4, 5, 2}},
      {shared(L::Conv2DTranspose(3, {4, 3}, {.strides = {2, 3}, .output_padding = {{1, 2}}})), {2, 3, 2, 2}},
      {shared(L::Conv2DTranspose(3, {3, 3}, {.data_format = "channels_first", .dilation_rate = {2}})), {2, 2, 3, 4}},
  };
  for (const auto& c : cases) {
    INFO(c.layer->class_name() << " on " << fmt::format("{}", c.input));
    const Shape out = (*c.layer)(Tensor::randn(c.input, DType::f32, 7)).shape();
    CHECK(c.layer->compute_output_shape(c.input) == out);
    Shape unknown_batch = c.input, expected = out;
    unknown_batch[0] = expected[0] = -1;
    CHECK(c.layer->compute_output_shape(unknown_batch) == expected);
  }
  L::Conv1D conv(2, {3}, {.padding = "same"});
  CHECK(conv.compute_output_shape({-1, -1, 4}) == Shape{-1, -1, 2});
}

TEST_CASE("The convolution layers compute activation(op(x\\, kernel) + bias)", "[layers][conv]") {
  const Tensor x1 = randn({2, 7, 4}, 1), x2 = randn({2, 6, 5, 4}, 2), x2_cf = randn({2, 4, 6, 5}, 3);
  {
    L::Conv1D conv(6, {3}, {.padding = "causal", .dilation_rate = {2}, .groups = 2, .activation = "tanh"});
    conv(x1);
    randomize_weights(conv, 10);
    const Tensor want = ops::tanh(
        ops::conv(x1, conv.kernel(), {.padding = "causal", .dilation_rate = {2}}) + conv.bias().value());
    check_close(values(conv(x1)), values(want));
  }
  {
    L::Conv2D conv(3, {3, 2}, {.strides = {2, 1}, .padding = "same", .data_format = "channels_first",
                               .activation = "relu"});
    conv(x2_cf);
    randomize_weights(conv, 20);
    const Tensor want = ops::relu(add_bias(
        ops::conv(x2_cf, conv.kernel(), {.strides = {2, 1}, .padding = "same", .data_format = "channels_first"}),
        conv.bias().value(), true));
    check_close(values(conv(x2_cf)), values(want));
  }
  {
    L::DepthwiseConv2D dw({2, 3}, {.padding = "same", .depth_multiplier = 2});
    dw(x2);
    randomize_weights(dw, 30);
    const Tensor want = ops::depthwise_conv(x2, dw.kernel(), {.padding = "same"}) + dw.bias().value();
    check_close(values(dw(x2)), values(want));
  }
  {
    L::Conv2DTranspose up(3, {3, 3}, {.strides = {2}, .padding = "same", .output_padding = {{1}},
                                      .data_format = "channels_first"});
    up(x2_cf);
    randomize_weights(up, 40);
    const Tensor want = add_bias(ops::conv_transpose(x2_cf, up.kernel(),
                                                     {.strides = {2},
                                                      .padding = "same",
                                                      .output_padding = {{1}},
                                                      .data_format = "channels_first"}),
                                 up.bias().value(), true);
    check_close(values(up(x2_cf)), values(want));
  }
}

TEST_CASE("The convolution layers pass gradcheck w.r.t. input\\, kernel and bias", "[layers][conv]") {
  const auto check_layer = [](L::Layer& layer, const Tensor& x, std::uint64_t seed) {
    INFO(layer.class_name() << " " << layer.name());
    layer(x);
    randomize_weights(layer, seed);
    std::vector<Tensor> inputs{x};  // gradcheck perturbs the weights' own values in place
    for (const auto& w : layer.weights()) inputs.push_back(w.value());
    require_gradcheck([&](const std::vector<Tensor>& in) { return layer(in[0]); }, inputs);
  };
  L::Conv1D causal(4, {3}, {.padding = "causal", .dilation_rate = {2}, .groups = 2, .activation = "tanh"});
  check_layer(causal, randn({2, 6, 4}, 1), 10);
  L::Conv1D strided(3, {2}, {.strides = {2}, .padding = "same", .data_format = "channels_first"});
  check_layer(strided, randn({2, 2, 5}, 2), 20);
  L::Conv2D conv(4, {3, 2}, {.strides = {2, 1}, .padding = "same", .groups = 2});
  check_layer(conv, randn({2, 5, 4, 4}, 3), 30);
  L::Conv2D dilated(2, {2, 2}, {.data_format = "channels_first", .dilation_rate = {2, 1}, .activation = "sigmoid"});
  check_layer(dilated, randn({1, 3, 5, 4}, 4), 40);
  L::DepthwiseConv2D dw({3, 3}, {.strides = {2}, .padding = "same", .depth_multiplier = 2});
  check_layer(dw, randn({2, 5, 4, 2}, 5), 50);
  L::DepthwiseConv2D dw_cf({2, 2}, {.data_format = "channels_first", .dilation_rate = {2}});
  check_layer(dw_cf, randn({1, 3, 5, 5}, 6), 60);
  L::Conv2DTranspose up(3, {3, 3}, {.strides = {2}, .padding = "same", .output_padding = {{1, 0}}});
  check_layer(up, randn({2, 3, 2, 2}, 7), 70);
  L::Conv2DTranspose up_cf(2, {2, 3}, {.strides = {1, 2}, .data_format = "channels_first"});
  check_layer(up_cf, randn({1, 3, 3, 2}, 8), 80);
}

TEST_CASE("The convolution layers train: one step lowers the loss", "[layers][conv]") {
  const auto step_lowers = [](L::Layer& layer, const Shape& in, const Shape& out) {
    INFO(layer.class_name());
    const auto [before, after] = one_training_step(layer, randn(in, 1), randn(out, 2), 0.05);
    CHECK(after < before);
  };
  L::Conv1D conv1d(3, {3}, {.padding = "same"});
  step_lowers(conv1d, {4, 6, 2}, {4, 6, 3});
  L::Conv2D conv2d(3, {3, 3}, {.padding = "same", .activation = "relu"});
  step_lowers(conv2d, {4, 5, 5, 2}, {4, 5, 5, 3});
  L::DepthwiseConv2D dw({3, 3}, {.padding = "same"});
  step_lowers(dw, {4, 5, 5, 2}, {4, 5, 5, 2});
  L::Conv2DTranspose up(2, {2, 2}, {.strides = {2}});
  step_lowers(up, {4, 3, 3, 2}, {4, 6, 6, 2});
}

TEST_CASE("The convolution layers reject bad options and inputs\\, naming the layer and the shapes",
          "[layers][conv][bad_input]") {
  const Tensor image = randn({2, 5, 5, 4}, 1);
  run_bad_inputs("convolution layer options", {
      {"no filters", [] { L::Conv2D(0, {3, 3}, {.name = "c0"}); }, {"c0", "filters must be positive"}},
      {"zero kernel", [] { L::Conv2D(2, {3, 0}, {.name = "c1"}); }, {"c1", "kernel_size", "[3, 0]"}},
      {"three kernel sizes for 2-D", [] { L::Conv2D(2, {3, 3, 3}, {.name = "c2"}); }, {"c2", "kernel_size"}},
      {"zero stride", [] { L::Conv1D(2, {3}, {.strides = {0}, .name = "c3"}); }, {"c3", "strides"}},
      {"unknown padding", [] { L::Conv2D(2, {3, 3}, {.padding = "full", .name = "c4"}); }, {"c4", "padding", "full"}},
      {"causal in 2-D", [] { L::Conv2D(2, {3, 3}, {.padding = "causal", .name = "c5"}); }, {"c5", "'valid' or 'same'"}},
      {"strides with dilation",
       [] { L::Conv2D(2, {3, 3}, {.strides = {2}, .dilation_rate = {2}, .name = "c6"}); },
       {"c6", "dilation_rate > 1", "[2, 2]"}},
      {"filters not divisible by groups", [] { L::Conv2D(5, {3, 3}, {.groups = 2, .name = "c7"}); },
       {"c7", "filters (5)", "groups (2)"}},
      {"unknown data_format", [] { L::Conv1D(2, {3}, {.data_format = "NHWC", .name = "c8"}); },
       {"c8", "data_format", "NHWC"}},
      {"unknown activation", [] { L::Conv1D(2, {3}, {.activation = "relu7", .name = "c9"}); }, {"c9", "relu7"}},
      {"output_padding not below the stride",
       [] { L::Conv2DTranspose(2, {3, 3}, {.strides = {2}, .output_padding = {{2}}, .name = "c10"}); },
       {"c10", "output_padding", "[2, 2]"}},
      {"no depth multiplier", [] { L::DepthwiseConv2D({3, 3}, {.depth_multiplier = 0, .name = "c11"}); },
       {"c11", "depth_multiplier"}},
  });
  run_bad_inputs("convolution layer inputs", {
      {"wrong rank", [] { L::Conv2D(2, {3, 3}, {.name = "r0"})(randn({2, 5, 4}, 1)); },
       {"r0", "rank-4", "[batch, height, width, channels] (channels_last)", "[2, 5, 4]"}},
      {"kernel larger than the input",
       [] { L::Conv2D(2, {3, 3}, {.name = "r1"})(randn({2, 2, 5, 1}, 1)); },
       {"r1", "[3, 3]", "larger than the input", "[2, 2, 5, 1]"}},
      {"dilated kernel larger than the input",
       [] { L::Conv1D(2, {3}, {.dilation_rate = {3}, .name = "r2"})(randn({2, 6, 1}, 1)); },
       {"r2", "spans [7]", "[2, 6, 1]"}},
      {"channels not divisible by groups",
       [] { L::Conv2D(4, {1, 1}, {.groups = 2, .name = "r3"})(randn({2, 3, 3, 3}, 1)); },
       {"r3", "3 channels", "groups = 2", "[2, 3, 3, 3]"}},
      {"channels_first input to a built channels_last layer",
       [&] {
         L::Conv2D conv(2, {3, 3}, {.name = "r4"});
         conv(image);
         conv(randn({2, 4, 5, 5}, 1));
       },
       {"r4", "expected 4 channels", "channels_last", "[2, 4, 5, 5]", "data_format"}},
      {"other channel count once built",
       [&] {
         L::DepthwiseConv2D dw({3, 3}, {.name = "r5"});
         dw(image);
         dw(randn({2, 5, 5, 3}, 1));
       },
       {"r5", "expected 4 channels", "[2, 5, 5, 3]"}},
      {"float32 input to float64 weights",
       [&] {
         L::Conv2DTranspose up(2, {3, 3}, {.name = "r6"});
         up(image);
         up(Tensor::randn({2, 5, 5, 4}, DType::f32, 1));
       },
       {"r6", "f64", "[2, 5, 5, 4]"}},
      {"no channels", [] { L::Conv1D(2, {1}, {.name = "r7"})(Tensor::zeros({2, 3, 0})); }, {"r7", "[2, 3, 0]"}},
  });
}

TEST_CASE("A Sequential CNN saves to .keras and loads back with the same outputs", "[layers][conv][saving]") {
  auto model = L::Sequential({
      L::Input({8, 8, 3}),
      L::Conv2D(4, {3, 3}, {.strides = {2}, .padding = "same", .activation = "relu", .name = "stem"}),
      L::DepthwiseConv2D({3, 3}, {.padding = "same", .depth_multiplier = 2, .use_bias = false}),
      L::Conv2D(4, {1, 1}, {.groups = 2, .kernel_initializer = "he_normal"}),
      L::Conv2DTranspose(2, {3, 3}, {.strides = {2}, .padding = "same", .output_padding = {{1}}, .name = "up"}),
  });
  const Tensor x = Tensor::randn({2, 8, 8, 3}, DType::f32, 3);
  const Tensor y = model.predict(x);
  CHECK(y.shape() == Shape{2, 8, 8, 2});
  const TempDir dir("conv-archive");
  model.save(dir.file("cnn.keras"));
  auto restored = models::load_model(dir.file("cnn.keras"));
  CHECK(restored->summary_string() == model.summary_string());
  check_close(values(restored->predict(x)), values(y), 0, 0);
  const auto& stem = dynamic_cast<const L::Conv2D&>(*restored->get_layer("stem"));
  CHECK(stem.options().activation == "relu");
  CHECK(stem.strides() == std::vector<std::int64_t>{2, 2});
  const auto& up = dynamic_cast<const L::Conv2DTranspose&>(*restored->get_layer("up"));
  CHECK(up.output_padding() == std::vector<std::int64_t>{1, 1});
}

TEST_CASE("A Functional CNN keeps free spatial sizes free through strides and windows", "[layers][conv][functional]") {
  const Tensor image = L::Input({-1, -1, 3});
  const Tensor h = L::Conv2D(4, {3, 3}, {.strides = {2}, .padding = "same", .activation = "relu"})(image);
  CHECK(h.shape() == Shape{-1, -1, -1, 4});
  const Tensor pooled = L::MaxPooling2D({.pool_size = {3, 3}})(h);  // a window longer than any stand-in size
  CHECK(pooled.shape() == Shape{-1, -1, -1, 4});
  const Tensor up = L::Conv2DTranspose(2, {2, 2}, {.strides = {2}})(pooled);
  CHECK(up.shape() == Shape{-1, -1, -1, 2});
  const Tensor fixed = L::Conv2D(2, {3, 3})(L::Input({7, 9, 3}));
  CHECK(fixed.shape() == Shape{-1, 5, 7, 2});
  Model model(image, L::Dense(3)(L::GlobalAveragePooling2D()(up)));
  CHECK(model.predict(Tensor::randn({2, 13, 12, 3}, DType::f32, 1)).shape() == Shape{2, 3});
  CHECK(model.predict(Tensor::randn({1, 24, 7, 3}, DType::f32, 2)).shape() == Shape{1, 3});
  CHECK_THROWS_WITH(L::Conv2D(2, {3, 3}, {.name = "small"})(L::Input({2, 5, 1})),
                    Catch::Contains("small") && Catch::Contains("larger than the input"));
}
