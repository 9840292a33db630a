#include <catch2/catch.hpp>

#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "layers/layer.hpp"

using namespace loom;
namespace L = loom::layers;

namespace {

/// y = x @ kernel + bias, with a non-trainable counter: the smallest layer that exercises the base.
class Affine : public L::Layer {
 public:
  explicit Affine(std::int64_t units, std::optional<std::string> name = {}) : Layer("affine", std::move(name)), units_(units) {}
  Shape compute_output_shape(const Shape& input_shape) const override {
    Shape out = input_shape;
    out.back() = units_;
    return out;
  }
  int builds = 0;

 protected:
  void build(const Shape& input_shape) override {
    ++builds;
    kernel_ = add_weight("kernel", {input_shape.back(), units_}, L::initializers::constant(0.5));
    calls_ = add_weight("calls", {}, "zeros", /*trainable=*/false);
    bias_ = add_weight("bias", {units_}, "zeros");
  }
  Tensor call(const Tensor& x, bool) override { return ops::matmul(x, kernel_) + bias_.value(); }

 private:
  std::int64_t units_;
  Variable kernel_, calls_, bias_;
};

/// Two Affine children, to check registration order and hierarchical names.
class Block : public L::Layer {
 public:
  explicit Block(std::optional<std::string> name = {}) : Layer("block", std::move(name)) {}
  Affine& first = add_layer(Affine(3, "first"));
  Affine& second = add_layer(Affine(2, "second"));

 protected:
  Tensor call(const Tensor& x, bool training) override { return second(ops::relu(first(x, training)), training); }
};

}  // namespace

TEST_CASE("layers get Keras-style unique names", "[layers][layer]") {
  L::reset_layer_names();
  Affine a(1), b(1), c(1, "custom");
  CHECK(a.name() == "affine");
  CHECK(b.name() == "affine_1");
  CHECK(c.name() == "custom");
  CHECK(Affine(1).name() == "affine_2");
  L::reset_layer_names();
  CHECK(Affine(1).name() == "affine");
}

TEST_CASE("a layer builds once, from its first input, in that input's dtype", "[layers][layer]") {
  Affine layer(4);
  CHECK_FALSE(layer.built());
  CHECK(layer.weights().empty());
  Tensor y = layer(Tensor::ones({2, 3}, DType::f64));
  CHECK(layer.built());
  CHECK(layer.builds == 1);
  CHECK(layer.dtype() == DType::f64);
  CHECK(y.shape() == Shape{2, 4});
  CHECK(layer.compute_output_shape({2, 3}) == y.shape());
  layer(Tensor::ones({5, 3}, DType::f64));
  CHECK(layer.builds == 1);
  CHECK(y.to_vector<double>() == std::vector<double>(8, 1.5));
}

TEST_CASE("weights are listed trainable first, then children, with path names", "[layers][layer]") {
  Block block("encoder");
  block(Tensor::ones({1, 4}));
  std::vector<std::string> names;
  for (const auto& w : block.weights()) names.push_back(w.name());
  CHECK(names == std::vector<std::string>{"encoder/first/kernel", "encoder/first/bias", "encoder/first/calls",
                                          "encoder/second/kernel", "encoder/second/bias", "encoder/second/calls"});
  CHECK(block.trainable_weights().size() == 4);
  CHECK(block.non_trainable_weights().size() == 2);
  CHECK(block.count_params() == (4 * 3 + 3 + 1) + (3 * 2 + 2 + 1));
  CHECK(block.layers().size() == 2);
  CHECK(block.first.path() == "encoder/first");
}

TEST_CASE("nesting a built layer renames its weights under the new parent", "[layers][layer]") {
  class Outer : public L::Layer {
   public:
    Outer() : Layer("outer", "model") {}
    Block& block = add_layer(Block("inner"));
  };
  Block loose("inner");
  loose(Tensor::ones({1, 4}));
  CHECK(loose.weights()[0].name() == "inner/first/kernel");
  Outer outer;
  outer.block(Tensor::ones({1, 4}));
  CHECK(outer.weights()[0].name() == "model/inner/first/kernel");
}

TEST_CASE("a frozen layer has no trainable weights and is not watched", "[layers][layer]") {
  Block block;
  Tensor x = Tensor::ones({2, 4}, DType::f64);
  block(x);
  block.set_trainable(false);
  CHECK_FALSE(block.trainable());
  CHECK(block.trainable_weights().empty());
  CHECK(block.non_trainable_weights().size() == 6);
  {
    GradientTape tape;
    Tensor y = ops::sum(block(x));
    CHECK(tape.recorded_ops().empty());
  }
  block.second.set_trainable(true);
  CHECK(block.trainable_weights().size() == 2);
  block.set_trainable(true);
  CHECK(block.trainable_weights().size() == 4);  // the counters stay non-trainable
}

TEST_CASE("gradients reach every trainable weight of nested layers", "[layers][layer]") {
  Block block;
  Tensor x = Tensor::randn({3, 4}, DType::f64, 1);
  block(x);
  GradientTape tape;
  Tensor loss = ops::sum(ops::square(block(x)));
  auto grads = tape.gradient(loss, block.trainable_weights());
  REQUIRE(grads.size() == 4);
  for (std::size_t i = 0; i < grads.size(); ++i) CHECK(grads[i].shape() == block.trainable_weights()[i].shape());
}

TEST_CASE("layers are movable and keep their children", "[layers][layer]") {
  Block a("moved");
  a(Tensor::ones({1, 4}));
  Block b = std::move(a);
  CHECK(b.weights().size() == 6);
  CHECK(b(Tensor::ones({1, 4})).shape() == Shape{1, 2});
}

TEST_CASE("bad layer use gives loom::Error naming the layer", "[layers][layer][errors]") {
  CHECK_THROWS_WITH(Affine(1, "a/b"), Catch::Contains("'a/b'"));
  CHECK_THROWS_WITH(Affine(1, ""), Catch::Contains("non-empty"));
  Affine layer(2, "proj");
  CHECK_THROWS_WITH(layer(Tensor()), Catch::Contains("proj") && Catch::Contains("undefined"));
  class Twice : public L::Layer {
   public:
    Twice() : Layer("twice") {}
    Affine& a = add_layer(Affine(1, "same"));
    void add_again() { add_layer(Affine(1, "same")); }
  };
  Twice twice;
  CHECK_THROWS_WITH(twice.add_again(), Catch::Contains("'same' exists already"));
}
