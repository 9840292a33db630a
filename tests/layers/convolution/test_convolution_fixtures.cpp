// The convolution layers against Keras 3: each case of tests/fixtures/convolution_fixtures.txt (made by
// make_convolution_fixtures.py; the format is described there) builds the layer from Keras's arguments, sets
// Keras's weights and compares the output and the gradients of sum(y * c) with respect to the input and every
// weight, in float64 (1e-12) and float32 (1e-4).
#include <catch2/catch.hpp>

#include <memory>
#include <sstream>

#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "layers/layers.hpp"
#include "tests/fixture_reader.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

namespace {

std::vector<std::int64_t> sizes(const FixtureCase& c, const std::string& key) {
  std::vector<std::int64_t> out;
  std::istringstream in(c.option(key));
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoll(item));
  return out;
}

bool flag(const FixtureCase& c, const std::string& key) { return c.option(key) == "1"; }

std::string activation(const FixtureCase& c) {
  const std::string& a = c.option("activation");
  return a == "linear" ? "" : a;
}

std::optional<std::vector<std::int64_t>> output_padding(const FixtureCase& c) {
  if (c.option("output_padding") == "none") return std::nullopt;
  return sizes(c, "output_padding");
}

/// The case's layer, made with every argument the case gives; nullptr for a class that is not a convolution.
std::unique_ptr<L::Layer> make_layer(const FixtureCase& c) {
  const std::string& cls = c.words.at(0);
  if (cls == "Conv1D" || cls == "Conv2D") {
    const L::ConvolutionOptions options{.strides = sizes(c, "strides"),
                                        .padding = c.option("padding"),
                                        .data_format = c.option("data_format"),
                                        .dilation_rate = sizes(c, "dilation_rate"),
                                        .groups = std::stoll(c.option("groups")),
                                        .activation = activation(c),
                                        .use_bias = flag(c, "use_bias")};
    const auto filters = std::stoll(c.option("filters"));
    if (cls == "Conv1D") return std::make_unique<L::Conv1D>(filters, sizes(c, "kernel_size"), options);
    return std::make_unique<L::Conv2D>(filters, sizes(c, "kernel_size"), options);
  }
  if (cls == "DepthwiseConv2D")
    return std::make_unique<L::DepthwiseConv2D>(
        sizes(c, "kernel_size"), L::DepthwiseConv2DOptions{.strides = sizes(c, "strides"),
                                                           .padding = c.option("padding"),
                                                           .depth_multiplier = std::stoll(c.option("depth_multiplier")),
                                                           .data_format = c.option("data_format"),
                                                           .dilation_rate = sizes(c, "dilation_rate"),
                                                           .activation = activation(c),
                                                           .use_bias = flag(c, "use_bias")});
  if (cls == "Conv2DTranspose")
    return std::make_unique<L::Conv2DTranspose>(std::stoll(c.option("filters")), sizes(c, "kernel_size"),
                                                L::Conv2DTransposeOptions{.strides = sizes(c, "strides"),
                                                                          .padding = c.option("padding"),
                                                                          .output_padding = output_padding(c),
                                                                          .data_format = c.option("data_format"),
                                                                          .dilation_rate = sizes(c, "dilation_rate"),
                                                                          .activation = activation(c),
                                                                          .use_bias = flag(c, "use_bias")});
  return nullptr;
}

std::string short_name(const Variable& v) { return v.name().substr(v.name().rfind('/') + 1); }

}  // namespace

TEST_CASE("The convolution layers match Keras (outputs and gradients\\, f64 and f32)", "[layers][conv][keras]") {
  std::size_t checked = 0;
  for (const auto& c : read_fixture_cases("convolution_fixtures.txt"))
    for (DType dtype : {DType::f64, DType::f32}) {
      auto layer = make_layer(c);
      if (!layer) continue;
      INFO("case " << c.name << " (" << c.words.at(0) << ") in " << fmt::format("{}", dtype));
      const double tol = dtype == DType::f64 ? 1e-12 : 1e-4;
      const Tensor x = c.array("x").tensor(dtype);
      layer->maybe_build(x.shape(), dtype);
      const auto weights = layer->weights();
      CHECK(weights.size() == (c.has("bias") ? 2u : 1u));
      for (auto w : weights) w.assign(c.array(short_name(w)).tensor(dtype));
      GradientTape tape;
      tape.watch(x);
      const Tensor y = (*layer)(x);
      CHECK(y.shape() == c.array("y").shape);
      CHECK(layer->compute_output_shape(x.shape()) == y.shape());
      check_close(values(y), c.array("y").values, tol, tol);
      std::vector<Tensor> sources{x};
      for (const auto& w : weights) sources.push_back(w.value());
      const auto grads = tape.gradient(ops::sum(y * c.array("c").tensor(dtype)), sources);
      check_close(values(grads[0]), c.array("d_x").values, tol, tol);
      for (std::size_t i = 0; i < weights.size(); ++i) {
        INFO("gradient of " << short_name(weights[i]));
        check_close(values(grads[i + 1]), c.array("d_" + short_name(weights[i])).values, tol, tol);
      }
      ++checked;
    }
  CHECK(checked >= 2 * 30);
}
