// The bad-input battery of the framework: every public op, the tensor factories and accessors, attention,
// the file readers and writers, gradcheck and the tape. Each bad call must throw loom::Error naming the op and
// the offending shapes (or values); none may crash, abort or return garbage. Inputs that NumPy accepts, such
// as zero-size dimensions, must instead give NumPy's result (the last test case).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "framework/autograd/gradcheck.hpp"
#include "framework/autograd/tape.hpp"
#include "framework/io/npy.hpp"
#include "framework/io/png.hpp"
#include "framework/io/safetensors.hpp"
#include "framework/ops/ops.hpp"
#include "framework/tensor/variable.hpp"
#include "tests/bad_input_helpers.hpp"
#include "tests/temp_files.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;

namespace {

// The usual suspects: shapes [2, 3] and [4, 5] that do not broadcast, one shape in four dtypes, an undefined
// tensor.
const Tensor f23 = Tensor::ones({2, 3});
const Tensor f45 = Tensor::ones({4, 5});
const Tensor d23 = Tensor::ones({2, 3}, DType::f64);
const Tensor i23 = Tensor::zeros({2, 3}, DType::i64);
const Tensor b23 = Tensor::zeros({2, 3}, DType::boolean);
const Tensor undefined;

using Binary = Tensor (*)(const Tensor&, const Tensor&);
using Unary = std::function<Tensor(const Tensor&)>;
struct NamedBinary {
  const char* name;
  Binary fn;
};
struct NamedUnary {
  const char* name;
  Unary fn;
};

/// The cases every binary op shares: shapes that do not broadcast, dtypes that differ, operands
/// of a dtype the op does not take, an undefined operand.
void add_binary_cases(std::vector<BadInput>& cases, const NamedBinary& op, const Tensor& good,
                      const Tensor& wrong_dtype) {
  const std::string n = op.name;
  const Tensor other_shape = Tensor::ones({4, 5}, good.dtype());
  cases.push_back({n + ": shapes that do not broadcast", [=] { op.fn(good, other_shape); }, {n, "[2, 3]", "[4, 5]"}});
  const Tensor other_dtype = good.dtype() == DType::f64 ? f23 : d23;
  cases.push_back({n + ": f32 with f64", [=] { op.fn(good, other_dtype); }, {n, "f32", "f64", "[2, 3]"}});
  cases.push_back({n + ": operands of an unsupported dtype",
                   [=] { op.fn(wrong_dtype, wrong_dtype); },
                   {n, std::string(dtype_name(wrong_dtype.dtype())), "[2, 3]"}});
  cases.push_back({n + ": an undefined operand", [=] { op.fn(good, undefined); }, {n, "undefined"}});
}

/// The cases every float unary op shares: integer and boolean inputs, an undefined one.
void add_unary_cases(std::vector<BadInput>& cases, const NamedUnary& op) {
  const std::string n = op.name;
  cases.push_back({n + ": an i64 input", [=] { op.fn(i23); }, {n, "i64", "[2, 3]"}});
  cases.push_back({n + ": a bool input", [=] { op.fn(b23); }, {n, "bool", "[2, 3]"}});
  cases.push_back({n + ": an undefined input", [=] { op.fn(undefined); }, {n, "undefined"}});
}

}  // namespace

TEST_CASE("elementwise ops reject bad inputs naming the op and the shapes", "[bad_input]") {
  std::vector<BadInput> cases;
  const std::vector<NamedBinary> arithmetic = {
      {"add", ops::add},
      {"sub", ops::sub},
      {"mul", ops::mul},
      {"div", ops::div},
      {"pow", ops::pow},
      {"maximum", ops::maximum},
      {"minimum", ops::minimum}, {"add", [](const Tensor& a, const Tensor& b) { return a + b; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }},
  };
  for (const auto& op : arithmetic) add_binary_cases(cases, op, f23, i23);
  const std::vector<NamedBinary> comparisons = {
      {"equal", ops::equal},           {"not_equal", ops::not_equal}, {"less", ops::less},
      {"less_equal", ops::less_equal}, {"greater", ops::greater},     {"greater_equal", ops::greater_equal},
  };
  for (const auto& op : comparisons) add_binary_cases(cases, op, f23, b23);
  for (const auto& op : std::vector<NamedBinary>{{"logical_and", ops::logical_and}, {"logical_or", ops::logical_or}}) {
    const std::string n = op.name;
    const Tensor b45 = Tensor::zeros({4, 5}, DType::boolean);
    cases.push_back({n + ": masks that do not broadcast", [=] { op.fn(b23, b45); }, {n, "[2, 3]", "[4, 5]"}});
    cases.push_back({n + ": float operands", [=] { op.fn(f23, f23); }, {n, "f32", "[2, 3]"}});
    cases.push_back({n + ": bool with f32", [=] { op.fn(b23, f23); }, {n, "bool", "f32"}});
    cases.push_back({n + ": an undefined operand", [=] { op.fn(undefined, b23); }, {n, "undefined"}});
  }
  const std::vector<NamedUnary> unary = {
      {"neg", ops::neg},
      {"square", ops::square},
      {"sqrt", ops::sqrt},
      {"rsqrt", ops::rsqrt},
      {"exp", ops::exp},
      {"log", ops::log},
      {"abs", ops::abs},
      {"sign", ops::sign},
      {"erf", ops::erf},
      {"tanh", ops::tanh},
      {"sigmoid", ops::sigmoid},
      {"relu", ops::relu}, {"gelu", [](const Tensor& x) { return ops::gelu(x); }},
      {"gelu", [](const Tensor& x) { return ops::gelu(x, true); }},
      {"clip", [](const Tensor& x) { return ops::clip(x, 0.0, 1.0); }},
      {"pow", [](const Tensor& x) { return ops::pow(x, 2.0); }},
      {"neg", [](const Tensor& x) { return -x; }},
  };
  for (const auto& op : unary) add_unary_cases(cases, op);
  cases.insert(
      cases.end(),
      {
          {"clip: lo above hi", [] { ops::clip(f23, 1.0, 0.0); }, {"clip", "lo=1", "hi=0", "[2, 3]"}},
          {"logical_not: a float input", [] { ops::logical_not(f23); }, {"logical_not", "f32", "[2, 3]"}},
          {"logical_not: an undefined input", [] { ops::logical_not(undefined); }, {"logical_not", "undefined"}},
          {"where: a float condition", [] { ops::where(f23, f23, f23); }, {"where", "f32", "[2, 3]"}},
          {"where: branches of different dtypes", [] { ops::where(b23, f23, d23); }, {"where", "f32", "f64"}},
          {"where: shapes that do not broadcast", [] { ops::where(b23, f23, f45); }, {"where", "[2, 3]", "[4, 5]"}},
          {"where: condition that does not broadcast",
           [] { ops::where(Tensor::zeros({4, 5}, DType::boolean), f23, f23); },
           {"where", "[4, 5]", "[2, 3]"}},
          {"where: an undefined condition", [] { ops::where(undefined, f23, f23); }, {"where", "undefined"}},
          {"masked_fill: a float mask", [] { ops::masked_fill(f23, f23, 0.0); }, {"masked_fill", "f32", "[2, 3]"}},
          {"masked_fill: a mask of another shape",
           [] { ops::masked_fill(f23, Tensor::zeros({4, 5}, DType::boolean), 0.0); },
           {"masked_fill", "[2, 3]", "[4, 5]"}},
          {"masked_fill: a mask larger than x",
           [] { ops::masked_fill(f23, Tensor::zeros({2, 2, 3}, DType::boolean), 0.0); },
           {"masked_fill", "[2, 3]", "[2, 2, 3]"}},
          {"masked_fill: an undefined mask", [] { ops::masked_fill(f23, undefined, 0.0); },
           {"masked_fill", "undefined"}},
          {"cast: NaN to i64", [] { ops::cast(Tensor::full({2, 3}, std::nan("")), DType::i64); },
           {"cast", "nan", "i64"}},
          {"cast: inf to i64", [] { ops::cast(Tensor::full({2, 3}, INFINITY, DType::f64), DType::i64); },
           {"cast", "inf"}},
          {"cast: beyond i64's range", [] { ops::cast(Tensor::full({2, 3}, 1e30, DType::f64), DType::i64); },
           {"cast", "1e+30"}},
          {"cast: an undefined tensor", [] { ops::cast(undefined, DType::f64); }, {"cast", "undefined"}},
          {"tensor + scalar: an i64 tensor", [] { i23 + 1.0; }, {"add", "i64", "[2, 3]"}},
          {"tensor * scalar: a bool tensor", [] { b23 * 2.0; }, {"mul", "bool", "[2, 3]"}},
      });
  run_bad_inputs("elementwise ops", cases);
}

TEST_CASE("reductions reject bad axes and dtypes naming the op and the shapes", "[bad_input]") {
  using Reduction = Tensor (*)(const Tensor&, const Axes&, bool);
  const std::vector<std::pair<std::string, Reduction>> reductions = {
      {"sum", ops::sum}, {"mean", ops::mean}, {"var", ops::var},
      {"max", ops::max}, {"min", ops::min},   {"logsumexp", ops::logsumexp},
  };
  std::vector<BadInput> cases;
  for (const auto& [n, fn] : reductions) {
    cases.push_back({n + ": axis past the rank", [fn = fn] { fn(f23, {2}, false); }, {n, "axis 2", "rank 2"}});
    cases.push_back({n + ": negative axis past the rank", [fn = fn] { fn(f23, {-3}, false); }, {n, "axis -3", "rank 2"}});
    cases.push_back({n + ": a repeated axis", [fn = fn] { fn(f23, {1, -1}, false); }, {n, "repeated", "[1, -1]"}});
    cases.push_back({n + ": an undefined input", [fn = fn] { fn(undefined, {}, false); }, {n, "undefined"}});
  }
  for (const auto& n : {"mean", "var", "max", "min"}) {
    const Reduction fn =
        std::find_if(reductions.begin(), reductions.end(), [&](auto& r) { return r.first == n; })->second;
    cases.push_back({std::string(n) + ": over zero elements",
                     [fn = fn] { fn(Tensor::zeros({0, 3}), {0}, false); },
                     {n, "zero elements", "[0, 3]"}});
  }
  using ArgReduction = Tensor (*)(const Tensor&, std::int64_t, bool);
  for (const auto& [n, fn] :
       std::vector<std::pair<std::string, ArgReduction>>{{"argmax", ops::argmax}, {"argmin", ops::argmin}}) {
    cases.push_back({n + ": axis past the rank", [fn = fn] { fn(f23, 2, false); }, {n, "axis 2", "rank 2"}});
    cases.push_back({n + ": over an empty axis",
                     [fn = fn] { fn(Tensor::zeros({2, 0}), 1, false); },
                     {n, "zero elements", "[2, 0]"}});
    cases.push_back({n + ": an undefined input", [fn = fn] { fn(undefined, 0, false); }, {n, "undefined"}});
  }
  cases.insert(
      cases.end(),
      {
          {"sum_to: a target that does not broadcast", [] { ops::sum_to(f23, {4}); }, {"sum_to", "[2, 3]", "[4]"}},
          {"sum_to: a target of higher rank", [] { ops::sum_to(f23, {1, 2, 3}); }, {"sum_to", "[2, 3]", "[1, 2, 3]"}},
          {"sum_to: an undefined input", [] { ops::sum_to(undefined, {1}); }, {"sum_to", "undefined"}},
      });
  run_bad_inputs("reductions", cases);
}

TEST_CASE("shape ops reject bad shapes and axes naming the op and the shapes", "[bad_input]") {
  const Tensor idx = Tensor::from_vector(std::vector<std::int64_t>{0, 2});
  const Tensor far = Tensor::from_vector(std::vector<std::int64_t>{0, 3});
  const Tensor negative = Tensor::from_vector(std::vector<std::int64_t>{-1});
  run_bad_inputs("shape ops", {
    {"reshape: another element count", [] { ops::reshape(f23, {4, 2}); }, {"reshape", "[2, 3]", "[4, 2]"}},
    {"reshape: two -1", [] { ops::reshape(f23, {-1, -1}); }, {"reshape", "[-1, -1]"}},
    {"reshape: a negative size", [] { ops::reshape(f23, {-2, -3}); }, {"reshape", "[-2, -3]"}},
    {"reshape: -1 that cannot be inferred", [] { ops::reshape(f23, {-1, 4}); }, {"reshape", "[2, 3]", "[-1, 4]"}},
    {"reshape: -1 next to a zero", [] { ops::reshape(Tensor::zeros({0, 3}), {-1, 0}); },
     {"reshape", "[0, 3]", "[-1, 0]"}},
    {"Tensor::reshape: a negative size", [] { f23.reshape({3, -2}); }, {"reshape", "[3, -2]"}},
    {"reshape: an undefined input", [] { ops::reshape(undefined, {1}); }, {"reshape", "undefined"}},
    {"permute: too few axes", [] { ops::permute(f23, {0}); }, {"permute", "[2, 3]", "[0]"}},
    {"permute: a repeated axis", [] { ops::permute(f23, {1, 1}); }, {"permute", "[2, 3]", "[1, 1]"}},
    {"permute: an axis past the rank", [] { ops::permute(f23, {0, 2}); }, {"permute", "axis 2", "rank 2"}},
    {"transpose: an axis past the rank", [] { ops::transpose(f23, 0, 5); }, {"transpose", "axis 5", "rank 2"}},
    {"transpose: a rank-1 input with the default axes", [] { ops::transpose(Tensor::ones({3})); },
     {"transpose", "axis -2", "rank 1"}},
    {"slice: an axis past the rank", [] { ops::slice(f23, 2, 0, 1); }, {"slice", "axis 2", "rank 2"}},
    {"slice: step 0", [] { ops::slice(f23, 1, 0, 3, 0); }, {"slice", "step", "[2, 3]"}},
    {"slice: a negative step", [] { ops::slice(f23, 1, 3, 0, -1); }, {"slice", "step", "[2, 3]"}},
    {"take_backward: a size too large to allocate",
     [] { ops::take_backward(f23, Tensor::zeros({2}, DType::i64), 0, 1LL << 62); },
     {"too large to allocate", "[4611686018427387904, 3]"}},
    {"split: more sections than a count holds", [] { ops::split(f23, std::int64_t(1) << 62, 1); }, {"split", "[2, 3]"}},
    {"expand_dims: the lowest axis", [] { ops::expand_dims(f23, std::numeric_limits<std::int64_t>::min()); },
     {"expand_dims", "rank 3"}},
    {"broadcast_to: an incompatible target", [] { ops::broadcast_to(f23, {2, 4}); },
     {"broadcast_to", "[2, 3]", "[2, 4]"}},
    {"broadcast_to: fewer dimensions", [] { ops::broadcast_to(f23, {3}); }, {"broadcast_to", "[2, 3]", "[3]"}},
    {"broadcast_to: a negative size", [] { ops::broadcast_to(Tensor::ones({1}), {-2}); }, {"broadcast_to", "[-2]"}},
    {"expand_dims: an axis past rank + 1", [] { ops::expand_dims(f23, 4); }, {"expand_dims", "axis 4", "rank 3"}},
    {"squeeze: a dimension that is not 1", [] { ops::squeeze(f23, 0); }, {"squeeze", "[2, 3]"}},
    {"squeeze: an axis past the rank", [] { ops::squeeze(f23, 2); }, {"squeeze", "axis 2", "rank 2"}},
    {"flatten: an axis past the rank", [] { ops::flatten(f23, 2); }, {"flatten", "axis 2", "rank 2"}},
    {"contiguous: an undefined input", [] { ops::contiguous(undefined); }, {"contiguous", "undefined"}},
    {"clone: an undefined input", [] { ops::clone(undefined); }, {"clone", "undefined"}},
    {"concat: no tensors", [] { ops::concat({}); }, {"concat", "empty"}},
    {"concat: different dtypes", [] { ops::concat({f23, d23}); }, {"concat", "f32", "f64", "[2, 3]"}},
    {"concat: different ranks", [] { ops::concat({f23, Tensor::ones({3})}); }, {"concat", "[2, 3]", "[3]"}},
    {"concat: different sizes off the axis", [] { ops::concat({f23, f45}, 0); }, {"concat", "[2, 3]", "[4, 5]"}},
    {"concat: an axis past the rank", [] { ops::concat({f23, f23}, 2); }, {"concat", "axis 2", "rank 2"}},
    {"concat: an undefined tensor", [] { ops::concat({f23, undefined}); }, {"concat", "undefined"}},
    {"stack: no tensors", [] { ops::stack({}); }, {"stack", "empty"}},
    {"stack: different shapes", [] { ops::stack({f23, f45}); }, {"stack", "[2, 3]", "[4, 5]"}},
    {"stack: different dtypes", [] { ops::stack({f23, d23}); }, {"stack", "f32", "f64"}},
    {"stack: an axis past rank + 1", [] { ops::stack({f23, f23}, 3); }, {"stack", "axis 3", "rank 3"}},
    {"split: sections that do not divide", [] { ops::split(f23, 2, 1); }, {"split", "[2, 3]"}},
    {"split: zero sections", [] { ops::split(f23, 0, 1); }, {"split", "[2, 3]"}},
    {"split: sizes that do not add up", [] { ops::split(f23, std::vector<std::int64_t>{1, 1}, 1); },
     {"split", "[1, 1]", "[2, 3]"}},
    {"split: a negative size", [] { ops::split(f23, std::vector<std::int64_t>{4, -1}, 1); }, {"split", "[4, -1]"}},
    {"split: an axis past the rank", [] { ops::split(f23, 1, 2); }, {"split", "axis 2", "rank 2"}},
    {"take: float indices", [] { ops::take(f23, f23, 1); }, {"take", "f32", "[2, 3]"}},
    {"take: an index past the end", [=] { ops::take(f23, far, 1); }, {"take", "index 3", "[2, 3]"}},
    {"take: a negative index", [=] { ops::take(f23, negative, 1); }, {"take", "-1", "[2, 3]"}},
    {"take: an axis past the rank", [=] { ops::take(f23, idx, 2); }, {"take", "axis 2", "rank 2"}},
    {"take: undefined indices", [] { ops::take(f23, undefined, 0); }, {"take", "undefined"}},
    {"gather: an index past the end", [=] { ops::gather(f23, far, 1); }, {"take", "index 3", "[2, 3]"}},
    {"take_along_axis: indices of another rank", [=] { ops::take_along_axis(f23, idx, 1); },
     {"take_along_axis", "[2]", "[2, 3]"}},
    {"take_along_axis: an index past the end",
     [] { ops::take_along_axis(f23, Tensor::full({2, 1}, 3, DType::i64), 1); },
     {"take_along_axis", "index 3", "[2, 3]"}},
    {"take_along_axis: indices that do not broadcast",
     [] { ops::take_along_axis(f23, Tensor::zeros({3, 1}, DType::i64), 1); },
     {"take_along_axis", "[3, 1]", "[2, 3]"}},
    {"take_along_axis: float indices", [] { ops::take_along_axis(f23, f23, 1); }, {"take_along_axis", "f32"}},
    {"slice_backward: grad of the wrong shape", [] { ops::slice_backward(f23, {2, 6}, 1, 0, 2); },
     {"slice_backward", "[2, 3]", "[2, 2]"}},
    {"slice_backward: step 0", [] { ops::slice_backward(f23, {2, 6}, 1, 0, 6, 0); }, {"slice_backward", "step"}},
    {"take_backward: grad that does not fit the indices", [=] { ops::take_backward(f45, idx, 0, 3); },
     {"take_backward", "[4, 5]", "[2]"}},
    {"take_backward: a negative size", [=] { ops::take_backward(f23, idx, 0, -1); }, {"take_backward", "-1"}},
    {"take_backward: an index past the size", [=] { ops::take_backward(f23, idx, 0, 2); },
     {"take_backward", "index 2"}},
    {"take_along_axis_backward: indices of another rank", [=] { ops::take_along_axis_backward(f23, idx, 1, 3); },
     {"take_along_axis_backward", "[2]", "[2, 3]"}},
    {"take_along_axis_backward: a negative size",
     [=] { ops::take_along_axis_backward(f23, Tensor::zeros({2, 3}, DType::i64), 1, -1); },
     {"take_along_axis_backward", "-1"}},
    {"take_along_axis_backward: an index past the size",
     [=] { ops::take_along_axis_backward(f23, Tensor::full({2, 3}, 5, DType::i64), 1, 3); },
     {"take_along_axis_backward", "index 5"}},
  });
}

TEST_CASE("matmul and einsum reject bad shapes and dtypes naming the op and the shapes", "[bad_input]") {
  const Tensor a234 = Tensor::ones({2, 3, 4});
  run_bad_inputs("linear algebra", {
    {"matmul: inner dimensions differ", [] { ops::matmul(f23, f45); }, {"matmul", "[2, 3]", "[4, 5]"}},
    {"matmul: vectors of different lengths", [] { ops::matmul(Tensor::ones({3}), Tensor::ones({4})); },
     {"matmul", "[3]", "[4]"}},
    {"matmul: batch dimensions that do not broadcast", [=] { ops::matmul(a234, Tensor::ones({3, 4, 5})); },
     {"matmul", "[2, 3, 4]", "[3, 4, 5]"}},
    {"matmul: a scalar operand", [] { ops::matmul(Tensor::scalar(1.0), f23); }, {"matmul", "[]", "[2, 3]"}},
    {"matmul: f32 with f64", [] { ops::matmul(f23, Tensor::ones({3, 2}, DType::f64)); }, {"matmul", "f32", "f64"}},
    {"matmul: i64 operands", [] { ops::matmul(i23, Tensor::zeros({3, 2}, DType::i64)); }, {"matmul", "i64", "[2, 3]"}},
    {"matmul: an undefined operand", [] { ops::matmul(f23, undefined); }, {"matmul", "undefined"}},
    {"dense: a kernel of rank 3", [] { ops::dense(f23, Tensor::ones({3, 4, 5}), undefined); }, {"dense", "[2, 3]", "[3, 4, 5]"}},
    {"dense: in features differ", [] { ops::dense(f23, f45, undefined); }, {"dense", "[2, 3]", "[4, 5]"}},
    {"dense: a bias of the wrong size", [] { ops::dense(f23, Tensor::ones({3, 4}), Tensor::ones({5})); },
     {"dense", "[4]", "[3, 4]", "[5]"}},
    {"dense: an f64 bias", [] { ops::dense(f23, Tensor::ones({3, 4}), Tensor::ones({4}, DType::f64)); },
     {"dense", "f32", "f64", "[4]"}},
    {"dense: i64 operands", [] { ops::dense(i23, Tensor::zeros({3, 4}, DType::i64), undefined); }, {"dense", "i64", "[2, 3]"}},
    {"dense: an undefined kernel", [] { ops::dense(f23, undefined, undefined); }, {"dense", "undefined"}},
    {"dense: a scalar input", [] { ops::dense(Tensor::scalar(1.0f), Tensor::ones({1, 4}), undefined); }, {"dense", "[]", "[1, 4]"}},
    {"einsum: a term of the wrong rank", [] { ops::einsum("abc,cd->abd", f23, f45); }, {"einsum", "abc", "[2, 3]"}},
    {"einsum: sizes of one index differ", [] { ops::einsum("ab,bc->ac", f23, f45); }, {"einsum", "[2, 3]", "[4, 5]"}},
    {"einsum: an ellipsis", [] { ops::einsum("...a,ab->...b", f23, f45); }, {"einsum", "ellipsis"}},
    {"einsum: one operand", [] { ops::einsum("ab->ab", f23, f45); }, {"einsum", "ab->ab"}},
    {"einsum: an output index in no operand", [] { ops::einsum("ab,bc->az", f23, Tensor::ones({3, 4})); },
     {"einsum", "'z'"}},
    {"einsum: a repeated index in one operand", [] { ops::einsum("aa,ab->b", Tensor::ones({2, 2}), f23); },
     {"einsum", "aa"}},
    {"einsum: a non-letter index", [] { ops::einsum("a1,1b->ab", f23, Tensor::ones({3, 4})); }, {"einsum", "a1"}},
    {"einsum: f32 with f64", [] { ops::einsum("ab,bc->ac", f23, Tensor::ones({3, 4}, DType::f64)); },
     {"einsum", "f32", "f64"}},
    {"einsum: i64 operands", [] { ops::einsum("ab,bc->ac", i23, Tensor::zeros({3, 4}, DType::i64)); },
     {"einsum", "i64"}},
    {"einsum: an undefined operand", [] { ops::einsum("ab,bc->ac", f23, undefined); }, {"einsum", "undefined"}},
  });
}

TEST_CASE("nn ops reject bad axes, labels and rates naming the op and the shapes", "[bad_input]") {
  const Tensor labels = Tensor::from_vector(std::vector<std::int64_t>{0, 3});
  std::vector<BadInput> cases;
  for (const auto& [n, fn] : std::vector<std::pair<std::string, Tensor (*)(const Tensor&, std::int64_t)>>{
           {"softmax", ops::softmax}, {"log_softmax", ops::log_softmax}}) {
    cases.push_back({n + ": an axis past the rank", [fn = fn] { fn(f23, 2); }, {n, "axis 2", "rank 2"}});
    cases.push_back({n + ": an undefined input", [fn = fn] { fn(undefined, -1); }, {n, "undefined"}});
  }
  cases.push_back(
      {"log_sigmoid: an undefined input", [] { ops::log_sigmoid(undefined); }, {"log_sigmoid", "undefined"}});
  cases.insert(
      cases.end(),
      {
          {"one_hot: a label past the depth", [=] { ops::one_hot(labels, 3); }, {"one_hot", "3", "[2]"}},
          {"one_hot: a negative label", [] { ops::one_hot(Tensor::full({2}, -1, DType::i64), 3); },
           {"one_hot", "-1", "[2]"}},
          {"one_hot: float labels", [] { ops::one_hot(f23, 3); }, {"one_hot", "f32", "[2, 3]"}},
          {"one_hot: depth 0", [=] { ops::one_hot(labels, 0); }, {"one_hot", "depth", "0"}},
          {"one_hot: a negative depth", [=] { ops::one_hot(labels, -4); }, {"one_hot", "depth", "-4"}},
          {"one_hot: an i64 result", [=] { ops::one_hot(labels, 4, DType::i64); }, {"one_hot", "i64"}},
          {"one_hot: a depth too large to allocate", [] { ops::one_hot(Tensor::zeros({4}, DType::i64), 1LL << 62); },
           {"too large to allocate", "[4, 4611686018427387904]"}},
          {"one_hot: undefined labels", [] { ops::one_hot(undefined, 4); }, {"one_hot", "undefined"}},
          {"check_class_labels: a label past the depth", [=] { ops::check_class_labels(labels, 2, "my_loss"); },
           {"my_loss", "3", "[2]"}},
          {"dropout: a negative rate", [] { ops::dropout(f23, -0.5, true); }, {"dropout", "-0.5"}},
          {"dropout: a rate above 1", [] { ops::dropout(f23, 1.5, true); }, {"dropout", "1.5"}},
          {"dropout: a NaN rate", [] { ops::dropout(f23, std::nan(""), true); }, {"dropout", "nan"}},
          {"dropout: an i64 input", [] { ops::dropout(i23, 0.5, true); }, {"dropout", "i64", "[2, 3]"}},
          {"dropout: an undefined input", [] { ops::dropout(undefined, 0.5, true); }, {"dropout", "undefined"}},
      });
  run_bad_inputs("nn ops", cases);
}

TEST_CASE("normalization ops reject bad parameters naming the op and the shapes", "[bad_input]") {
  const Tensor x = Tensor::ones({2, 4});
  const Tensor c4 = Tensor::ones({4});
  const Tensor c3 = Tensor::ones({3});
  const Tensor c4d = Tensor::ones({4}, DType::f64);
  run_bad_inputs("normalization ops", {
    {"layer_norm: gamma of the wrong shape", [=] { ops::layer_norm(x, c3, c4, {-1}, 1e-3); },
     {"layer_norm", "gamma", "[3]", "[4]"}},
    {"layer_norm: beta of the wrong shape", [=] { ops::layer_norm(x, c4, c3, {-1}, 1e-3); },
     {"layer_norm", "beta", "[3]", "[4]"}},
    {"layer_norm: gamma of another dtype", [=] { ops::layer_norm(x, c4d, c4, {-1}, 1e-3); },
     {"layer_norm", "gamma", "f64", "f32"}},
    {"layer_norm: an axis past the rank", [=] { ops::layer_norm(x, c4, c4, {2}, 1e-3); },
     {"layer_norm", "axis 2", "rank 2"}},
    {"layer_norm: no axes", [=] { ops::layer_norm(x, c4, c4, {}, 1e-3); }, {"layer_norm", "axis", "[2, 4]"}},
    {"layer_norm: epsilon 0", [=] { ops::layer_norm(x, c4, c4, {-1}, 0.0); }, {"layer_norm", "epsilon"}},
    {"layer_norm: a NaN epsilon", [=] { ops::layer_norm(x, c4, c4, {-1}, std::nan("")); }, {"layer_norm", "epsilon"}},
    {"layer_norm: an i64 input", [=] { ops::layer_norm(Tensor::zeros({2, 4}, DType::i64), c4, c4, {-1}, 1e-3); },
     {"layer_norm", "i64", "[2, 4]"}},
    {"layer_norm: zero elements to normalize", [] { ops::layer_norm(Tensor::zeros({2, 0}), {}, {}, {-1}, 1e-3); },
     {"layer_norm", "zero elements", "[2, 0]"}},
    {"rms_norm: scale of the wrong shape", [=] { ops::rms_norm(x, c3, {-1}, 1e-6); },
     {"rms_norm", "scale", "[3]", "[4]"}},
    {"rms_norm: an axis past the rank", [=] { ops::rms_norm(x, c4, {-3}, 1e-6); }, {"rms_norm", "axis -3", "rank 2"}},
    {"rms_norm: a negative epsilon", [=] { ops::rms_norm(x, c4, {-1}, -1.0); }, {"rms_norm", "epsilon"}},
    {"rms_norm: an undefined input", [=] { ops::rms_norm(undefined, c4, {-1}, 1e-6); }, {"rms_norm", "undefined"}},
    {"group_norm: groups that do not divide the channels", [=] { ops::group_norm(x, c4, c4, 3, -1, 1e-3); },
     {"group_norm", "3", "[2, 4]"}},
    {"group_norm: groups 0", [=] { ops::group_norm(x, c4, c4, 0, -1, 1e-3); }, {"group_norm", "groups", "[2, 4]"}},
    {"group_norm: the batch axis", [=] { ops::group_norm(x, c4, c4, 1, 0, 1e-3); }, {"group_norm", "batch", "[2, 4]"}},
    {"group_norm: a rank-1 input", [=] { ops::group_norm(c4, c4, c4, 1, -1, 1e-3); }, {"group_norm", "[4]"}},
    {"group_norm: gamma of the wrong shape", [=] { ops::group_norm(x, c3, c4, 2, -1, 1e-3); },
     {"group_norm", "gamma", "[3]", "[4]"}},
    {"group_norm: an axis past the rank", [=] { ops::group_norm(x, c4, c4, 2, 2, 1e-3); },
     {"group_norm", "axis 2", "rank 2"}},
    {"batch_norm: gamma of the wrong shape", [=] { ops::batch_norm(x, c3, c4, -1, 1e-3); },
     {"batch_norm", "gamma", "[3]", "[4]"}},
    {"batch_norm: an axis past the rank", [=] { ops::batch_norm(x, c4, c4, 2, 1e-3); },
     {"batch_norm", "axis 2", "rank 2"}},
    {"batch_norm: epsilon 0", [=] { ops::batch_norm(x, c4, c4, -1, 0.0); }, {"batch_norm", "epsilon"}},
    {"batch_norm: an empty batch", [=] { ops::batch_norm(Tensor::zeros({0, 4}), c4, c4, -1, 1e-3); },
     {"batch_norm", "zero elements", "[0, 4]"}},
    {"batch_norm_inference: mean of the wrong shape",
     [=] { ops::batch_norm_inference(x, c3, c4, c4, c4, -1, 1e-3); },
     {"batch_norm_inference", "mean", "[3]", "[4]"}},
    {"batch_norm_inference: variance of another dtype",
     [=] { ops::batch_norm_inference(x, c4, c4d, c4, c4, -1, 1e-3); },
     {"batch_norm_inference", "variance", "f64"}},
    {"batch_norm_inference: no statistics",
     [=] { ops::batch_norm_inference(x, undefined, undefined, c4, c4, -1, 1e-3); },
     {"batch_norm_inference", "mean", "[2, 4]"}},
    {"batch_norm_inference: an axis past the rank",
     [=] { ops::batch_norm_inference(x, c4, c4, c4, c4, 3, 1e-3); },
     {"batch_norm_inference", "axis 3", "rank 2"}},
  });
}

TEST_CASE("scaled_dot_product_attention rejects bad inputs naming the op and the shapes", "[bad_input]") {
  const Tensor q = Tensor::ones({1, 2, 3, 4});
  const Tensor k = Tensor::ones({1, 2, 5, 4});
  const Tensor v = Tensor::ones({1, 2, 5, 6});
  std::vector<BadInput> cases;
  const std::string sdpa = "scaled_dot_product_attention";
  for (auto impl : {ops::AttentionImpl::Math, ops::AttentionImpl::Flash}) {
    const std::string path = impl == ops::AttentionImpl::Math ? " (math)" : " (flash)";
    const auto attend = [impl](const Tensor& q_, const Tensor& k_, const Tensor& v_, ops::AttentionOptions o = {}) {
      o.impl = impl;
      return ops::scaled_dot_product_attention(q_, k_, v_, o);
    };
    cases.insert(
        cases.end(),
        {
            {"rank-3 q" + path,
             [=] { attend(Tensor::ones({2, 3, 4}), k, v); },
             {sdpa, "[2, 3, 4]"}},
            {"head_dim of q and k differ" + path,
             [=] { attend(q, Tensor::ones({1, 2, 5, 3}), v); },
             {sdpa, "[1, 2, 3, 4]", "[1, 2, 5, 3]"}},
            {"batch of q and k differ" + path,
             [=] { attend(q, Tensor::ones({2, 2, 5, 4}), v); },
             {sdpa, "[1, 2, 3, 4]", "[2, 2, 5, 4]"}},
            {"heads of q and k differ" + path,
             [=] { attend(q, Tensor::ones({1, 3, 5, 4}), v); },
             {sdpa, "[1, 2, 3, 4]", "[1, 3, 5, 4]"}},
            {"k_seq of k and v differ" + path,
             [=] { attend(q, k, Tensor::ones({1, 2, 4, 6})); },
             {sdpa, "[1, 2, 5, 4]", "[1, 2, 4, 6]"}},
            {"q f32 with k f64" + path, [=] { attend(q, k.to(DType::f64), v); }, {sdpa, "f32", "f64"}},
            {"v f64 with q f32" + path, [=] { attend(q, k, v.to(DType::f64)); }, {sdpa, "f32", "f64"}},
            {"i64 inputs" + path, [=] { attend(q.to(DType::i64), k.to(DType::i64), v.to(DType::i64)); }, {sdpa, "i64"}},
            {"a mask that does not broadcast" + path,
             [=] { attend(q, k, v, {.mask = Tensor::ones({3, 4}, DType::boolean)}); },
             {sdpa, "[3, 4]", "[1, 2, 3, 5]"}},
            {"a mask of rank 5" + path,
             [=] { attend(q, k, v, {.mask = Tensor::ones({1, 1, 2, 3, 5}, DType::boolean)}); },
             {sdpa, "[1, 1, 2, 3, 5]", "[1, 2, 3, 5]"}},
            {"an i64 mask" + path,
             [=] { attend(q, k, v, {.mask = Tensor::ones({3, 5}, DType::i64)}); },
             {sdpa, "i64", "[3, 5]"}},
            {"a negative sliding window" + path,
             [=] { attend(q, k, v, {.sliding_window = -1}); },
             {sdpa, "sliding_window", "-1"}},
            {"scale 0" + path, [=] { attend(q, k, v, {.scale = 0.0}); }, {sdpa, "scale", "0"}},
            {"a NaN scale" + path, [=] { attend(q, k, v, {.scale = std::nan("")}); }, {sdpa, "scale", "nan"}},
            {"head_dim 0" + path,
             [=] { attend(Tensor::ones({1, 2, 3, 0}), Tensor::ones({1, 2, 5, 0}), v); },
             {sdpa, "head_dim", "[1, 2, 3, 0]"}},
            {"an undefined v" + path, [=] { attend(q, k, undefined); }, {sdpa, "defined"}},
        });
  }
  cases.insert(cases.end(),
               {
                   {"attention_probabilities: head_dim of q and k differ",
                    [=] { ops::attention_probabilities(q, Tensor::ones({1, 2, 5, 3})); },
                    {"attention_probabilities", "[1, 2, 3, 4]", "[1, 2, 5, 3]"}},
                   {"attention_probabilities: a mask that does not broadcast",
                    [=] { ops::attention_probabilities(q, k, {.mask = Tensor::ones({2, 2}, DType::boolean)}); },
                    {"attention_probabilities", "[2, 2]"}},
                   {"with_probabilities: k_seq of k and v differ",
                    [=] { ops::scaled_dot_product_attention_with_probabilities(q, k, Tensor::ones({1, 2, 4, 6})); },
                    {"scaled_dot_product_attention", "[1, 2, 5, 4]", "[1, 2, 4, 6]"}},
               });
  run_bad_inputs("attention", cases);
}

TEST_CASE("tensor factories and accessors reject negative sizes and wrong types", "[bad_input]") {
  run_bad_inputs("tensor", {
    {"zeros: a negative size", [] { Tensor::zeros({2, -3}); }, {"Tensor::zeros", "[2, -3]"}},
    {"ones: a negative size", [] { Tensor::ones({-1}); }, {"Tensor::ones", "[-1]"}},
    {"full: a negative size", [] { Tensor::full({-2, 2}, 1.0); }, {"Tensor::full", "[-2, 2]"}},
    {"empty: a negative size", [] { Tensor::empty({3, -1}); }, {"Tensor::empty", "[3, -1]"}},
    {"randn: a negative size", [] { Tensor::randn({-4}, DType::f32, 1); }, {"Tensor::randn", "[-4]"}},
    {"uniform: a negative size", [] { Tensor::uniform({-4}); }, {"Tensor::uniform", "[-4]"}},
    {"uniform: lo above hi", [] { Tensor::uniform({2}, 1.0, 0.0); }, {"uniform", "lo=1", "hi=0"}},
    {"randn: an i64 dtype", [] { Tensor::randn({2}, DType::i64, 1); }, {"randn", "i64"}},
    {"uniform: a bool dtype", [] { Tensor::uniform({2}, 0.0, 1.0, DType::boolean); }, {"uniform", "bool"}},
    {"from_vector: too few values", [] { Tensor::from_vector(std::vector<float>{1, 2, 3}, {2, 3}); },
     {"from_vector", "3", "[2, 3]"}},
    {"from_vector: a negative size", [] { Tensor::from_vector(std::vector<double>{}, {-1, 0}); },
     {"from_vector", "[-1, 0]"}},
    {"arange: step 0", [] { Tensor::arange(0.0, 1.0, 0.0); }, {"arange", "step"}},
    {"arange: a NaN bound", [] { Tensor::arange(0.0, std::nan(""), 1.0); }, {"arange", "nan"}},
    {"arange: more values than memory holds", [] { Tensor::arange(0.0, 1e300); }, {"arange", "too many"}},
    {"zeros: more elements than a 64-bit count", [] { Tensor::zeros({1LL << 32, 1LL << 32}); },
     {"zeros", "[4294967296, 4294967296]"}},
    {"full: more bytes than memory holds", [] { Tensor::full({1LL << 62}, 1.0, DType::f64); },
     {"full", "[4611686018427387904]"}},
    {"broadcast_to: more elements than a 64-bit count",
     [] { ops::broadcast_to(Tensor::ones({1}), {1LL << 32, 1LL << 32}); },
     {"[4294967296, 4294967296]"}},
    {"item: more than one element", [] { f23.item<double>(); }, {"item", "[2, 3]"}},
    {"item: no element", [] { Tensor::zeros({0}).item<double>(); }, {"item", "[0]"}},
    {"data: the wrong element type", [] { f23.data<double>(); }, {"data", "f32", "f64"}},
    {"size: an axis past the rank", [] { f23.size(2); }, {"size", "axis 2", "rank 2"}},
    {"shape of an undefined tensor", [] { (void)undefined.shape(); }, {"Tensor", "undefined"}},
    {"to_vector of an undefined tensor", [] { undefined.to_vector<float>(); }, {"Tensor", "undefined"}},
    {"to: NaN to i64", [] { Tensor::full({2}, std::nan("")).to(DType::i64); }, {"cast", "nan"}},
    {"Variable::assign: another shape", [] { Variable(f23).assign(f45); }, {"assign", "[2, 3]", "[4, 5]"}},
    {"Variable::assign: another dtype", [] { Variable(f23).assign(d23); }, {"assign", "f32", "f64"}},
    {"Variable: an undefined initial value", [] { Variable{undefined}; }, {"Variable", "undefined"}},
    {"Variable: value of an empty variable", [] { Variable().value(); }, {"Variable"}},
  });
}

TEST_CASE("file readers and writers reject bad files and tensors naming the file", "[bad_input]") {
  TempDir dir("bad-input");
  const std::string npy = dir.file("x.npy");
  const std::string st = dir.file("x.safetensors");
  const std::string garbage = dir.file("garbage.bin");
  const std::string png = dir.file("a.png");
  const std::string no_folder = dir.file("no/such/x.npy");
  const std::string missing_st = dir.file("missing.safetensors");
  write_bytes(garbage, "not a tensor file at all");
  const std::string missing = dir.file("missing.npy");
  run_bad_inputs("io", {
    {"save_npy: an undefined tensor", [=] { io::save_npy(npy, undefined); }, {"save_npy", "x.npy"}},
    {"save_npy: into a missing folder", [=] { io::save_npy(no_folder, f23); }, {"x.npy"}},
    {"load_npy: a missing file", [=] { io::load_npy(missing); }, {"missing.npy"}},
    {"load_npy: not an npy file", [=] { io::load_npy(garbage); }, {"garbage.bin"}},
    {"save_safetensors: an empty name", [=] { io::save_safetensors(st, {{"", f23}}); }, {"save_safetensors", "name"}},
    {"save_safetensors: a repeated name", [=] { io::save_safetensors(st, {{"w", f23}, {"w", f45}}); },
     {"save_safetensors", "w"}},
    {"save_safetensors: the reserved name", [=] { io::save_safetensors(st, {{"__metadata__", f23}}); },
     {"save_safetensors", "__metadata__"}},
    {"save_safetensors: an undefined tensor", [=] { io::save_safetensors(st, {{"w", undefined}}); },
     {"save_safetensors", "w"}},
    {"load_safetensors: a missing file", [=] { io::load_safetensors(missing_st); }, {"missing.safetensors"}},
    {"load_safetensors: not a safetensors file", [=] { io::load_safetensors(garbage); }, {"garbage.bin"}},
    {"save_png: fewer bytes than width * height * 3", [=] { io::save_png(png, {1, 2, 3}, 2, 2); },
     {"save_png", "a.png"}},
    {"save_png: a negative width", [=] { io::save_png(png, {}, -2, 2); }, {"save_png", "-2"}},
    {"save_heatmap_png: a rank-3 tensor", [=] { io::save_heatmap_png(png, Tensor::ones({2, 2, 2})); },
     {"save_heatmap_png", "[2, 2, 2]"}},
    {"save_heatmap_png: too few row labels", [=] { io::save_heatmap_png(png, f23, {.row_labels = {"a"}}); },
     {"save_heatmap_png", "1 row labels", "2 rows"}},
    {"save_heatmap_png: an empty matrix", [=] { io::save_heatmap_png(png, Tensor::zeros({0, 3})); },
     {"save_heatmap_png", "[0, 3]"}},
    {"save_line_chart_png: log scale of a negative value",
     [=] { io::save_line_chart_png(png, {{"loss", {1.0, -1.0}}}, {.log_y = true}); },
     {"save_line_chart_png", "loss"}},
  });
}

TEST_CASE("gradcheck and the tape reject non-float tensors and mismatched gradients", "[bad_input]") {
  const TensorFn square_sum = [](const std::vector<Tensor>& in) { return ops::sum(ops::square(in[0])); };
  run_bad_inputs("autograd", {
    {"gradcheck: a float32 input", [=] { gradcheck(square_sum, {f23}); }, {"gradcheck", "f32", "[2, 3]"}},
    {"gradcheck: an i64 input", [=] { gradcheck(square_sum, {i23}); }, {"gradcheck", "i64", "[2, 3]"}},
    {"gradcheck: no inputs", [=] { gradcheck(square_sum, {}); }, {"gradcheck", "input"}},
    {"gradcheck: an undefined input", [=] { gradcheck(square_sum, {undefined}); }, {"gradcheck", "undefined"}},
    {"gradcheck: an eps of 0", [=] { gradcheck(square_sum, {d23}, {.eps = 0.0}); }, {"gradcheck", "eps"}},
    {"gradgradcheck: a float32 input", [=] { gradgradcheck(square_sum, {f23}); }, {"gradgradcheck", "f32", "[2, 3]"}},
    {"gradient of an i64 target",
     [] {
       GradientTape tape;
       const Tensor x = d23.clone();
       tape.watch(x);
       tape.gradient(ops::argmax(x, 1), {x});
     },
     {"gradient", "i64", "[2]"}},
    {"gradient with respect to an i64 source",
     [] {
       GradientTape tape;
       const Tensor x = d23.clone();
       tape.watch(x);
       tape.gradient(ops::sum(x), {i23});
     },
     {"gradient", "i64", "[2, 3]"}},
    {"gradient with an output_gradient of another shape",
     [] {
       GradientTape tape;
       const Tensor x = d23.clone();
       tape.watch(x);
       tape.gradient(ops::square(x), {x}, Tensor::ones({4, 5}, DType::f64));
     },
     {"gradient", "[2, 3]", "[4, 5]"}},
    {"gradient with an output_gradient of another dtype",
     [] {
       GradientTape tape;
       const Tensor x = d23.clone();
       tape.watch(x);
       tape.gradient(ops::square(x), {x}, f23);
     },
     {"gradient", "f64", "f32"}},
    {"gradient of an undefined target",
     [] {
       GradientTape tape;
       tape.gradient(undefined, {d23});
     },
     {"gradient", "undefined"}},
    {"gradient asked twice of a non-persistent tape",
     [] {
       GradientTape tape;
       const Tensor x = d23.clone();
       tape.watch(x);
       const Tensor y = ops::sum(ops::square(x));
       tape.gradient(y, {x});
       tape.gradient(y, {x});
     },
     {"gradient", "persistent"}},
    {"watch of an undefined tensor",
     [] {
       GradientTape tape;
       tape.watch(undefined);
     },
     {"watch", "undefined"}},
  });
}

TEST_CASE("zero-size dimensions give NumPy's empty results, not errors", "[bad_input]") {
  const Tensor e03 = Tensor::zeros({0, 3});
  CHECK((e03 + e03).shape() == Shape{0, 3});
  CHECK((e03 + Tensor::ones({1, 3})).shape() == Shape{0, 3});
  CHECK(ops::exp(e03).shape() == Shape{0, 3});
  CHECK(ops::less(e03, e03).shape() == Shape{0, 3});
  CHECK(ops::where(Tensor::zeros({0, 3}, DType::boolean), e03, e03).shape() == Shape{0, 3});
  CHECK(ops::sum(e03).item<double>() == 0.0);
  CHECK(values(ops::sum(e03, {0})) == std::vector<double>{0, 0, 0});
  CHECK(ops::sum(e03, {1}).shape() == Shape{0});
  CHECK(ops::mean(e03, {1}).shape() == Shape{0});  // no element is averaged over nothing
  CHECK(ops::max(e03, {1}).shape() == Shape{0});
  CHECK(ops::logsumexp(e03).item<double>() == -kInf);
  CHECK(ops::argmax(e03, 1).shape() == Shape{0});
  CHECK(ops::matmul(e03, Tensor::ones({3, 4})).shape() == Shape{0, 4});
  CHECK(values(ops::matmul(Tensor::ones({2, 0}), Tensor::ones({0, 2}))) == std::vector<double>{0, 0, 0, 0});
  CHECK(ops::einsum("ab,bc->ac", e03, Tensor::ones({3, 2})).shape() == Shape{0, 2});
  CHECK(ops::reshape(e03, {3, -1}).shape() == Shape{3, 0});
  CHECK(ops::reshape(e03, {0, 5}).shape() == Shape{0, 5});
  CHECK(ops::concat({e03, Tensor::ones({2, 3})}).shape() == Shape{2, 3});
  CHECK(ops::stack({e03, e03}).shape() == Shape{2, 0, 3});
  CHECK(ops::slice(Tensor::ones({4}), 0, 3, 1).shape() == Shape{0});
  CHECK(
      ops::slice(f23, 1, std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max()).shape() ==
      Shape{2, 3});  // Python clamps start and stop
  CHECK(ops::slice(f23, 1, 7, 9).shape() == Shape{2, 0});
  CHECK(ops::split(e03, 3, 1).size() == 3);
  CHECK(ops::take(Tensor::ones({4, 2}), Tensor::zeros({0}, DType::i64), 0).shape() == Shape{0, 2});
  CHECK(ops::softmax(e03).shape() == Shape{0, 3});
  CHECK(ops::one_hot(Tensor::zeros({0}, DType::i64), 4).shape() == Shape{0, 4});
  CHECK(ops::layer_norm(Tensor::zeros({0, 4}), Tensor::ones({4}), Tensor::zeros({4}), {-1}, 1e-3).shape() ==
        Shape{0, 4});
  CHECK(ops::broadcast_to(Tensor::ones({1, 3}), {0, 3}).shape() == Shape{0, 3});
  CHECK(Tensor::arange(0.0, 0.0).numel() == 0);
  CHECK(Tensor::from_vector(std::vector<float>{}, {0, 2}).shape() == Shape{0, 2});
  for (auto impl : {ops::AttentionImpl::Math, ops::AttentionImpl::Flash}) {
    INFO("impl " << int(impl));
    const Tensor q0 = Tensor::ones({1, 2, 0, 4}), k = Tensor::ones({1, 2, 5, 4}), v = Tensor::ones({1, 2, 5, 6});
    CHECK(ops::scaled_dot_product_attention(q0, k, v, {.impl = impl}).shape() == Shape{1, 2, 0, 6});
    // No key at all: every query row attends nothing and gets zeros, never NaN.
    const Tensor o = ops::scaled_dot_product_attention(Tensor::ones({1, 2, 3, 4}), Tensor::ones({1, 2, 0, 4}),
                                                       Tensor::ones({1, 2, 0, 6}), {.impl = impl});
    CHECK(o.shape() == Shape{1, 2, 3, 6});
    CHECK(values(o) == std::vector<double>(36, 0.0));
  }
}

TEST_CASE("scalar operators, reductions, softmax and Variable updates name the op and the shapes", "[bad_input]") {
  std::vector<BadInput> cases = {
      {"tensor + scalar: an undefined tensor", [] { undefined + 1.0; }, {"add", "undefined"}},
      {"scalar - tensor: an undefined tensor", [] { 1.0 - undefined; }, {"sub", "undefined"}},
      {"tensor * scalar: an undefined tensor", [] { undefined * 2.0; }, {"mul", "undefined"}},
      {"scalar / tensor: an undefined tensor", [] { 2.0 / undefined; }, {"div", "undefined"}},
      {"scalar - tensor: an i64 tensor", [] { 1.0 - i23; }, {"sub", "i64", "[2, 3]"}},
      {"scalar / tensor: a bool tensor", [] { 2.0 / b23; }, {"div", "bool", "[2, 3]"}},
      {"softmax: an i64 input", [] { ops::softmax(i23); }, {"softmax", "i64", "[2, 3]"}},
      {"log_softmax: an i64 input", [] { ops::log_softmax(i23); }, {"log_softmax", "i64", "[2, 3]"}},
      {"log_sigmoid: an i64 input", [] { ops::log_sigmoid(i23); }, {"log_sigmoid", "i64", "[2, 3]"}},
      {"log_sigmoid: a bool input", [] { ops::log_sigmoid(b23); }, {"log_sigmoid", "bool", "[2, 3]"}},
      {"argmax: a bool input", [] { ops::argmax(b23); }, {"argmax", "bool", "[2, 3]"}},
      {"argmin: a bool input", [] { ops::argmin(b23); }, {"argmin", "bool", "[2, 3]"}},
      {"Variable::assign_add: another shape", [] { Variable(f23).assign_add(f45); }, {"assign_add", "[2, 3]", "[4, 5]"}},
      {"Variable::assign_sub: another dtype", [] { Variable(f23).assign_sub(d23); }, {"assign_sub", "f32", "f64"}},
  };
  using Reduction = Tensor (*)(const Tensor&, const Axes&, bool);
  for (const auto& [name, reduction] : std::vector<std::pair<std::string, Reduction>>{
           {"sum", ops::sum}, {"mean", ops::mean}, {"var", ops::var}, {"max", ops::max}, {"min", ops::min},
           {"logsumexp", ops::logsumexp}}) {
    const Reduction fn = reduction;  // clang 14 cannot capture a structured binding
    cases.push_back({name + ": a bool input", [fn] { fn(b23, {}, false); }, {name, "bool", "[2, 3]"}});
  }
  run_bad_inputs("op messages", cases);
}

TEST_CASE("sizes near 2^63 never wrap: concat, split, factories, slices and attention windows", "[bad_input]") {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  const Tensor huge = ops::broadcast_to(Tensor::ones({1}), {kMax});  // a view: no memory behind its rows
  const Tensor three = Tensor::arange(0.0, 3.0);
  run_bad_inputs("size overflow", {
      {"concat: part sizes that add past 2^63", [&] { ops::concat({huge, huge, three}); },
       {"concat", "does not fit in a 64-bit size"}},
      {"split: part sizes that add past 2^63", [&] { ops::split(three, std::vector<std::int64_t>{kMax, kMax, 5}, 0); },
       {"split", "[3]"}},
      {"split: one part larger than the axis", [&] { ops::split(three, std::vector<std::int64_t>{kMax, 1}, 0); },
       {"split", "more than axis 0"}},
      {"zeros: a zero dimension before dimensions whose strides overflow",
       [] { Tensor::zeros({0, std::int64_t(1) << 62, 4}); }, {"zeros", "[0, 4611686018427387904, 4]"}},
      {"reshape: a zero-size target whose strides overflow",
       [] { ops::reshape(Tensor::zeros({0}), {0, std::int64_t(1) << 62, 4}); }, {"reshape", "64-bit"}},
  });
  // Python's slice length for any step: one element whenever start < stop.
  for (const std::int64_t step : {kMax - 2, kMax - 1, kMax}) {
    INFO("step " << step);
    const Tensor s = ops::slice(three, 0, 0, 3, step);
    CHECK(s.shape() == Shape{1});
    CHECK(values(s) == std::vector<double>{0.0});
    CHECK(ops::slice(three, 0, 1, kMax, step).shape() == Shape{1});
  }
  // A window wider than both sequences reaches every key: the result without a window, on every path.
  const Tensor q = randn({1, 2, 70, 8}, 1), k = randn({1, 2, 66, 8}, 2), v = randn({1, 2, 66, 4}, 3);
  const auto attend = [&](ops::AttentionImpl impl, std::int64_t window, bool causal) {
    GradientTape tape;
    tape.watch(q);
    tape.watch(k);
    tape.watch(v);
    const Tensor o = ops::scaled_dot_product_attention(q, k, v, {.causal = causal, .sliding_window = window,
                                                                  .impl = impl});
    std::vector<Tensor> out{o};
    for (const Tensor& g : tape.gradient(ops::sum(ops::square(o)), {q, k, v})) out.push_back(g);
    return out;
  };
  for (const bool causal : {false, true}) {
    const std::vector<Tensor> want = attend(ops::AttentionImpl::Math, 0, causal);
    for (auto impl : {ops::AttentionImpl::Math, ops::AttentionImpl::Flash}) {
      for (const std::int64_t window : {kMax, kMax - 1, std::int64_t(1) << 62, std::int64_t(70)}) {
        INFO("impl " << int(impl) << ", window " << window << ", causal " << causal);
        const std::vector<Tensor> got = attend(impl, window, causal);
        for (std::size_t i = 0; i < got.size(); ++i) check_close(values(got[i]), values(want[i]), 1e-12);
      }
    }
  }
}

TEST_CASE("legal but huge sizes and ranks give loom::Error, not bad_alloc", "[bad_input]") {
  // 2^40 elements: the shapes are legal, the memory is more than any machine of this kind has.
  const std::int64_t huge = std::int64_t(1) << 40;
  const Tensor view = ops::broadcast_to(Tensor::ones({1}), {huge});  // costs nothing until materialized
  TempDir dir("bad-input");
  const std::string npy = dir.file("huge.npy");
  run_bad_inputs("memory", {
      {"zeros: 4 TiB", [=] { Tensor::zeros({huge}); }, {"zeros", "[1099511627776]", "memory and swap"}},
      {"sum: an output of 2^40 elements", [=] { ops::sum(Tensor::zeros({0, huge}), {0}); }, {"memory and swap"}},
      {"to_vector: a broadcast view of 2^40 elements", [=] { view.to_vector<float>(); },
       {"to_vector", "[1099511627776]", "memory and swap"}},
      {"contiguous: a broadcast view of 2^40 elements", [=] { ops::contiguous(view); }, {"memory and swap"}},
      {"save_npy: a broadcast view of 2^40 elements", [=] { io::save_npy(npy, view); },
       {"save_npy", "huge.npy", "memory and swap"}},
      {"zeros: 65 dimensions", [] { Tensor::zeros(Shape(65, 1)); }, {"zeros", "rank 65", "more than 64"}},
      {"reshape: into 65 dimensions", [] { ops::reshape(Tensor::ones({1}), Shape(65, 1)); }, {"more than 64"}},
      {"expand_dims: past 64 dimensions", [] { ops::expand_dims(Tensor::ones(Shape(64, 1)), 0); },
       {"more than 64"}},
  });
  CHECK_FALSE(std::filesystem::exists(npy));
  CHECK(ops::sum(Tensor::ones(Shape(64, 1))).item<double>() == 1.0);  // 64 dimensions are fine
}
