#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "framework/ops/ops.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;

namespace {

/// Keras's Adam step composed from ops, term by term: what adam_update fuses.
ops::AdamUpdate composed(const Tensor& w, const Tensor& g, const Tensor& m, const Tensor& v, const Tensor& v_hat,
                         double alpha, double beta_1, double beta_2, double epsilon) {
  ops::AdamUpdate out;
  out.m = m + (g - m) * (1.0 - beta_1);
  out.v = v + (ops::square(g) - v) * (1.0 - beta_2);
  Tensor second = out.v;
  if (v_hat.defined()) second = out.v_hat = ops::maximum(v_hat, out.v);
  out.variable = w - (out.m * alpha) / (ops::sqrt(second) + epsilon);
  return out;
}

}  // namespace

TEST_CASE("adam_update equals Adam's formula composed from ops, bit for bit", "[optimizers][updates]") {
  for (DType dtype : {DType::f32, DType::f64})
    for (bool amsgrad : {false, true}) {
      INFO(fmt::format("{}{}", dtype, amsgrad ? " amsgrad" : ""));
      const Shape shape{70, 33};  // more than one piece of parallel work
      const Tensor w = randn(shape, 1, dtype), g = randn(shape, 2, dtype);
      const Tensor m = randn(shape, 3, dtype) * 0.1;
      // A transposed (strided) v: the op reads any layout.
      const Tensor v = ops::transpose(ops::square(randn({33, 70}, 4, dtype)));
      const Tensor v_hat = amsgrad ? ops::square(randn(shape, 5, dtype)) : Tensor();
      const auto got = ops::adam_update(w, g, m, v, v_hat, 1e-3 * 0.3, 0.9, 0.999, 1e-7);
      const auto want = composed(w, g, m, v, v_hat, 1e-3 * 0.3, 0.9, 0.999, 1e-7);
      check_same_tensors({got.variable, got.m, got.v}, {want.variable, want.m, want.v});
      CHECK(got.v_hat.defined() == amsgrad);
      if (amsgrad) check_same_tensors({got.v_hat}, {want.v_hat});
    }
}

TEST_CASE("adam_update propagates NaN and refuses mismatched tensors", "[optimizers][updates]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor w = vec({1, 2}), g = vec({nan, 1}), m = vec({0, 0}), v = vec({0, 0});
  const auto step = ops::adam_update(w, g, m, v, vec({0, 0}), 0.1, 0.9, 0.999, 1e-7);
  CHECK(std::isnan(values(step.variable)[0]));
  CHECK(std::isnan(values(step.v_hat)[0]));
  CHECK(std::isfinite(values(step.variable)[1]));
  CHECK_THROWS_WITH(ops::adam_update(w, vec({1, 2, 3}), m, v, Tensor(), 0.1, 0.9, 0.999, 1e-7),
                    Catch::Contains("adam_update") && Catch::Contains("gradient f64 [3]"));
  CHECK_THROWS_WITH(ops::adam_update(w, ops::cast(g, DType::f32), m, v, Tensor(), 0.1, 0.9, 0.999, 1e-7),
                    Catch::Contains("one dtype"));
}
