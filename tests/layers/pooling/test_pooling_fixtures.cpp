// The pooling layers, ZeroPadding2D and UpSampling2D against Keras 3: each of their cases in
// tests/fixtures/convolution_fixtures.txt (made by make_convolution_fixtures.py; the format is described there)
// builds the layer from Keras's arguments and compares the output and the gradient of sum(y * c) with
// respect to the input, float64 to 1e-12 and float32 to 1e-5. The convolution cases are left to
// tests/layers/convolution/.
#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "framework/autograd/tape.hpp"
#include "loom.hpp"
#include "tests/fixture_reader.hpp"
#include "tests/layers/merging_pooling_fixtures.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

namespace {

/// The case's layer, made from every option the case gives; nullptr for the classes of other tests.
std::unique_ptr<L::Layer> make_layer(const FixtureCase& c) {
  const std::string& cls = c.words.at(0);
  const auto pooling = [&]<class Options>(Options o) {
    o.pool_size = int_list_option(c, "pool_size");
    o.strides = int_list_option(c, "strides");
    o.padding = c.option("padding");
    o.data_format = c.option("data_format");
    return o;
  };
  const auto global = [&]<class Options>(Options o) {
    o.data_format = c.option("data_format");
    o.keepdims = c.option("keepdims") == "1";
    return o;
  };
  if (cls == "MaxPooling1D") return std::make_unique<L::MaxPooling1D>(pooling(L::MaxPooling1DOptions{}));
  if (cls == "MaxPooling2D") return std::make_unique<L::MaxPooling2D>(pooling(L::MaxPooling2DOptions{}));
  if (cls == "AveragePooling1D") return std::make_unique<L::AveragePooling1D>(pooling(L::AveragePooling1DOptions{}));
  if (cls == "AveragePooling2D") return std::make_unique<L::AveragePooling2D>(pooling(L::AveragePooling2DOptions{}));
  if (cls == "GlobalAveragePooling2D")
    return std::make_unique<L::GlobalAveragePooling2D>(global(L::GlobalAveragePooling2DOptions{}));
  if (cls == "GlobalMaxPooling2D")
    return std::make_unique<L::GlobalMaxPooling2D>(global(L::GlobalMaxPooling2DOptions{}));
  if (cls == "ZeroPadding2D")
    return std::make_unique<L::ZeroPadding2D>(
        L::ZeroPadding2DOptions{.padding = int_list_option(c, "padding"), .data_format = c.option("data_format")});
  if (cls == "UpSampling2D")
    return std::make_unique<L::UpSampling2D>(L::UpSampling2DOptions{.size = int_list_option(c, "size"),
                                                                    .data_format = c.option("data_format"),
                                                                    .interpolation = c.option("interpolation")});
  return nullptr;
}

}  // namespace

TEST_CASE("The pooling\\, ZeroPadding2D and UpSampling2D layers match Keras (outputs and input gradients)",
          "[layers][pooling][keras]") {
  std::size_t checked = 0;
  for (const auto& c : read_fixture_cases("convolution_fixtures.txt")) {
    const std::string& cls = c.words.at(0);
    if (cls.rfind("Conv", 0) == 0 || cls.rfind("DepthwiseConv", 0) == 0) continue;
    for (DType dtype : {DType::f64, DType::f32}) {
      auto layer = make_layer(c);
      INFO("case " << c.name << " (" << cls << ") in " << fmt::format("{}", dtype));
      REQUIRE(layer != nullptr);
      const double tol = dtype == DType::f64 ? 1e-12 : 1e-5;
      const Tensor x = c.array("x").tensor(dtype);
      GradientTape tape;
      tape.watch(x);
      const Tensor y = (*layer)(x);
      CHECK(y.shape() == c.array("y").shape);
      CHECK(layer->compute_output_shape(x.shape()) == y.shape());
      check_close(values(y), c.array("y").values, tol, tol);
      const Tensor d_x = tape.gradient(ops::sum(y * c.array("c").tensor(dtype)), {x})[0];
      check_close(values(d_x), c.array("d_x").values, tol, tol);
      ++checked;
    }
  }
  CHECK(checked == 2 * 32);  // 14 pooling, 8 global pooling, 4 ZeroPadding2D and 6 UpSampling2D cases
}
