#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "framework/autograd/gradcheck.hpp"
#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;

namespace {

using UnaryOp = std::function<Tensor(const Tensor&)>;
using BinaryOp = std::function<Tensor(const Tensor&, const Tensor&)>;
using ScalarFn = std::function<double(double)>;

/// Inside the domain of log, sqrt, rsqrt and pow's base, away from 0.
Tensor positive(const Shape& shape, std::uint64_t seed) { return Tensor::uniform(shape, 0.5, 2.0, DType::f64, seed); }
std::vector<bool> bools(const Tensor& t) { return t.to_vector<bool>(); }

struct Unary {
  std::string name;
  UnaryOp op;
  ScalarFn reference;
  bool positive_domain;
};

double sigmoid_ref(double v) { return 1.0 / (1.0 + std::exp(-v)); }
double gelu_ref(double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); }
double gelu_tanh_ref(double v) {
  return 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (v + 0.044715 * v * v * v)));
}

const std::vector<Unary>& unary_ops() {
  static const std::vector<Unary> ops_table = {
      {"neg", [](const Tensor& x) { return ops::neg(x); }, [](double v) { return -v; }, false},
      {"square", [](const Tensor& x) { return ops::square(x); }, [](double v) { return v * v; }, false},
      {"sqrt", [](const Tensor& x) { return ops::sqrt(x); }, [](double v) { return std::sqrt(v); }, true},
      {"rsqrt", [](const Tensor& x) { return ops::rsqrt(x); }, [](double v) { return 1.0 / std::sqrt(v); }, true},
      {"exp", [](const Tensor& x) { return ops::exp(x); }, [](double v) { return std::exp(v); }, false},
      {"log", [](const Tensor& x) { return ops::log(x); }, [](double v) { return std::log(v); }, true},
      {"abs", [](const Tensor& x) { return ops::abs(x); }, [](double v) { return std::abs(v); }, false},
      {"clip", [](const Tensor& x) { return ops::clip(x, -0.5, 0.7); },
       [](double v) { return std::clamp(v, -0.5, 0.7); }, false},
      {"erf", [](const Tensor& x) { return ops::erf(x); }, [](double v) { return std::erf(v); }, false},
      {"tanh", [](const Tensor& x) { return ops::tanh(x); }, [](double v) { return std::tanh(v); }, false},
      {"sigmoid", [](const Tensor& x) { return ops::sigmoid(x); }, sigmoid_ref, false},
      {"relu", [](const Tensor& x) { return ops::relu(x); }, [](double v) { return std::max(v, 0.0); }, false},
      {"gelu", [](const Tensor& x) { return ops::gelu(x); }, gelu_ref, false},
      {"gelu_tanh", [](const Tensor& x) { return ops::gelu(x, /*approximate=*/true); }, gelu_tanh_ref, false},
      {"pow_scalar", [](const Tensor& x) { return ops::pow(x, 2.5); }, [](double v) { return std::pow(v, 2.5); }, true},
  };
  return ops_table;
}

struct Binary {
  std::string name;
  BinaryOp op;
  std::function<double(double, double)> reference;
  bool positive_domain;  // both operands drawn from [0.5, 2)
};

const std::vector<Binary>& binary_ops() {
  static const std::vector<Binary> ops_table = {
      {"add", [](const Tensor& a, const Tensor& b) { return ops::add(a, b); }, std::plus<double>{}, false},
      {"sub", [](const Tensor& a, const Tensor& b) { return ops::sub(a, b); }, std::minus<double>{}, false},
      {"mul", [](const Tensor& a, const Tensor& b) { return ops::mul(a, b); }, std::multiplies<double>{}, false},
      {"div", [](const Tensor& a, const Tensor& b) { return ops::div(a, b); }, std::divides<double>{}, true},
      {"pow", [](const Tensor& a, const Tensor& b) { return ops::pow(a, b); },
       [](double u, double v) { return std::pow(u, v); }, true},
      {"maximum", [](const Tensor& a, const Tensor& b) { return ops::maximum(a, b); },
       [](double u, double v) { return std::max(u, v); }, false},
      {"minimum", [](const Tensor& a, const Tensor& b) { return ops::minimum(a, b); },
       [](double u, double v) { return std::min(u, v); }, false},
  };
  return ops_table;
}

Tensor operand(const Binary& op, const Shape& shape, std::uint64_t seed) {
  return op.positive_domain ? positive(shape, seed) : randn(shape, seed);
}

/// Shapes gradchecked for every binary op: equal, row broadcast, outer broadcast, scalar on either side.
const std::vector<std::pair<Shape, Shape>> kBroadcastCases = {
    {{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{2, 1}, {1, 4}}, {{}, {2, 3}}, {{2, 3}, {}}};

}  // namespace

// ---- forward values ----

TEST_CASE("unary ops match the std:: functions", "[elementwise]") {
  for (const auto& op : unary_ops()) {
    INFO(op.name);
    Tensor x = op.positive_domain ? positive({4, 5}, 1) : randn({4, 5}, 1) * 2.0;
    Tensor y = op.op(x);
    CHECK(y.shape() == x.shape());
    CHECK(y.dtype() == DType::f64);
    auto in = values(x);
    auto out = values(y);
    for (std::size_t i = 0; i < in.size(); ++i)
      CHECK(out[i] == Approx(op.reference(in[i])).epsilon(1e-12).margin(1e-15));
  }
}

TEST_CASE("binary ops match the std:: functions under broadcasting", "[elementwise]") {
  for (const auto& op : binary_ops()) {
    INFO(op.name);
    Tensor a = operand(op, {2, 1, 3}, 2);
    Tensor b = operand(op, {4, 1}, 3);
    Tensor y = op.op(a, b);
    REQUIRE(y.shape() == Shape{2, 4, 3});
    auto av = values(a), bv = values(b), yv = values(y);
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 4; ++j)
        for (int k = 0; k < 3; ++k)
          CHECK(yv[std::size_t(i * 12 + j * 3 + k)] ==
                Approx(op.reference(av[std::size_t(i * 3 + k)], bv[std::size_t(j)])).epsilon(1e-12));
  }
}

TEST_CASE("broadcasting follows NumPy on known values", "[elementwise]") {
  Tensor m = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(values(m + vec({10, 20, 30})) == std::vector<double>{11, 22, 33, 14, 25, 36});
  Tensor col = Tensor::from_vector(std::vector<double>{1, 2}, {2, 1});
  Tensor row = Tensor::from_vector(std::vector<double>{1, 10, 100, 1000}, {1, 4});
  Tensor outer = col * row;
  CHECK(outer.shape() == Shape{2, 4});
  CHECK(values(outer) == std::vector<double>{1, 10, 100, 1000, 2, 20, 200, 2000});
  CHECK(values(Tensor::scalar(12.0, DType::f64) / m) == std::vector<double>{12, 6, 4, 3, 2.4, 2});
  CHECK((m - Tensor::scalar(1.0, DType::f64)).shape() == Shape{2, 3});
  // an empty dimension broadcasts to an empty result
  Tensor empty = Tensor::zeros({0, 3}, DType::f64);
  CHECK((empty + vec({1, 2, 3})).shape() == Shape{0, 3});
}

TEST_CASE("elementwise ops read strided views: transposed, sliced and broadcast (0-stride) inputs", "[elementwise]") {
  Tensor base = randn({3, 4}, 4);
  Tensor t = base.transpose();                         // [4, 3], strides (1, 4)
  Tensor s = base.slice(1, 0, 4, 2);                   // [3, 2], strides (4, 2)
  Tensor bcast = vec({1, 2, 3}).broadcast_to({4, 3});  // stride 0 on axis 0
  Tensor tc = t.contiguous(), sc = s.contiguous(), bc = bcast.contiguous();
  CHECK(values(ops::mul(t, bcast)) == values(ops::mul(tc, bc)));
  CHECK(values(ops::exp(t)) == values(ops::exp(tc)));
  CHECK(values(ops::add(s, s)) == values(ops::add(sc, sc)));
  CHECK(values(ops::sub(t, vec({1, 2, 3}))) == values(ops::sub(tc, vec({1, 2, 3}))));
  CHECK(values(ops::maximum(s.transpose(), Tensor::scalar(0.0, DType::f64))) ==
        values(ops::relu(sc.transpose().contiguous())));
  CHECK(bools(ops::less(t, bcast)) == bools(ops::less(tc, bc)));
  CHECK(values(ops::cast(ops::cast(t, DType::f32), DType::f64)) ==
        values(ops::cast(ops::cast(tc, DType::f32), DType::f64)));
  // a size-1 dimension with a nonzero stride is broadcast as well
  Tensor column = base.slice(1, 1, 2);  // [3, 1], stride 4 along the size-1 axis
  CHECK(values(ops::add(column, Tensor::zeros({3, 2}, DType::f64))) ==
        values(ops::add(column.contiguous(), Tensor::zeros({3, 2}, DType::f64))));
}

TEST_CASE("the general broadcast path agrees with contiguous copies on permuted 3-D views", "[elementwise]") {
  Tensor v = randn({4, 3, 2}, 25).permute({2, 0, 1});  // [2, 4, 3], no dimension contiguous
  Tensor vc = v.contiguous();
  for (const Shape& other : {Shape{4, 1}, Shape{3}, Shape{2, 1, 3}, Shape{1, 4, 3}, Shape{2, 4, 3}}) {
    INFO(fmt::format("{}", other));
    Tensor w = randn(other, 26);
    CHECK(values(ops::sub(v, w)) == values(ops::sub(vc, w)));
    CHECK(values(ops::sub(w, v)) == values(ops::sub(w, vc)));
    Tensor cond = ops::greater(w, Tensor::scalar(0.0, DType::f64));
    CHECK(values(ops::where(cond, v, w)) == values(ops::where(cond, vc, w)));
  }
  // a [2, 3, 4] + [4] broadcast merges the two outer dimensions into one walk of 6 rows
  Tensor a = randn({2, 3, 4}, 27), bias = randn({4}, 28);
  auto av = values(a), bv = values(bias), yv = values(a + bias);
  for (std::size_t i = 0; i < av.size(); ++i) CHECK(yv[i] == av[i] + bv[i % 4]);
}

TEST_CASE("gelu matches Keras' exact and tanh-approximate formulas", "[elementwise]") {
  // math.erf / math.tanh in Python: keras.activations.gelu(x, approximate=False / True)
  Tensor x = vec({-2.0, -0.5, 0.0, 1.0, 3.0});
  std::vector<double> exact{-0.04550026389635842, -0.15426876936299344, 0.0, 0.8413447460685429, 2.99595030590511};
  std::vector<double> approx{-0.04540230591222494, -0.15428599017485606, 0.0, 0.8411919906082768, 2.996362607918227};
  auto e = values(ops::gelu(x));
  auto a = values(ops::gelu(x, true));
  for (std::size_t i = 0; i < exact.size(); ++i) {
    CHECK(e[i] == Approx(exact[i]).epsilon(1e-14).margin(1e-16));
    CHECK(a[i] == Approx(approx[i]).epsilon(1e-14).margin(1e-16));
  }
}

TEST_CASE("sigmoid, tanh and gelu stay finite at +-1e4", "[elementwise]") {
  for (DType dtype : {DType::f32, DType::f64}) {
    Tensor x = vec({-1e4, 1e4}).to(dtype);
    CHECK(values(ops::sigmoid(x)) == std::vector<double>{0.0, 1.0});
    CHECK(values(ops::tanh(x)) == std::vector<double>{-1.0, 1.0});
    CHECK(values(ops::gelu(x)) == std::vector<double>{0.0, 1e4});
    CHECK(values(ops::gelu(x, true)) == std::vector<double>{0.0, 1e4});
    // and so do their gradients
    Tensor w = x.clone();
    GradientTape tape;
    tape.watch(w);
    Tensor y = ops::add(ops::sigmoid(w), ops::tanh(w));
    for (double g : values(tape.gradient(y, {w})[0])) CHECK(std::isfinite(g));
  }
}

TEST_CASE("log follows NumPy outside its domain: -inf at 0, NaN below", "[elementwise]") {
  auto y = values(ops::log(vec({0.0, -1.0, 1.0})));
  CHECK(y[0] == -std::numeric_limits<double>::infinity());
  CHECK(std::isnan(y[1]));
  CHECK(y[2] == 0.0);
  CHECK(std::isnan(values(ops::sqrt(vec({-1.0})))[0]));
}

TEST_CASE("maximum and minimum propagate NaN, and sign, abs and relu at special values", "[elementwise]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(std::isnan(values(ops::maximum(vec({nan, 1}), vec({1, nan})))[0]));
  CHECK(std::isnan(values(ops::maximum(vec({nan, 1}), vec({1, nan})))[1]));
  CHECK(std::isnan(values(ops::minimum(vec({nan, 1}), vec({1, nan})))[1]));
  CHECK(values(ops::sign(vec({-3, 0, 2}))) == std::vector<double>{-1, 0, 1});
  CHECK(std::isnan(values(ops::sign(vec({nan})))[0]));
  CHECK(values(ops::relu(vec({-1, 0, 2}))) == std::vector<double>{0, 0, 2});
  CHECK(values(ops::clip(vec({-5, 0.25, 5}), -1, 1)) == std::vector<double>{-1, 0.25, 1});
}

TEST_CASE("f32 results agree with f64", "[elementwise]") {
  for (const auto& op : unary_ops()) {
    INFO(op.name);
    Tensor x = op.positive_domain ? positive({3, 7}, 5) : randn({3, 7}, 5);
    Tensor y64 = op.op(x);
    Tensor y32 = op.op(x.to(DType::f32));
    REQUIRE(y32.dtype() == DType::f32);
    auto a = values(y32), b = values(y64);
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).epsilon(1e-5).margin(1e-6));
  }
  for (const auto& op : binary_ops()) {
    INFO(op.name);
    Tensor a = operand(op, {3, 7}, 6), b = operand(op, {7}, 7);
    auto y32 = values(op.op(a.to(DType::f32), b.to(DType::f32)));
    auto y64 = values(op.op(a, b));
    for (std::size_t i = 0; i < y32.size(); ++i) CHECK(y32[i] == Approx(y64[i]).epsilon(1e-5).margin(1e-6));
  }
}

// ---- gradients ----

TEST_CASE("gradcheck: binary ops, with broadcasting and non-contiguous inputs", "[elementwise]") {
  for (const auto& op : binary_ops()) {
    for (const auto& [sa, sb] : kBroadcastCases) {
      INFO(op.name << " " << fmt::format("{} with {}", sa, sb));
      auto r = gradcheck([&](const std::vector<Tensor>& in) { return op.op(in[0], in[1]); },
                         {operand(op, sa, 8), operand(op, sb, 9)});
      CHECK(r.message == "");
    }
    INFO(op.name << " with a transposed input");
    Tensor t = op.positive_domain ? positive({3, 2}, 10).transpose() : randn({3, 2}, 10).transpose();
    auto r = gradcheck([&](const std::vector<Tensor>& in) { return op.op(in[0], in[1]); }, {t, operand(op, {3}, 11)});
    CHECK(r.message == "");
  }
}

TEST_CASE("gradcheck: unary ops and activations, also on transposed inputs", "[elementwise]") {
  for (const auto& op : unary_ops()) {
    for (bool transposed : {false, true}) {
      INFO(op.name << (transposed ? " transposed" : ""));
      Tensor x = op.positive_domain ? positive({3, 2}, 12) : randn({3, 2}, 12) * 1.5;
      if (transposed) x = ops::transpose(x);
      auto r = gradcheck([&](const std::vector<Tensor>& in) { return op.op(in[0]); }, {x});
      CHECK(r.message == "");
    }
  }
}

TEST_CASE("gradients at kinks: relu and abs give 0 at 0, maximum and minimum favour a on ties", "[elementwise]") {
  Tensor x = vec({-1, 0, 2});
  Tensor b = vec({0, 0, 0});
  GradientTape tape({.persistent = true});
  tape.watch(x);
  tape.watch(b);
  CHECK(values(tape.gradient(ops::relu(x), {x})[0]) == std::vector<double>{0, 0, 1});
  CHECK(values(tape.gradient(ops::abs(x), {x})[0]) == std::vector<double>{-1, 0, 1});
  auto gmax = tape.gradient(ops::maximum(x, b), {x, b});
  CHECK(values(gmax[0]) == std::vector<double>{0, 1, 1});
  CHECK(values(gmax[1]) == std::vector<double>{1, 0, 0});
  auto gmin = tape.gradient(ops::minimum(x, b), {x, b});
  CHECK(values(gmin[0]) == std::vector<double>{1, 1, 0});
  CHECK(values(gmin[1]) == std::vector<double>{0, 0, 1});
  CHECK(values(tape.gradient(ops::clip(x, 0, 2), {x})[0]) == std::vector<double>{0, 1, 1});
  CHECK(values(tape.gradient(ops::sign(x), {x})[0]) == std::vector<double>{0, 0, 0});
}

TEST_CASE("gradgradcheck: second-order gradients", "[elementwise]") {
  std::vector<std::string> unary_second_order{"exp",       "log",        "tanh", "sigmoid", "sqrt",
                                              "rsqrt",     "square",     "neg",  "erf",     "gelu",
                                              "gelu_tanh", "pow_scalar", "abs",  "relu",    "clip"};
  for (const auto& op : unary_ops()) {
    if (std::find(unary_second_order.begin(), unary_second_order.end(), op.name) == unary_second_order.end()) continue;
    INFO(op.name);
    Tensor x = op.positive_domain ? positive({2, 3}, 13) : randn({2, 3}, 13);
    auto r = gradgradcheck([&](const std::vector<Tensor>& in) { return op.op(in[0]); }, {x});
    CHECK(r.message == "");
  }
  for (const auto& op : binary_ops()) {
    INFO(op.name);
    auto r = gradgradcheck([&](const std::vector<Tensor>& in) { return op.op(in[0], in[1]); },
                           {operand(op, {2, 3}, 14), operand(op, {3}, 15)});
    CHECK(r.message == "");
  }
}

TEST_CASE("gradcheck and gradgradcheck: operators with scalars", "[elementwise]") {
  auto fn = [](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    return (2.0 - x) / (x * x + 1.0) - 3.0 * x + 1.0 / (x + 5.0) * 0.5 - (-x);
  };
  CHECK(gradcheck(fn, {randn({2, 3}, 16)}).message == "");
  CHECK(gradgradcheck(fn, {randn({2, 3}, 16)}).message == "");
}

TEST_CASE("where and masked_fill: values, broadcasting and gradients", "[elementwise]") {
  Tensor cond = Tensor::from_vector(std::vector<bool>{true, false, true, false, false, true}, {2, 3});
  Tensor a = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = vec({-1, -2, -3});
  CHECK(values(ops::where(cond, a, b)) == std::vector<double>{1, -2, 3, -1, -2, 6});
  // three-way broadcast: a column condition, a row and a scalar
  Tensor col = Tensor::from_vector(std::vector<bool>{true, false}, {2, 1});
  Tensor y = ops::where(col, b, Tensor::scalar(9.0, DType::f64));
  CHECK(y.shape() == Shape{2, 3});
  CHECK(values(y) == std::vector<double>{-1, -2, -3, 9, 9, 9});
  CHECK(values(ops::masked_fill(a, col, -7)) == std::vector<double>{-7, -7, -7, 4, 5, 6});
  CHECK(ops::where(cond, a.to(DType::i64), Tensor::zeros({2, 3}, DType::i64)).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{1, 0, 3, 0, 0, 6});
  auto r = gradcheck([&](const std::vector<Tensor>& in) { return ops::where(cond, in[0], in[1]); },
                     {randn({2, 3}, 17), randn({3}, 18)});
  CHECK(r.message == "");
  r = gradcheck([&](const std::vector<Tensor>& in) { return ops::where(col, in[0], in[1]); },
                {randn({3, 2}, 19).transpose(), randn({}, 20)});
  CHECK(r.message == "");
  r = gradgradcheck([&](const std::vector<Tensor>& in) { return ops::where(cond, ops::mul(in[0], in[0]), in[1]); },
                    {randn({2, 3}, 21), randn({2, 3}, 22)});
  CHECK(r.message == "");
  r = gradcheck([&](const std::vector<Tensor>& in) { return ops::masked_fill(in[0], col, 3.0); }, {randn({2, 3}, 23)});
  CHECK(r.message == "");
}

TEST_CASE("comparisons and logical ops broadcast and return booleans", "[elementwise]") {
  Tensor a = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = vec({2, 2, 7});
  CHECK(ops::equal(a, b).dtype() == DType::boolean);
  CHECK(bools(ops::equal(a, b)) == std::vector<bool>{false, true, false, false, false, false});
  CHECK(bools(ops::not_equal(a, b)) == std::vector<bool>{true, false, true, true, true, true});
  CHECK(bools(ops::less(a, b)) == std::vector<bool>{true, false, true, false, false, true});
  CHECK(bools(ops::less_equal(a, b)) == std::vector<bool>{true, true, true, false, false, true});
  CHECK(bools(ops::greater(a, b)) == std::vector<bool>{false, false, false, true, true, false});
  CHECK(bools(ops::greater_equal(a, b)) == std::vector<bool>{false, true, false, true, true, false});
  CHECK(bools(ops::less(a.to(DType::f32), b.to(DType::f32))) == bools(ops::less(a, b)));
  Tensor i = Tensor::from_vector(std::vector<std::int64_t>{3, -1, 4});
  CHECK(bools(ops::greater(i, Tensor::scalar(0, DType::i64))) == std::vector<bool>{true, false, true});
  Tensor p = Tensor::from_vector(std::vector<bool>{true, true, false, false});
  Tensor q = Tensor::from_vector(std::vector<bool>{true, false, true, false});
  CHECK(bools(ops::logical_and(p, q)) == std::vector<bool>{true, false, false, false});
  CHECK(bools(ops::logical_or(p, q)) == std::vector<bool>{true, true, true, false});
  CHECK(bools(ops::logical_not(p)) == std::vector<bool>{false, false, true, true});
  Tensor c = Tensor::from_vector(std::vector<bool>{true, false}, {2, 1});
  CHECK(ops::logical_and(c, q).shape() == Shape{2, 4});
  CHECK(bools(ops::logical_or(c, Tensor::from_vector(std::vector<bool>{false, false}, {1, 2}))) ==
        std::vector<bool>{true, true, false, false});
}

TEST_CASE("cast converts between all dtypes and f32 <-> f64 is differentiable", "[elementwise]") {
  Tensor x = vec({-1.5, 0.0, 2.7});
  CHECK(x.to(DType::f32).dtype() == DType::f32);
  CHECK(x.to(DType::i64).to_vector<std::int64_t>() == std::vector<std::int64_t>{-1, 0, 2});  // toward zero
  CHECK(x.to(DType::boolean).to_vector<bool>() == std::vector<bool>{true, false, true});
  Tensor flags = Tensor::from_vector(std::vector<bool>{true, false});
  CHECK(values(flags.to(DType::f32)) == std::vector<double>{1, 0});
  CHECK(flags.to(DType::i64).to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 0});
  Tensor ints = Tensor::from_vector(std::vector<std::int64_t>{-3, 0, 5});
  CHECK(values(ints.to(DType::f64)) == std::vector<double>{-3, 0, 5});
  CHECK(ints.to(DType::boolean).to_vector<bool>() == std::vector<bool>{true, false, true});
  CHECK(ops::cast(x, DType::f64).id() == x.id());  // same dtype: the tensor itself
  // f32 rounding makes the default finite-difference step too fine; the derivative is exactly 1
  auto r = gradcheck([](const std::vector<Tensor>& in) { return ops::cast(ops::cast(in[0], DType::f32), DType::f64); },
                     {randn({3, 2}, 24).transpose()}, {.eps = 1e-2, .atol = 1e-4, .rtol = 1e-3});
  CHECK(r.message == "");
  Tensor w = vec({1, 2});
  GradientTape tape;
  tape.watch(w);
  auto g = tape.gradient(ops::square(w.to(DType::f32)), {w});
  CHECK(g[0].dtype() == DType::f64);
  CHECK(values(g[0]) == std::vector<double>{2, 4});
}

// ---- bad input ----

TEST_CASE("elementwise ops reject bad input with clear messages", "[elementwise]") {
  Tensor a = Tensor::zeros({2, 3}, DType::f64);
  Tensor b = Tensor::zeros({4}, DType::f64);
  REQUIRE_THROWS_WITH(ops::add(a, b), Catch::Contains("add") && Catch::Contains("[2, 3]") && Catch::Contains("[4]"));
  REQUIRE_THROWS_WITH(ops::pow(a, b), Catch::Contains("pow") && Catch::Contains("[2, 3]") && Catch::Contains("[4]"));
  REQUIRE_THROWS_WITH(ops::less(a, b), Catch::Contains("less") && Catch::Contains("[2, 3]") && Catch::Contains("[4]"));
  REQUIRE_THROWS_WITH(ops::mul(a, Tensor::zeros({3}, DType::f32)),
                      Catch::Contains("mul") && Catch::Contains("f64") && Catch::Contains("f32") &&
                          Catch::Contains("[2, 3]") && Catch::Contains("[3]"));
  REQUIRE_THROWS_WITH(a + Tensor::zeros({2, 3}, DType::i64), Catch::Contains("add") && Catch::Contains("i64"));
  Tensor mask = Tensor::zeros({2, 3}, DType::boolean);
  REQUIRE_THROWS_WITH(ops::exp(mask), Catch::Contains("exp") && Catch::Contains("bool") && Catch::Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(ops::add(mask, mask), Catch::Contains("add") && Catch::Contains("bool"));
  REQUIRE_THROWS_WITH(ops::gelu(Tensor::zeros({2}, DType::i64)), Catch::Contains("gelu") && Catch::Contains("i64"));
  REQUIRE_THROWS_WITH(ops::tanh(Tensor()), Catch::Contains("tanh") && Catch::Contains("undefined"));
  REQUIRE_THROWS_WITH(ops::sub(a, Tensor()), Catch::Contains("sub") && Catch::Contains("undefined"));
  REQUIRE_THROWS_WITH(Tensor() * 2.0, Catch::Contains("undefined"));
  REQUIRE_THROWS_WITH(ops::clip(a, 1.0, -1.0), Catch::Contains("clip") && Catch::Contains("lo <= hi"));
  REQUIRE_THROWS_WITH(ops::greater(mask, mask), Catch::Contains("greater") && Catch::Contains("bool"));
  REQUIRE_THROWS_WITH(ops::logical_and(a, a), Catch::Contains("logical_and") && Catch::Contains("f64"));
  REQUIRE_THROWS_WITH(ops::logical_not(a), Catch::Contains("logical_not") && Catch::Contains("f64"));
  REQUIRE_THROWS_WITH(ops::where(a, a, a), Catch::Contains("where") && Catch::Contains("boolean"));
  REQUIRE_THROWS_WITH(ops::where(mask, a, b),
                      Catch::Contains("where") && Catch::Contains("[2, 3]") && Catch::Contains("[4]"));
  REQUIRE_THROWS_WITH(ops::where(mask, a, a.to(DType::f32)), Catch::Contains("where") && Catch::Contains("f32"));
  REQUIRE_THROWS_WITH(ops::masked_fill(Tensor::zeros({3}, DType::f64), mask, 0.0),
                      Catch::Contains("masked_fill") && Catch::Contains("[2, 3]") && Catch::Contains("[3]"));
  REQUIRE_THROWS_WITH(ops::masked_fill(a, a, 0.0), Catch::Contains("masked_fill") && Catch::Contains("boolean"));
  REQUIRE_THROWS_WITH(ops::cast(vec({1.0, std::nan("")}), DType::i64),
                      Catch::Contains("cast") && Catch::Contains("nan") && Catch::Contains("i64"));
  REQUIRE_THROWS_WITH(ops::cast(vec({1e30}), DType::i64), Catch::Contains("cast") && Catch::Contains("i64"));
  REQUIRE_THROWS_WITH(ops::cast(Tensor(), DType::f32), Catch::Contains("cast") && Catch::Contains("undefined"));
}

TEST_CASE("operators take the tensor's dtype for scalars", "[elementwise]") {
  Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 4});
  for (const Tensor& y : {x + 1.0, 1.0 + x, x - 1.0, 1.0 - x, x * 2.0, 2.0 * x, x / 2.0, 8.0 / x, -x, x * x})
    CHECK(y.dtype() == DType::f32);
  CHECK(values(8.0 / x) == std::vector<double>{8, 4, 2});
  CHECK(values(1.0 - x) == std::vector<double>{0, -1, -3});
  CHECK(values(x - 1.0) == std::vector<double>{0, 1, 3});
  CHECK(values(x / 2.0) == std::vector<double>{0.5, 1, 2});
  CHECK(values(-x) == std::vector<double>{-1, -2, -4});
}
