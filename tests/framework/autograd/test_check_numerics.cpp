// check_numerics: off by default; on, the first op whose output holds a NaN or an infinity throws, naming the
// op, the element, the shapes, and whether the value was made there or came in with an input.
#include <catch2/catch.hpp>

#include <limits>
#include <sstream>

#include "loom.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
namespace L = loom::layers;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Turns check_numerics on for one scope, and off again even when a check fails.
struct CheckNumerics {
  CheckNumerics() { set_check_numerics(true); }
  ~CheckNumerics() { set_check_numerics(false); }
  CheckNumerics(const CheckNumerics&) = delete;
  CheckNumerics& operator=(const CheckNumerics&) = delete;
};

}  // namespace

TEST_CASE("check_numerics is off by default and NaN and inf pass through silently", "[check_numerics]") {
  CHECK_FALSE(check_numerics_enabled());
  const std::vector<double> y = values(ops::log(vec({1, 0, -1})));
  CHECK(y[1] == -kInf);
  CHECK(std::isnan(y[2]));
}

TEST_CASE("check_numerics names the op, the element and the shapes that produced the first NaN or inf",
          "[check_numerics]") {
  const CheckNumerics on;
  CHECK(check_numerics_enabled());
  REQUIRE_THROWS_WITH(ops::log(Tensor::from_vector(std::vector<float>{1, 0, 2})),
                      "check_numerics: op 'log' produced -inf at element [1] of its output of shape [3] "
                      "(inputs: f32 [3])");
  const Tensor a = f64({1, 2, 3, 4, 5, 0}, {2, 3});
  const Tensor b = f64({1, 1, 1, 1, 1, 0}, {2, 3});
  REQUIRE_THROWS_WITH(a / b, "check_numerics: op 'div' produced NaN at element [1, 2] of its output of shape [2, 3] "
                             "(inputs: f64 [2, 3], f64 [2, 3])");
  REQUIRE_THROWS_WITH(ops::exp(f64({1, 800}, {1, 2})),
                      "check_numerics: op 'exp' produced inf at element [0, 1] of its output of shape [1, 2] "
                      "(inputs: f64 [1, 2])");
  // An op with several outputs says which one: a variance of 1e60 overflows float32, the output stays finite.
  REQUIRE_THROWS_WITH(ops::batch_norm(Tensor::from_vector(std::vector<float>{1e30f, -1e30f}, {2, 1}), {}, {}, -1, 1e-3),
                      "check_numerics: op 'batch_norm' produced inf at element [0] of its output 2 of shape [1] "
                      "(inputs: f32 [2, 1], undefined, undefined)");
}

TEST_CASE("check_numerics says when the NaN came in with an input instead of being produced",
          "[check_numerics]") {
  const CheckNumerics on;
  const Tensor data = vec({1, kNaN, 3});  // made without an op, so no check saw it
  REQUIRE_THROWS_WITH(ops::exp(data) + 1.0,
                      "check_numerics: NaN came into op 'exp' with its input 0 (element [1] of shape [3]; inputs: "
                      "f64 [3]); no checked op produced it: it was in the data, or written by code that is not an "
                      "op");
  REQUIRE_THROWS_WITH(vec({1, 2, 3}) * f64({1, 2, kInf}, {3}),
                      "check_numerics: inf came into op 'mul' with its input 1 (element [2] of shape [3]; inputs: "
                      "f64 [3], f64 [3]); no checked op produced it: it was in the data, or written by code that "
                      "is not an op");
  // An op that drops the bad value (relu does not: NaN stays NaN; where does) passes.
  CHECK_NOTHROW(ops::where(Tensor::from_vector(std::vector<bool>{true, false, true}), data, vec({0, 0, 0})));
}

TEST_CASE("check_numerics checks with and without a tape and under NoGradGuard", "[check_numerics]") {
  const CheckNumerics on;
  const Tensor x = vec({-1, 4});
  CHECK_THROWS_WITH(ops::sqrt(x), Catch::Contains("op 'sqrt' produced NaN at element [0]"));
  {
    NoGradGuard no_grad;  // optimizer updates run like this
    CHECK_THROWS_WITH(ops::sqrt(x), Catch::Contains("op 'sqrt' produced NaN at element [0]"));
  }
  {
    GradientTape tape;
    tape.watch(x);
    CHECK_THROWS_WITH(ops::sqrt(x), Catch::Contains("op 'sqrt' produced NaN at element [0]"));
  }
  // Views are read through their strides: the NaN at [0, 1] of m sits at [1, 0] of its transpose.
  const Tensor m = f64({1, kNaN, 3, 4}, {2, 2});
  CHECK_THROWS_WITH(ops::transpose(m), Catch::Contains("NaN came into op 'permute' with its input 0 (element "
                                                       "[0, 1] of shape [2, 2]"));
  set_check_numerics(false);
  const Tensor transposed = ops::transpose(m);
  CHECK_THROWS_WITH(numerics::check_finite("probe", {}, {transposed}),
                    "check_numerics: op 'probe' produced NaN at element [1, 0] of its output of shape [2, 2] "
                    "(inputs: none)");
}

TEST_CASE("check_numerics names the backward rule an op ran in, and checks what backward rules return",
          "[check_numerics]") {
  const CheckNumerics on;
  SECTION("an op inside a backward rule") {
    const Tensor x = vec({0, 4});
    GradientTape tape;
    tape.watch(x);
    const Tensor y = ops::sum(ops::sqrt(x));  // finite forward; d sqrt / dx = 1 / (2 sqrt(x)) is inf at 0
    CHECK_THROWS_WITH(tape.gradient(y, {x}),
                      "check_numerics: op 'div' produced inf at element [0] of its output of shape [2] (inputs: f64 "
                      "[2], f64 [2]), in the backward rule of 'sqrt'");
  }
  SECTION("a backward rule's own result") {
    const Tensor x = vec({1, 2});
    GradientTape tape;
    tape.watch(x);
    const Tensor y = ops::neg(x);
    // An op with a hand-written backward that returns a NaN gradient without calling an op.
    const Tensor z = vec(values(y));
    autograd::record("custom", {y}, {z}, [](const std::vector<Tensor>&) { return std::vector<Tensor>{vec({kNaN, 0})}; });
    CHECK_THROWS_WITH(tape.gradient(z, {x}),
                      "check_numerics: op 'custom backward' produced NaN at element [0] of its gradient for input 0 "
                      "of shape [2] (output gradients: f64 [2])");
  }
  SECTION("a NaN output gradient given to gradient()") {
    const Tensor x = vec({1, 2});
    GradientTape tape;
    tape.watch(x);
    const Tensor y = x + 1.0;
    CHECK_THROWS_WITH(tape.gradient(y, {x}, vec({kNaN, 1})),
                      Catch::StartsWith("check_numerics: NaN came into op 'add backward' with its output gradient 0 "
                                        "(element [0] of shape [2]; output gradients: f64 [2])"));
  }
}

TEST_CASE("check_numerics changes no result: gradients and a short fit are bitwise the same on and off",
          "[check_numerics]") {
  auto train = [] {
    L::reset_layer_names();
    random::set_seed(3);
    const Tensor x = Tensor::randn({32, 6, 8}, DType::f32, 1);
    const Tensor y = Tensor::randn({32, 6, 1}, DType::f32, 2);
    auto model = L::Sequential({L::Input({6, 8}),
                                L::TransformerEncoder({.num_heads = 2, .ff_dim = 16, .dropout = 0.1, .flash_attention = true}),
                                L::Dense(1)});
    model.compile({.optimizer = optim::Adam({.learning_rate = 1e-2}), .loss = "mse"});
    const History h = model.fit(x, y, {.batch_size = 8, .epochs = 2, .verbose = 0, .seed = 4});
    std::vector<std::vector<double>> result{h.history.at("loss")};
    for (const Variable& w : model.weights()) result.push_back(values(w.value()));
    L::reset_layer_names();  // as the tests that follow expect to find them
    return result;
  };
  const auto off = train();
  std::vector<std::vector<double>> on;
  {
    const CheckNumerics checking;
    on = train();
  }
  CHECK(on == off);
}

TEST_CASE("check_numerics stops a diverging fit at the first op that overflows", "[check_numerics]") {
  L::reset_layer_names();
  const Tensor x = Tensor::full({8, 2}, 1e30, DType::f32);
  const Tensor y = Tensor::zeros({8, 1}, DType::f32);
  auto model = L::Sequential({L::Input({2}), L::Dense(1, {.kernel_initializer = L::initializers::constant(1e10)})});
  model.compile({.optimizer = "sgd", .loss = "mse"});
  const CheckNumerics on;
  // x @ kernel + bias = 2e40 overflows float32 in the Dense layer's forward product.
  CHECK_THROWS_WITH(model.fit(x, y, {.batch_size = 8, .epochs = 1, .verbose = 0}),
                    Catch::StartsWith("check_numerics: op 'dense' produced inf at element [0, 0] of its output of "
                                      "shape [8, 1] (inputs: f32 [8, 2], f32 [2, 1], f32 [1])"));
  L::reset_layer_names();  // as the tests that follow expect to find them
}

TEST_CASE("check_numerics leaves the attention path that Auto picks unchanged", "[check_numerics]") {
  // scaled_dot_product_attention_with_probabilities picks flash only when no tape tracks q or k; it asks
  // autograd::needs_recording, which check_numerics turns true, so the math path runs instead. Asking
  // autograd::tape_tracks keeps the choice.
  const Tensor q = Tensor::randn({1, 2, 64, 16}, DType::f32, 1), k = Tensor::randn({1, 2, 64, 16}, DType::f32, 2);
  const Tensor v = Tensor::randn({1, 2, 64, 16}, DType::f32, 3);
  const ops::AttentionOutputs off = ops::scaled_dot_product_attention_with_probabilities(q, k, v);
  const CheckNumerics on;
  const ops::AttentionOutputs checked = ops::scaled_dot_product_attention_with_probabilities(q, k, v);
  CHECK(values(checked.output) == values(off.output));
  CHECK(values(checked.probabilities) == values(off.probabilities));
}
