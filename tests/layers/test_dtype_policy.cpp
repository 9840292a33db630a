#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "layers/attention/group_query_attention.hpp"
#include "layers/attention/multi_head_attention.hpp"
#include "layers/core/dense.hpp"
#include "layers/core/einsum_dense.hpp"
#include "layers/dtype_policy.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
using Catch::Contains;
namespace L = loom::layers;

// mixed_bfloat16 checked against float32: the same weights, the outputs and gradients within bf16's
// precision (operands rounded to 8 significant bits, products accumulated in float32).

namespace {

/// Sets the global policy for one test, then the default again.
struct GlobalPolicy {
  explicit GlobalPolicy(const std::string& name) { mixed_precision::set_global_policy(name); }
  ~GlobalPolicy() { mixed_precision::set_global_policy("float32"); }
  GlobalPolicy(const GlobalPolicy&) = delete;
  GlobalPolicy& operator=(const GlobalPolicy&) = delete;
};

/// got within `tol` of want's largest magnitude, and not equal to it: bf16 did round something, so the mixed
/// path really ran.
void check_relative(const Tensor& got, const Tensor& want, double tol) {
  check_same_tensors({got}, {want}, tol);
  CHECK(got.to_vector<double>() != want.to_vector<double>());
}

void copy_weights(const L::Layer& from, const L::Layer& to) {
  const std::vector<Variable> source = from.weights();
  std::vector<Variable> target = to.weights();
  REQUIRE(source.size() == target.size());
  for (std::size_t i = 0; i < source.size(); ++i) target[i].assign(source[i].value());
}

}  // namespace

TEST_CASE("dtype policies: Keras's names, and clear errors for the ones loom does not run", "[mixed_precision]") {
  CHECK(mixed_precision::global_policy().name == "float32");
  CHECK_FALSE(mixed_precision::global_policy().mixed_bfloat16);
  {
    const GlobalPolicy mixed("mixed_bfloat16");
    CHECK(mixed_precision::global_policy().mixed_bfloat16);
    const L::Dense made_now(4);
    CHECK(made_now.dtype_policy().name == "mixed_bfloat16");
    const L::Dense own(4, {.dtype = "float32"});
    CHECK_FALSE(own.dtype_policy().mixed_bfloat16);
  }
  const L::Dense after(4);
  CHECK_FALSE(after.dtype_policy().mixed_bfloat16);
  CHECK_THROWS_WITH(mixed_precision::set_global_policy("mixed_float16"), Contains("no float16"));
  CHECK_THROWS_WITH(mixed_precision::set_global_policy("float16"), Contains("no float16"));
  CHECK_THROWS_WITH(mixed_precision::set_global_policy("bfloat16"), Contains("use 'mixed_bfloat16'"));
  CHECK_THROWS_WITH(mixed_precision::set_global_policy("mixed_bf16"), Contains("unknown dtype policy 'mixed_bf16'"));
  CHECK_THROWS_WITH(L::Dense(4, {.name = "d", .dtype = "half"}), Contains("d: unknown dtype policy 'half'"));
  CHECK(mixed_precision::global_policy().name == "float32");  // a refused name changes nothing
  L::Dense built(4);
  built(Tensor::zeros({2, 3}));
  CHECK_THROWS_WITH(built.set_dtype_policy("mixed_bfloat16"), Contains("before the layer is built"));
}

TEST_CASE("a mixed_bfloat16 Dense keeps float32 variables and matches float32 within bf16's precision",
          "[mixed_precision]") {
  const Tensor x = randn({8, 5, 48}, 1, DType::f32);
  L::Dense reference(32, {.activation = "gelu"});
  L::Dense mixed(32, {.activation = "gelu", .dtype = "mixed_bfloat16"});
  const Tensor want = reference(x);
  mixed.maybe_build(x.shape(), DType::f32);
  copy_weights(reference, mixed);
  CHECK(mixed.kernel().value().dtype() == DType::f32);
  const Tensor got = mixed(x);
  CHECK(got.dtype() == DType::f32);
  check_relative(got, want, 2e-2);

  // Gradients of the float32 variables, float32 themselves.
  auto grads = [&](L::Dense& layer) {
    GradientTape tape;
    const Tensor loss = ops::sum(ops::square(layer(x, true)));
    return tape.gradient(loss, layer.trainable_weights());
  };
  const std::vector<Tensor> g = grads(mixed), r = grads(reference);
  REQUIRE(g.size() == 2);
  CHECK(g[0].dtype() == DType::f32);
  check_relative(g[0], r[0], 3e-2);
  check_relative(g[1], r[1], 3e-2);
  // A float64 input is computed in bf16 too; the variables stay float32.
  CHECK(mixed(ops::cast(x, DType::f64)).dtype() == DType::f32);
}

TEST_CASE("MultiHeadAttention under mixed_bfloat16: bf16 projections, float32 softmax, float32 result",
          "[mixed_precision]") {
  const Tensor q = randn({2, 12, 32}, 2, DType::f32), v = randn({2, 10, 32}, 3, DType::f32);
  L::MultiHeadAttention reference({.num_heads = 4, .key_dim = 8});
  const Tensor want = reference(q, v);
  std::optional<L::MultiHeadAttention> mixed;
  {
    const GlobalPolicy policy("mixed_bfloat16");
    mixed.emplace(L::MultiHeadAttentionOptions{.num_heads = 4, .key_dim = 8});
  }
  // Built (after the global policy was reset): the projections still take the layer's own policy.
  (*mixed)(q, v);
  copy_weights(reference, *mixed);
  for (const Variable& w : mixed->weights()) CHECK(w.value().dtype() == DType::f32);
  const Tensor got = (*mixed)(q, v);
  CHECK(got.dtype() == DType::f32);
  check_relative(got, want, 3e-2);
  const L::MultiHeadAttention own({.num_heads = 4, .key_dim = 8, .dtype = "mixed_bfloat16"});
  CHECK(own.dtype_policy().mixed_bfloat16);
}

TEST_CASE("attention layers under mixed_bfloat16 run the flash kernels on bf16 q, k, v", "[mixed_precision]") {
  // 80 queries and keys: the flash path (bf16 inputs, float32 results); the layers' gradients flow back to
  // the float32 inputs and weights.
  const Tensor x = randn({2, 80, 32}, 5, DType::f32);
  auto check = [&](auto& reference, auto& mixed, auto call) {
    const Tensor want = call(reference);
    (void)call(mixed);
    copy_weights(reference, mixed);
    GradientTape tape;
    tape.watch(x);
    const Tensor got = call(mixed);
    CHECK(got.dtype() == DType::f32);
    check_relative(got, want, 3e-2);
    GradientTape reference_tape;
    reference_tape.watch(x);
    const Tensor want_grad = reference_tape.gradient(ops::sum(call(reference)), {x})[0];
    const Tensor grad = tape.gradient(ops::sum(got), {x})[0];
    CHECK(grad.dtype() == DType::f32);
    check_relative(grad, want_grad, 5e-2);
  };
  SECTION("MultiHeadAttention") {
    L::MultiHeadAttention reference({.num_heads = 4, .key_dim = 8, .flash_attention = true});
    L::MultiHeadAttention mixed({.num_heads = 4, .key_dim = 8, .flash_attention = true, .dtype = "mixed_bfloat16"});
    check(reference, mixed, [&](L::MultiHeadAttention& layer) { return layer(x, x, {.use_causal_mask = true}); });
  }
  SECTION("GroupQueryAttention") {
    L::GroupQueryAttention reference({.head_dim = 8, .num_query_heads = 4, .num_key_value_heads = 2,
                                      .flash_attention = true});
    L::GroupQueryAttention mixed({.head_dim = 8, .num_query_heads = 4, .num_key_value_heads = 2,
                                  .flash_attention = true, .dtype = "mixed_bfloat16"});
    check(reference, mixed, [&](L::GroupQueryAttention& layer) { return layer(x, x); });
  }
}
