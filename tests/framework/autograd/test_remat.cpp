#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "framework/autograd/gradcheck.hpp"
#include "framework/autograd/remat.hpp"
#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "framework/tensor/memory_stats.hpp"
#include "framework/tensor/random.hpp"
#include "framework/tensor/variable.hpp"
#include "layers/attention/transformer_encoder.hpp"
#include "layers/layer.hpp"
#include "layers/regularization/dropout.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
using Tensors = std::vector<Tensor>;
namespace L = loom::layers;

namespace {

/// A residual tanh block reading two Variables: x + tanh(x w1) w2.
struct Block {
  Variable w1, w2;
  Block(std::int64_t d, std::uint64_t seed)
      : w1(Tensor::randn({d, d}, DType::f64, seed) * 0.3, "w1"), w2(Tensor::randn({d, d}, DType::f64, seed + 1) * 0.3, "w2") {}
  Tensor operator()(const Tensor& x) const { return x + ops::matmul(ops::tanh(ops::matmul(x, w1.value())), w2.value()); }
};

/// The gradients of sum(f(x)^2) with respect to x and every block's weights.
Tensors gradients(const std::vector<Block>& blocks, const Tensor& x, bool use_remat) {
  GradientTape tape;
  tape.watch(x);
  Tensor h = x;
  for (const Block& b : blocks) {
    if (use_remat) h = remat([&b](const Tensors& in) { return Tensors{b(in[0])}; })({h})[0];
    else h = b(h);
  }
  Tensors sources{x};
  for (const Block& b : blocks) {
    sources.push_back(b.w1.value());
    sources.push_back(b.w2.value());
  }
  return tape.gradient(ops::sum(ops::square(h)), sources);
}

}  // namespace

TEST_CASE("remat gives the gradients of the plain function bit for bit in float64", "[remat]") {
  const std::vector<Block> blocks = {Block(6, 1), Block(6, 3), Block(6, 5)};
  const Tensor x = Tensor::randn({4, 6}, DType::f64, 7);
  check_same_tensors(gradients(blocks, x, true), gradients(blocks, x, false));
}

TEST_CASE("remat of a function of one tensor gives the same gradients", "[remat]") {
  const Block block(5, 11);
  const Tensor x = Tensor::randn({3, 5}, DType::f64, 13);
  auto grads = [&](bool use_remat) {
    GradientTape tape;
    tape.watch(x);
    const Tensor y = use_remat ? remat([&](const Tensor& t) { return block(t); })(x) : block(x);
    return tape.gradient(ops::sum(ops::square(y)), Tensors{x, block.w1.value(), block.w2.value()});
  };
  check_same_tensors(grads(true), grads(false));
  CHECK_THROWS_WITH(remat(UnaryRematFunction()), Catch::Contains("remat: the function is empty"));
}

TEST_CASE("remat keeps only its inputs: a step's peak of live tensors falls", "[remat]") {
  std::vector<Block> blocks;
  for (std::uint64_t b = 0; b < 12; ++b) blocks.emplace_back(64, 2 * b + 1);
  const Tensor x = Tensor::randn({2048, 64}, DType::f64, 9);
  // Three tanh layers per block, x + tanh(tanh(tanh(x w1) w2) w1): each tanh keeps its output ([2048, 64]
  // f64, 1 MiB) for the backward pass, besides the block's input.
  const auto deep = [](const Block& b, const Tensor& h) {
    const Tensor t = ops::tanh(ops::matmul(ops::tanh(ops::matmul(ops::tanh(ops::matmul(h, b.w1.value())), b.w2.value())),
                                           b.w1.value()));
    return h + t;
  };
  const auto peak_of = [&](bool use_remat) {
    reset_peak_memory_stats();
    const std::int64_t before = memory_stats().live_bytes;
    GradientTape tape;
    tape.watch(x);
    Tensor h = x;
    for (const Block& b : blocks)
      h = use_remat ? remat([&](const Tensors& in) { return Tensors{deep(b, in[0])}; })({h})[0] : deep(b, h);
    tape.gradient(ops::sum(ops::square(h)), {x});
    return memory_stats().peak_live_bytes - before;
  };
  const std::int64_t plain = peak_of(false), rematerialized = peak_of(true);
  // Without remat: 12 x 4 MiB kept; with remat: the 12 inputs, and one block's activations and gradients at a
  // time during the backward pass.
  INFO("plain " << plain << " bytes, remat " << rematerialized << " bytes");
  CHECK(double(plain) > 48.0 * (1 << 20));
  CHECK(double(rematerialized) < 0.5 * double(plain));
}

TEST_CASE("remat replays the random draws of unseeded dropout and of a seeded Dropout layer", "[remat]") {
  const Tensor x = Tensor::randn({8, 5}, DType::f64, 11);
  const Variable w(Tensor::randn({5, 5}, DType::f64, 12), "w");
  const auto run = [&](bool use_remat, std::uint64_t& after) {
    random::set_seed(42);
    layers::Dropout seeded(0.4, {.seed = 3});
    const auto fn = [&](const Tensors& in) {
      const Tensor h = ops::dropout(ops::tanh(ops::matmul(in[0], w.value())), 0.3, true);
      return Tensors{seeded(h, /*training=*/true) * 2.0};
    };
    GradientTape tape;
    tape.watch(x);
    const Tensor y = use_remat ? remat(fn)({x})[0] : fn({x})[0];
    Tensors grads = tape.gradient(ops::sum(ops::square(y)), {x, w.value()});
    after = random::thread_generator().next();  // the stream goes on as without remat
    grads.push_back(y);
    return grads;
  };
  std::uint64_t after_plain = 0, after_remat = 0;
  check_same_tensors(run(true, after_remat), run(false, after_plain));
  CHECK(after_plain == after_remat);
}

// Second order, the outer tape adds the same contributions in another order (it saw the recomputation during
// the first gradient, not the forward pass), so the sums agree to rounding rather than bit for bit.
TEST_CASE("remat works under nested tapes: second-order gradients match the plain function's", "[remat]") {
  const Block block(5, 21);
  const Tensor x = Tensor::randn({3, 5}, DType::f64, 23);
  const auto second_order = [&](bool use_remat) {
    GradientTape outer({.persistent = true});
    outer.watch(x);
    Tensor g;
    {
      GradientTape inner;
      inner.watch(x);
      const Tensor y = use_remat ? remat([&](const Tensors& in) { return Tensors{block(in[0])}; })({x})[0] : block(x);
      g = inner.gradient(ops::sum(ops::square(y)), {x})[0];
    }
    return outer.gradient(ops::sum(ops::square(g)), {x, block.w1.value()});
  };
  check_same_tensors(second_order(true), second_order(false), 1e-14);
}

TEST_CASE("remat passes gradcheck and gradgradcheck in float64", "[remat][gradcheck]") {
  const auto fn = [](const Tensors& in) {
    return remat([](const Tensors& x) { return Tensors{ops::tanh(ops::matmul(x[0], x[1])) * x[0]}; })(in)[0];
  };
  const Tensors inputs = {Tensor::randn({3, 3}, DType::f64, 31), Tensor::randn({3, 3}, DType::f64, 32)};
  CHECK(gradcheck(fn, inputs).ok);
  CHECK(gradgradcheck(fn, inputs).ok);
}

TEST_CASE("remat without a tape just calls the function", "[remat]") {
  int calls = 0;
  const auto f = remat([&](const Tensors& in) {
    ++calls;
    return Tensors{in[0] * 3.0};
  });
  const Tensor y = f({Tensor::full({2}, 1.0, DType::f64)})[0];
  CHECK(values(y) == std::vector<double>{3.0, 3.0});
  CHECK(calls == 1);
}

TEST_CASE("remat passes an input returned as is through, and a tensor given twice gets its gradient once",
          "[remat]") {
  const Tensor x = Tensor::randn({2, 3}, DType::f64, 43);
  const Variable w(Tensor::randn({3, 3}, DType::f64, 44), "w");
  const auto f = [&](const Tensors& in) { return Tensors{in[0], ops::matmul(in[0], w.value()) * in[1]}; };
  const auto grads = [&](bool use_remat) {
    GradientTape tape;
    tape.watch(x);
    const Tensors y = use_remat ? remat(f)({x, x}) : f({x, x});
    CHECK(y[0].id() == x.id());
    return tape.gradient(ops::sum(y[0] * 3.0) + ops::sum(ops::square(y[1])), {x, w.value()});
  };
  check_same_tensors(grads(true), grads(false), 1e-15);
  // Only passed through: no node, the gradient is the caller's.
  GradientTape tape;
  tape.watch(x);
  const Tensor same = remat([](const Tensors& in) { return Tensors{in[0]}; })({x})[0];
  CHECK(values(tape.gradient(ops::sum(same * 2.0), {x})[0]) == std::vector<double>(6, 2.0));
}

TEST_CASE("remat refuses functions it cannot recompute", "[remat][bad_input]") {
  const Tensor x = Tensor::randn({2, 3}, DType::f64, 41);
  REQUIRE_THROWS_WITH(remat(RematFunction()), Catch::Contains("remat") && Catch::Contains("empty"));
  {
    GradientTape tape;
    tape.watch(x);
    REQUIRE_THROWS_WITH(remat([](const Tensors&) { return Tensors{}; })({x}), Catch::Contains("no tensor"));
    REQUIRE_THROWS_WITH(remat([](const Tensors&) { return Tensors{Tensor()}; })({x}),
                        Catch::Contains("output 0 is undefined"));
  }
  int calls = 0;
  const auto changing = remat([&](const Tensors& in) {
    ++calls;
    return Tensors{calls == 1 ? in[0] * 2.0 : ops::sum(in[0], {0})};
  });
  GradientTape tape;
  tape.watch(x);
  const Tensor y = changing({x})[0];
  REQUIRE_THROWS_WITH(tape.gradient(ops::sum(y), {x}),
                      Catch::Contains("remat") && Catch::Contains("differs between its two runs") &&
                          Catch::Contains("[2, 3]") && Catch::Contains("[3]"));
}

TEST_CASE("remat around a Transformer block with dropout gives its gradients bit for bit", "[remat]") {
  const Tensor x = Tensor::randn({2, 6, 8}, DType::f64, 51);
  const auto run = [&](bool use_remat) {
    random::set_seed(5);
    L::reset_layer_names();
    L::TransformerEncoder block({.num_heads = 2, .ff_dim = 16, .dropout = 0.2, .norm_first = true});
    block(x);  // builds the weights outside the tape
    const auto fn = [&](const Tensors& in) { return Tensors{block(in[0], /*training=*/true)}; };
    GradientTape tape;
    tape.watch(x);
    const Tensor y = use_remat ? remat(fn)({x})[0] : fn({x})[0];
    Tensors sources{x};
    for (const Variable& w : block.trainable_weights()) sources.push_back(w.value());
    return tape.gradient(ops::sum(ops::square(y)), sources);
  };
  const Tensors plain = run(false), rematerialized = run(true);
  CHECK(plain.size() > 10);
  check_same_tensors(rematerialized, plain);
}

TEST_CASE("remat of a layer built on its first call replays the draws made after the build", "[remat]") {
  // Unseeded initializer and unseeded dropout both draw from the thread's generator: the recomputation must
  // see the mask of the forward pass whose output it returned.
  random::set_seed(77);
  L::reset_layer_names();
  L::Dense dense(4, {.use_bias = false});
  const auto block = remat([&](const Tensors& in) { return Tensors{ops::dropout(dense(in[0]), 0.5, true)}; });
  const Tensor x = Tensor::randn({3, 5}, DType::f64, 78);
  GradientTape tape;
  tape.watch(x);
  const Tensor y = block({x})[0];
  const Tensor grad = tape.gradient(ops::sum(y), {x})[0];
  // d sum(y) / dx = (mask * 2) kernel^T, the mask being where y is not zero (keep 0.5 scales by 2).
  const Tensor mask = ops::cast(ops::not_equal(y, Tensor::scalar(0.0, DType::f64)), DType::f64) * 2.0;
  const Tensor want = ops::matmul(mask, dense.trainable_weights()[0].value().transpose());
  check_same_tensors({grad}, {want}, 1e-14);

  int calls = 0;
  const auto fresh_layers = remat([&](const Tensors& in) {
    ++calls;
    L::Dense fresh(2);
    return Tensors{fresh(in[0])};
  });
  GradientTape other;
  other.watch(x);
  REQUIRE_THROWS_WITH(fresh_layers({x}), Catch::Contains("remat") && Catch::Contains("new Variables"));
}
