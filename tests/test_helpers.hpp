#pragma once
// Helpers shared by the test files: building float64 tensors, reading values back, comparing them and
// asserting gradient checks. Header-only; include after <catch2/catch.hpp> and add
// `using namespace loom::testing;`.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <string_view>
#include <vector>

#include "framework/autograd/gradcheck.hpp"
#include "framework/tensor/tensor.hpp"

namespace loom::testing {

inline constexpr double kInf = std::numeric_limits<double>::infinity();

/// Marks the running test case as skipped, for a case this build or machine cannot run (ctest reports it as
/// "Skipped", tests/CMakeLists.txt); the caller returns right after: `return skip_test("built without MPI");`.
inline void skip_test(std::string_view reason) { std::cout << "LOOM_TEST_SKIPPED: " << reason << std::endl; }

/// A 1-D float64 tensor of these values.
inline Tensor vec(const std::vector<double>& values) { return Tensor::from_vector(values); }
/// A float64 (or int64) tensor of these row-major values in the given shape.
inline Tensor f64(const std::vector<double>& values, const Shape& shape) { return Tensor::from_vector(values, shape); }
inline Tensor i64(const std::vector<std::int64_t>& values, const Shape& shape) {
  return Tensor::from_vector(values, shape);
}
/// 0, 1, 2, ... in the given shape and dtype.
inline Tensor iota(const Shape& shape, DType dtype = DType::f64) {
  return Tensor::arange(0.0, double(numel(shape)), 1.0, dtype).reshape(shape);
}
/// Seeded standard normal values, float64 unless asked otherwise.
inline Tensor randn(const Shape& shape, std::uint64_t seed, DType dtype = DType::f64) {
  return Tensor::randn(shape, dtype, seed);
}

/// The values of any tensor (any dtype, any strides) as doubles, row-major.
inline std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

/// CHECKs got[i] == want[i] within rtol (relative) or atol (absolute); an infinite want must be matched
/// exactly.
inline void check_close(const std::vector<double>& got, const std::vector<double>& want, double rtol, double atol) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(want[i])) CHECK(got[i] == want[i]);
    else CHECK(got[i] == Approx(want[i]).epsilon(rtol).margin(atol));
  }
}
/// The same with one tolerance, both relative and absolute.
inline void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-12) {
  check_close(got, want, tol, tol);
}

/// CHECKs that each tensor of `got` equals its twin in `want`: bit for bit when `relative` is 0, else within
/// `relative` of the twin's largest magnitude (gradients summed in another order).
inline void check_same_tensors(const std::vector<Tensor>& got, const std::vector<Tensor>& want, double relative = 0.0) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    REQUIRE(got[i].defined());
    REQUIRE(want[i].defined());
    REQUIRE(got[i].shape() == want[i].shape());
    const std::vector<double> x = values(got[i]), y = values(want[i]);
    double worst = 0, scale = 0;
    for (std::size_t k = 0; k < x.size(); ++k) {
      worst = std::max(worst, std::abs(x[k] - y[k]));
      scale = std::max(scale, std::abs(y[k]));
    }
    INFO("tensor " << i << ": largest difference " << worst << " at scale " << scale);
    if (relative == 0.0) CHECK(x == y);
    else CHECK(worst <= relative * scale);
  }
}

/// REQUIREs that gradcheck (first order) or gradgradcheck (second order) passes, showing its message if not.
inline void require_gradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs) {
  const GradcheckResult r = gradcheck(fn, inputs);
  INFO(r.message);
  REQUIRE(r.ok);
}
inline void require_gradgradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs) {
  const GradcheckResult r = gradgradcheck(fn, inputs);
  INFO(r.message);
  REQUIRE(r.ok);
}

}  // namespace loom::testing
