#include <catch2/catch.hpp>

#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "framework/autograd/gradcheck.hpp"
#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
using Catch::Contains;

namespace {

/// Multi-index of element `flat` of a row-major `shape`.
std::vector<std::int64_t> unravel(std::int64_t flat, const Shape& shape) {
  std::vector<std::int64_t> index(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    index[d] = shape[d] == 0 ? 0 : flat % shape[d];
    flat = shape[d] == 0 ? 0 : flat / shape[d];
  }
  return index;
}

/// Element of the row-major `values` of `shape` at `index` aligned to the right of `full` (NumPy
/// broadcasting: size-1 dimensions repeat).
double at_broadcast(const std::vector<double>& values, const Shape& shape, const std::vector<std::int64_t>& index) {
  std::int64_t flat = 0;
  const std::size_t skip = index.size() - shape.size();
  for (std::size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + (shape[d] == 1 ? 0 : index[skip + d]);
  return values[std::size_t(flat)];
}

/// NumPy matmul by the definition: triple loop over every broadcast batch entry.
std::pair<Shape, std::vector<double>> naive_matmul(const Tensor& a, const Tensor& b) {
  Shape sa = a.shape(), sb = b.shape();
  if (sa.size() == 1) sa.insert(sa.begin(), 1);
  if (sb.size() == 1) sb.push_back(1);
  const std::vector<double> va = a.to_vector<double>(), vb = b.to_vector<double>();
  const std::int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  const Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  const Shape batch = broadcast_shapes(ba, bb, "test");
  std::vector<double> out;
  for (std::int64_t e = 0; e < numel(batch); ++e) {
    const auto bi = unravel(e, batch);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (std::int64_t p = 0; p < k; ++p) {
          auto ia = bi, ib = bi;
          ia.insert(ia.end(), {i, p});
          ib.insert(ib.end(), {p, j});
          sum += at_broadcast(va, sa, ia) * at_broadcast(vb, sb, ib);
        }
        out.push_back(sum);
      }
  }
  Shape shape = batch;
  if (a.ndim() > 1) shape.push_back(m);
  if (b.ndim() > 1) shape.push_back(n);
  return {shape, out};
}

/// Two-operand einsum by the definition: a loop over every assignment of every index.
std::pair<Shape, std::vector<double>> naive_einsum(const std::string& equation, const Tensor& a, const Tensor& b) {
  const auto comma = equation.find(','), arrow = equation.find("->");
  const std::string ia = equation.substr(0, comma), ib = equation.substr(comma + 1, arrow - comma - 1),
                    io = equation.substr(arrow + 2);
  std::map<char, std::int64_t> size;
  for (std::size_t d = 0; d < ia.size(); ++d) size[ia[d]] = a.shape()[d];
  for (std::size_t d = 0; d < ib.size(); ++d) size[ib[d]] = b.shape()[d];
  std::string letters;
  Shape all;
  for (auto [c, s] : size) {
    letters += c;
    all.push_back(s);
  }
  Shape out_shape;
  for (char c : io) out_shape.push_back(size[c]);
  std::vector<double> out(std::size_t(numel(out_shape)), 0.0);
  const std::vector<double> va = a.to_vector<double>(), vb = b.to_vector<double>();
  const auto flat = [&](const std::string& term, const Shape& shape, const std::vector<std::int64_t>& index) {
    std::int64_t f = 0;
    for (std::size_t d = 0; d < term.size(); ++d) f = f * shape[d] + index[letters.find(term[d])];
    return std::size_t(f);
  };
  for (std::int64_t e = 0; e < numel(all); ++e) {
    const auto index = unravel(e, all);
    out[flat(io, out_shape, index)] += va[flat(ia, a.shape(), index)] * vb[flat(ib, b.shape(), index)];
  }
  return {out_shape, out};
}

void require_close(const Tensor& y, const std::pair<Shape, std::vector<double>>& expected, double tolerance = 1e-12) {
  REQUIRE(y.shape() == expected.first);
  const auto v = y.to_vector<double>();
  REQUIRE(v.size() == expected.second.size());
  for (std::size_t i = 0; i < v.size(); ++i) CHECK(v[i] == Approx(expected.second[i]).margin(tolerance));
}

const TensorFn matmul_fn = [](const std::vector<Tensor>& in) { return ops::matmul(in[0], in[1]); };

std::function<Tensor(const std::vector<Tensor>&)> einsum_fn(const std::string& equation) {
  return [equation](const std::vector<Tensor>& in) { return ops::einsum(equation, in[0], in[1]); };
}

/// The operand shapes of every NumPy matmul case: 1-D promotion on either side, plain, batched, broadcast
/// batch dimensions, a shared 2-D right operand (one folded gemm) and zero sizes.
const std::vector<std::pair<Shape, Shape>> kShapeCases = {
    {{3, 4}, {4, 5}},       {{4}, {4}},          {{4}, {4, 5}},          {{3, 4}, {4}},
    {{4}, {2, 4, 5}},       {{2, 3, 4}, {4}},    {{2, 3, 4}, {2, 4, 5}}, {{2, 1, 3, 4}, {3, 4, 5}},
    {{2, 3, 4}, {4, 5}},    {{3, 4}, {2, 4, 5}}, {{1, 4}, {4, 1}},       {{2, 1, 4}, {4, 5}},
    {{0, 4}, {4, 5}},       {{3, 0}, {0, 5}},    {{2, 0, 3, 4}, {4, 5}}, {{3, 4}, {4, 0}},
};

}  // namespace

// ---------------------------------------------------------------- matmul forward

TEST_CASE("matmul of a 2x3 and a 3x2 matrix gives the hand-computed product", "[linalg]") {
  const Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = Tensor::from_vector(std::vector<float>{7, 8, 9, 10, 11, 12}, {3, 2});
  const Tensor c = ops::matmul(a, b);
  CHECK(c.shape() == Shape{2, 2});
  CHECK(c.dtype() == DType::f32);
  CHECK(c.to_vector<float>() == std::vector<float>{58, 64, 139, 154});
}

TEST_CASE("matmul matches a naive loop for every NumPy shape case", "[linalg]") {
  std::uint64_t seed = 1;
  for (const auto& [sa, sb] : kShapeCases) {
    INFO("shapes " << fmt::format("{} @ {}", sa, sb));
    const Tensor a = randn(sa, seed++), b = randn(sb, seed++);
    const Tensor c = ops::matmul(a, b);
    if (c.numel() > 0) CHECK(c.is_contiguous());
    require_close(c, naive_matmul(a, b));
  }
}

TEST_CASE("matmul reads strided views: transposed blocks in place, other layouts through a copy", "[linalg]") {
  const Tensor base = randn({5, 4}, 11), other = randn({5, 3}, 12);
  // transposed 2-D views on both sides
  require_close(ops::matmul(ops::transpose(base), other), naive_matmul(ops::transpose(base), other));
  require_close(ops::matmul(ops::transpose(other), base), naive_matmul(ops::transpose(other), base));
  const Tensor square = randn({4, 4}, 13);
  require_close(ops::matmul(ops::transpose(square), ops::transpose(square)),
                naive_matmul(ops::transpose(square), ops::transpose(square)));
  // every other column: neither plain nor transposed, copied first
  const Tensor wide = randn({3, 8}, 14);
  const Tensor strided = ops::slice(wide, 1, 0, 8, 2);
  require_close(ops::matmul(strided, ops::transpose(base)), naive_matmul(strided, ops::transpose(base)));
  // a slice with an offset, transposed: still read in place
  const Tensor rows = ops::slice(base, 0, 1, 5);
  const Tensor right = randn({4, 2}, 15);
  require_close(ops::matmul(ops::transpose(rows), right), naive_matmul(ops::transpose(rows), right));
  // broadcast_to: zero strides in the batch dimensions are read in place, in the matrix dimensions copied
  const Tensor row = randn({1, 4}, 16);
  const Tensor repeated_rows = ops::broadcast_to(row, {3, 4});
  require_close(ops::matmul(repeated_rows, base.transpose()), naive_matmul(repeated_rows, base.transpose()));
  const Tensor stack = ops::broadcast_to(randn({4, 5}, 17), {3, 4, 5});
  require_close(ops::matmul(randn({3, 2, 4}, 18), stack), naive_matmul(randn({3, 2, 4}, 18), stack));
  // the attention layouts: [B, S, H, D] permuted to [B, H, S, D], and its transpose
  const Tensor q = ops::permute(randn({2, 5, 3, 4}, 19), {0, 2, 1, 3});
  const Tensor k = ops::permute(randn({2, 6, 3, 4}, 20), {0, 2, 3, 1});
  CHECK(!q.is_contiguous());
  require_close(ops::matmul(q, k), naive_matmul(q, k));
  // a 1-D operand with a stride
  const Tensor v = ops::slice(randn({8}, 21), 0, 0, 8, 2);
  require_close(ops::matmul(base, v), naive_matmul(base, v));
  require_close(ops::matmul(v, randn({4, 3}, 22)), naive_matmul(v, randn({4, 3}, 22)));
}

TEST_CASE("matmul of a stack folded into one gemm matches per-entry products", "[linalg]") {
  // [B, S, D] @ [D, N] is one gemm over B*S rows; a batch slice with a gap between entries is not foldable.
  const Tensor a = randn({3, 4, 5}, 31), w = randn({5, 6}, 32);
  require_close(ops::matmul(a, w), naive_matmul(a, w));
  const Tensor gapped = ops::slice(randn({3, 6, 5}, 33), 1, 0, 4);
  CHECK(!gapped.is_contiguous());
  require_close(ops::matmul(gapped, w), naive_matmul(gapped, w));
  const Tensor every_other = ops::slice(randn({6, 4, 5}, 34), 0, 0, 6, 2);
  require_close(ops::matmul(every_other, w), naive_matmul(every_other, w));
}

TEST_CASE("matmul with a zero inner dimension gives zeros", "[linalg]") {
  const Tensor c = ops::matmul(Tensor::ones({3, 0}), Tensor::ones({0, 2}));
  CHECK(c.shape() == Shape{3, 2});
  CHECK(c.to_vector<float>() == std::vector<float>(6, 0.0f));
  CHECK(ops::matmul(Tensor::ones({0}), Tensor::ones({0})).shape() == Shape{});
}

TEST_CASE("matmul in float32 agrees with float64, values and gradients", "[linalg]") {
  const Tensor a64 = randn({2, 5, 7}, 41), b64 = randn({7, 3}, 42);
  std::vector<std::vector<double>> results;
  for (DType dtype : {DType::f32, DType::f64}) {
    const Tensor a = a64.to(dtype), b = b64.to(dtype);
    GradientTape tape;
    tape.watch(std::vector<Tensor>{a, b});
    const Tensor c = ops::matmul(a, b);
    REQUIRE(c.dtype() == dtype);
    const auto grads = tape.gradient(c, {a, b}, randn(c.shape(), 43, dtype));
    std::vector<double> all = c.to_vector<double>();
    for (const Tensor& g : grads) {
      REQUIRE(g.dtype() == dtype);
      const auto v = g.to_vector<double>();
      all.insert(all.end(), v.begin(), v.end());
    }
    results.push_back(all);
  }
  REQUIRE(results[0].size() == results[1].size());
  for (std::size_t i = 0; i < results[0].size(); ++i) CHECK(results[0][i] == Approx(results[1][i]).margin(1e-4));
}

// ---------------------------------------------------------------- matmul gradients

TEST_CASE("matmul gradients pass gradcheck for every shape case", "[linalg]") {
  std::uint64_t seed = 100;
  for (const auto& [sa, sb] : kShapeCases) {
    if (numel(sa) == 0 || numel(sb) == 0) continue;
    INFO("shapes " << fmt::format("{} @ {}", sa, sb));
    require_gradcheck(matmul_fn, {randn(sa, seed++), randn(sb, seed++)});
  }
}

TEST_CASE("matmul gradients pass gradcheck for transposed and broadcast inputs", "[linalg]") {
  require_gradcheck([](const std::vector<Tensor>& in) { return ops::matmul(ops::transpose(in[0]), in[1]); },
                    {randn({4, 3}, 51), randn({4, 2}, 52)});
  require_gradcheck(
      [](const std::vector<Tensor>& in) {
        return ops::matmul(ops::permute(in[0], {0, 2, 1, 3}), ops::permute(in[1], {0, 2, 3, 1}));
      },
      {randn({2, 3, 2, 4}, 53), randn({2, 5, 2, 4}, 54)});
  require_gradcheck(
      [](const std::vector<Tensor>& in) { return ops::matmul(ops::broadcast_to(in[0], {3, 2, 4}), in[1]); },
      {randn({2, 4}, 55), randn({3, 4, 2}, 56)});
}

TEST_CASE("matmul second derivatives pass gradgradcheck", "[linalg]") {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3, 4}, {4, 2}}, {{4}, {4}}, {{4}, {4, 3}}, {{3, 4}, {4}}, {{2, 3, 4}, {4, 2}}, {{2, 1, 3, 4}, {3, 4, 2}},
      {{3, 4}, {2, 4, 2}}};
  std::uint64_t seed = 200;
  for (const auto& [sa, sb] : cases) {
    INFO("shapes " << fmt::format("{} @ {}", sa, sb));
    require_gradgradcheck(matmul_fn, {randn(sa, seed++), randn(sb, seed++)});
  }
  // through a nonlinearity, so that the second derivative is not trivially zero
  require_gradgradcheck(
      [](const std::vector<Tensor>& in) { return ops::matmul(ops::tanh(ops::matmul(in[0], in[1])), in[1]); },
      {randn({2, 3}, 210), randn({3, 3}, 211)});
  require_gradgradcheck([](const std::vector<Tensor>& in) { return ops::matmul(ops::transpose(in[0]), in[1]); },
                        {randn({4, 3}, 212), randn({4, 2}, 213)});
}

// ---------------------------------------------------------------- matmul errors

TEST_CASE("matmul rejects bad inputs with clear messages", "[linalg]") {
  const Tensor a = Tensor::ones({2, 3}), b = Tensor::ones({4, 5});
  REQUIRE_THROWS_WITH(ops::matmul(a, b), "matmul: inner dimensions differ: [2, 3] @ [4, 5] (3 != 4)");
  REQUIRE_THROWS_WITH(ops::matmul(Tensor::ones({3}), Tensor::ones({4})),
                      "matmul: inner dimensions differ: [3] @ [4] (3 != 4)");
  REQUIRE_THROWS_WITH(ops::matmul(a, Tensor::ones({3, 2}, DType::f64)),
                      Contains("matmul") && Contains("dtypes differ") && Contains("[2, 3]") && Contains("f64"));
  REQUIRE_THROWS_WITH(ops::matmul(Tensor::ones({2, 3}, DType::i64), Tensor::ones({3, 2}, DType::i64)),
                      Contains("matmul") && Contains("float32, float64 or bf16") && Contains("i64"));
  REQUIRE_THROWS_WITH(ops::matmul(Tensor::scalar(2.0), a),
                      Contains("matmul") && Contains("rank >= 1") && Contains("[]"));
  REQUIRE_THROWS_WITH(ops::matmul(Tensor::ones({2, 2, 3}), Tensor::ones({3, 3, 2})),
                      Contains("matmul: batch dimensions cannot be broadcast") && Contains("[2, 2, 3] @ [3, 3, 2]"));
  REQUIRE_THROWS_WITH(ops::matmul(Tensor(), a), Contains("matmul") && Contains("undefined"));
}

// ---------------------------------------------------------------- einsum

TEST_CASE("einsum matches a naive loop for the MultiHeadAttention patterns and plain products", "[linalg]") {
  struct Case {
    std::string equation;
    Shape a, b;
  };
  const std::vector<Case> cases = {
      {"abc,cde->abde", {2, 3, 4}, {4, 2, 5}},        // query/key/value projection
      {"abcd,cde->abe", {2, 3, 2, 5}, {2, 5, 4}},     // output projection
      {"abcd,aecd->acbe", {2, 3, 2, 4}, {2, 5, 2, 4}},  // scores: query . key
      {"acbe,aecd->abcd", {2, 2, 3, 5}, {2, 5, 2, 4}},  // attention . value
      {"ij,jk->ik", {3, 4}, {4, 5}},
      {"bij,bjk->bik", {2, 3, 4}, {2, 4, 5}},
      {"ij,kj->ik", {3, 4}, {5, 4}},                  // a transposed operand
      {"ij,jk->ki", {3, 4}, {4, 5}},                  // a transposed result
      {"i,j->ij", {3}, {4}},                          // outer product: nothing contracted
      {"i,i->", {5}, {5}},                            // dot product: a scalar
      {"ij,k->ik", {3, 4}, {2}},                      // j is summed out of a alone
      {"bij,jk->bik", {2, 3, 4}, {4, 5}},
      {"abc,abd->cd", {2, 3, 4}, {2, 3, 5}},          // two contracted indices
  };
  std::uint64_t seed = 300;
  for (const auto& c : cases) {
    INFO(c.equation);
    const Tensor a = randn(c.a, seed++), b = randn(c.b, seed++);
    const Tensor y = ops::einsum(c.equation, a, b);
    CHECK(y.is_contiguous());
    require_close(y, naive_einsum(c.equation, a, b));
  }
}

TEST_CASE("einsum accepts spaces, implicit outputs and strided operands", "[linalg]") {
  const Tensor a = randn({3, 4}, 401), b = randn({4, 5}, 402);
  require_close(ops::einsum(" ij , jk -> ik ", a, b), naive_einsum("ij,jk->ik", a, b));
  // implicit mode (NumPy): the indices that occur once, in alphabetical order
  require_close(ops::einsum("ij,jk", a, b), naive_einsum("ij,jk->ik", a, b));
  require_close(ops::einsum("kj,ji", ops::transpose(b), ops::transpose(a)),
                naive_einsum("kj,ji->ik", ops::transpose(b), ops::transpose(a)));
  const Tensor q = ops::permute(randn({2, 2, 3, 4}, 403), {0, 2, 1, 3});  // [B, S, H, D] from a [B, H, S, D]
  const Tensor k = randn({2, 5, 2, 4}, 404);
  require_close(ops::einsum("abcd,aecd->acbe", q, k), naive_einsum("abcd,aecd->acbe", q, k));
}

TEST_CASE("einsum in float32 agrees with float64", "[linalg]") {
  const Tensor a = randn({2, 3, 2, 4}, 411), b = randn({2, 5, 2, 4}, 412);
  const auto y32 = ops::einsum("abcd,aecd->acbe", a.to(DType::f32), b.to(DType::f32));
  const auto y64 = ops::einsum("abcd,aecd->acbe", a, b);
  CHECK(y32.dtype() == DType::f32);
  const auto v32 = y32.to_vector<double>(), v64 = y64.to_vector<double>();
  REQUIRE(v32.size() == v64.size());
  for (std::size_t i = 0; i < v32.size(); ++i) CHECK(v32[i] == Approx(v64[i]).margin(1e-5));
}

TEST_CASE("einsum gradients pass gradcheck and gradgradcheck", "[linalg]") {
  const std::vector<std::tuple<std::string, Shape, Shape>> cases = {
      {"abc,cde->abde", {2, 2, 3}, {3, 2, 2}}, {"abcd,cde->abe", {2, 2, 2, 3}, {2, 3, 2}},
      {"abcd,aecd->acbe", {2, 3, 2, 2}, {2, 2, 2, 2}}, {"acbe,aecd->abcd", {2, 2, 3, 2}, {2, 2, 2, 3}},
      {"ij,jk->ik", {2, 3}, {3, 2}}, {"bij,bjk->bik", {2, 2, 3}, {2, 3, 2}}, {"ij,k->ik", {2, 3}, {2}},
      {"i,i->", {4}, {4}}};
  std::uint64_t seed = 500;
  for (const auto& [equation, sa, sb] : cases) {
    INFO(equation);
    const std::vector<Tensor> inputs = {randn(sa, seed++), randn(sb, seed++)};
    require_gradcheck(einsum_fn(equation), inputs);
    require_gradgradcheck(einsum_fn(equation), inputs);
  }
}

TEST_CASE("einsum rejects malformed equations and mismatched operands", "[linalg]") {
  const Tensor a = Tensor::ones({2, 3}), b = Tensor::ones({3, 4});
  REQUIRE_THROWS_WITH(ops::einsum("ij->ij", a, b), Contains("einsum: malformed equation 'ij->ij'"));
  REQUIRE_THROWS_WITH(ops::einsum("ij,jk,kl->il", a, b), Contains("einsum: malformed equation"));
  REQUIRE_THROWS_WITH(ops::einsum("ij,jk->i-k", a, b), Contains("einsum: malformed equation") && Contains("'-'"));
  REQUIRE_THROWS_WITH(ops::einsum("i1,1k->ik", a, b), Contains("einsum: malformed equation") && Contains("'1'"));
  REQUIRE_THROWS_WITH(ops::einsum("...j,jk->...k", a, b), Contains("einsum: ellipsis"));
  REQUIRE_THROWS_WITH(ops::einsum("ijk,jk->ik", a, b),
                      Contains("einsum: operand 0 has 3 indices 'ijk'") && Contains("rank 2") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(ops::einsum("ii,jk->ik", Tensor::ones({3, 3}), b),
                      Contains("einsum: index 'i' is repeated in operand 0"));
  REQUIRE_THROWS_WITH(ops::einsum("ij,jk->iz", a, b),
                      Contains("einsum: output index 'z' does not occur in the operands"));
  REQUIRE_THROWS_WITH(ops::einsum("ij,jk->ii", a, b), Contains("einsum: output index 'i' is repeated"));
  REQUIRE_THROWS_WITH(ops::einsum("ij,jk->ik", a, Tensor::ones({4, 4})),
                      Contains("einsum: index 'j' has size 3 in operand 0 [2, 3] but 4 in operand 1 [4, 4]"));
  REQUIRE_THROWS_WITH(ops::einsum("ij,jk->ik", a, Tensor::ones({3, 4}, DType::f64)),
                      Contains("einsum: dtypes differ") && Contains("[3, 4]"));
  REQUIRE_THROWS_WITH(ops::einsum("ij,jk->ik", Tensor::ones({2, 3}, DType::i64), Tensor::ones({3, 4}, DType::i64)),
                      Contains("einsum") && Contains("float32, float64 or bf16"));
}

// ---------------------------------------------------------------- dense (matmul + bias in one gemm)

TEST_CASE("dense equals matmul plus bias for every rank, f32 and f64", "[linalg]") {
  for (const DType dtype : {DType::f32, DType::f64}) {
    const double tolerance = dtype == DType::f32 ? 1e-5 : 1e-12;
    for (const Shape& x_shape : {Shape{3}, Shape{7, 3}, Shape{2, 4, 3}, Shape{300, 3}, Shape{0, 3}}) {
      const Tensor x = randn(x_shape, 21).to(dtype), kernel = randn({3, 6}, 22).to(dtype);
      const Tensor bias = randn({6}, 23).to(dtype);
      INFO(fmt::format("{} x {}", x_shape, dtype));
      const Tensor with_bias = ops::dense(x, kernel, bias), without = ops::dense(x, kernel, Tensor());
      const Tensor expected = ops::matmul(x, kernel);
      REQUIRE(with_bias.shape() == expected.shape());
      REQUIRE(with_bias.dtype() == dtype);
      const auto got = with_bias.to_vector<double>(), got_plain = without.to_vector<double>();
      const auto want = ops::add(expected, bias).to_vector<double>(), want_plain = expected.to_vector<double>();
      for (std::size_t i = 0; i < got.size(); ++i) {
        CHECK(got[i] == Approx(want[i]).margin(tolerance));
        CHECK(got_plain[i] == Approx(want_plain[i]).margin(tolerance));
      }
    }
  }
  // No inputs to sum over: the bias alone (or zeros), as matmul + bias gives.
  const Tensor y = ops::dense(Tensor::ones({2, 0}), Tensor::ones({0, 3}), Tensor::from_vector(std::vector<float>{1, 2, 3}));
  CHECK(y.to_vector<double>() == std::vector<double>{1, 2, 3, 1, 2, 3});
  CHECK(ops::dense(Tensor::ones({2, 0}), Tensor::ones({0, 3}), Tensor()).to_vector<double>() == std::vector<double>(6, 0.0));
}

TEST_CASE("dense gradients pass gradcheck with and without a bias", "[linalg]") {
  const auto with_bias = [](const std::vector<Tensor>& in) { return ops::dense(in[0], in[1], in[2]); };
  const auto without = [](const std::vector<Tensor>& in) { return ops::dense(in[0], in[1], Tensor()); };
  require_gradcheck(with_bias, {randn({4, 3}, 31), randn({3, 5}, 32), randn({5}, 33)});
  require_gradcheck(with_bias, {randn({2, 3, 4}, 34), randn({4, 2}, 35), randn({2}, 36)});
  require_gradcheck(with_bias, {randn({3}, 37), randn({3, 2}, 38), randn({2}, 39)});
  require_gradcheck(without, {randn({2, 3, 4}, 40), randn({4, 2}, 41)});
  require_gradcheck([](const std::vector<Tensor>& in) { return ops::dense(ops::transpose(in[0]), in[1], in[2]); },
                    {randn({3, 4}, 42), randn({3, 2}, 43), randn({2}, 44)});
  require_gradgradcheck(with_bias, {randn({3, 2}, 45), randn({2, 2}, 46), randn({2}, 47)});
}
