#include <catch2/catch.hpp>

#include "framework/autograd/gradcheck.hpp"
#include "framework/autograd/record.hpp"
#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"

using namespace loom;

namespace {

/// y = x^2 with a backward rule that forgets the factor 2: gradcheck must catch it.
Tensor square_with_wrong_gradient(const Tensor& x) {
  Tensor y;
  {
    NoGradGuard no_grad;
    y = x * x;
  }
  if (autograd::needs_recording({&x}))
    autograd::record("wrong_square", {x}, {y},
                     [x](const std::vector<Tensor>& g) { return std::vector<Tensor>{g[0] * x}; });
  return y;
}

/// y = x^3 whose first derivative is right but written with a raw copy, so the second derivative is lost.
Tensor cube_with_constant_backward(const Tensor& x) {
  Tensor y;
  {
    NoGradGuard no_grad;
    y = x * x * x;
  }
  if (autograd::needs_recording({&x}))
    autograd::record("cube_first_order_only", {x}, {y}, [x](const std::vector<Tensor>& g) {
      Tensor slope;
      {
        NoGradGuard no_grad;  // hides the dependence on x from outer tapes: a wrong second derivative
        slope = x * x * 3.0;
      }
      return std::vector<Tensor>{g[0] * slope};
    });
  return y;
}

/// y = 2x with a backward rule that ignores the output gradient: the zero-cotangent check must catch it.
Tensor double_ignoring_cotangent(const Tensor& x) {
  Tensor y;
  {
    NoGradGuard no_grad;
    y = x * 2.0;
  }
  if (autograd::needs_recording({&x}))
    autograd::record("double_ignoring_cotangent", {x}, {y},
                     [](const std::vector<Tensor>& g) { return std::vector<Tensor>{Tensor::full(g[0].shape(), 2.0, g[0].dtype())}; });
  return y;
}

}  // namespace

TEST_CASE("gradcheck passes a correct gradient", "[gradcheck]") {
  Tensor x = Tensor::randn({2, 3}, DType::f64, 1);
  Tensor w = Tensor::randn({3, 2}, DType::f64, 2);
  auto r = gradcheck([](const std::vector<Tensor>& in) { return ops::tanh(ops::matmul(in[0], in[1])); }, {x, w});
  INFO(r.message);
  CHECK(r.ok);
  CHECK(r.message.empty());
}

TEST_CASE("gradcheck reports a wrong backward rule, naming input, element and values", "[gradcheck]") {
  Tensor x = Tensor::from_vector(std::vector<double>{1.0, 2.0, 3.0}, {3});
  auto r = gradcheck([](const std::vector<Tensor>& in) { return square_with_wrong_gradient(in[0]); }, {x});
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.message, Catch::Contains("input 0") && Catch::Contains("element (2)") &&
                            Catch::Contains("analytic 3") && Catch::Contains("numeric 6"));
}

TEST_CASE("gradcheck reports a backward rule that ignores the output gradient", "[gradcheck]") {
  Tensor x = Tensor::from_vector(std::vector<double>{1.0, 2.0}, {2});
  auto r = gradcheck([](const std::vector<Tensor>& in) { return ops::sum(double_ignoring_cotangent(in[0])); }, {x});
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.message, Catch::Contains("zero output gradient"));
}

TEST_CASE("gradgradcheck passes true second derivatives and catches lost ones", "[gradcheck]") {
  Tensor x = Tensor::from_vector(std::vector<double>{0.5, -1.5, 2.0}, {3});
  auto cube = [](const std::vector<Tensor>& in) { return in[0] * in[0] * in[0]; };
  CHECK(gradcheck(cube, {x}).ok);
  auto good = gradgradcheck(cube, {x});
  INFO(good.message);
  CHECK(good.ok);

  auto first_only = [](const std::vector<Tensor>& in) { return cube_with_constant_backward(in[0]); };
  CHECK(gradcheck(first_only, {x}).ok);  // first order is right
  auto bad = gradgradcheck(first_only, {x});
  CHECK_FALSE(bad.ok);
  CHECK_THAT(bad.message, Catch::Contains("second order"));
}

TEST_CASE("gradcheck accepts views as inputs and restores them", "[gradcheck]") {
  Tensor base = Tensor::randn({3, 2}, DType::f64, 5);
  Tensor x = base.transpose();  // a non-contiguous view
  const auto before = base.to_vector<double>();
  auto r = gradcheck([](const std::vector<Tensor>& in) { return ops::exp(in[0]) * 2.0; }, {x});
  INFO(r.message);
  CHECK(r.ok);
  CHECK(base.to_vector<double>() == before);
}

TEST_CASE("gradcheck rejects float32 and overlapping inputs", "[gradcheck][errors]") {
  auto identity = [](const std::vector<Tensor>& in) { return in[0] * 1.0; };
  CHECK_THROWS_WITH(gradcheck(identity, {Tensor::ones({2}, DType::f32)}), Catch::Contains("float64"));
  Tensor overlapping = Tensor::ones({3}, DType::f64).broadcast_to({2, 3});
  CHECK_THROWS_WITH(gradcheck(identity, {overlapping}), Catch::Contains("overlapping"));
  CHECK_THROWS_WITH(gradcheck(identity, {}), Catch::Contains("at least one input"));
}
