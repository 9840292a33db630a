#include "framework/ops/linalg.hpp"

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

#include "framework/autograd/record.hpp"
#include "framework/autograd/tape.hpp"
#include "framework/graph/symbolic.hpp"
#include "framework/kernels/dispatch.hpp"
#include "framework/kernels/strided.hpp"
#include "framework/ops/ops.hpp"
#include "framework/runtime/bf16_matmul.hpp"
#include "framework/runtime/blas.hpp"
#include "framework/runtime/detail/gemm.hpp"
#include "framework/runtime/detail/parallel.hpp"
#include "framework/tensor/detail/tensor_impl.hpp"

namespace loom::ops {

namespace {

/// Output rows per piece when the bias is copied into dense's output.
constexpr std::int64_t kRowsPerPiece = 256;

// ---------------------------------------------------------------------------------------------------------
// matmul
// ---------------------------------------------------------------------------------------------------------

/// How gemm reads a matrix in place: row-major with leading dimension `ld`, or (transposed) the row-major
/// storage of its transpose.
struct MatrixLayout {
  bool transposed;
  std::int64_t ld;
};

/// A rows x cols matrix with element strides (rs, cs), both dimensions > 0, that gemm can read without a
/// copy: unit column stride (plain) or unit row stride (transposed), rows not overlapping. A size-1
/// dimension may carry any stride. Anything else (broadcast or negative strides, gaps in both) needs a copy.
std::optional<MatrixLayout> gemm_layout(std::int64_t rows, std::int64_t cols, std::int64_t rs, std::int64_t cs) {
  if ((cols == 1 || cs == 1) && (rows == 1 || rs >= cols)) return MatrixLayout{false, rows == 1 ? cols : rs};
  if ((rows == 1 || rs == 1) && (cols == 1 || cs >= rows)) return MatrixLayout{true, cols == 1 ? rows : cs};
  return std::nullopt;
}

/// One operand of a batched product: a base pointer's tensor, its gemm layout, and its strides over the
/// broadcast batch shape (0 where it is broadcast).
struct Operand {
  Tensor data;
  MatrixLayout layout;
  Strides batch_strides;
};

Operand prepare(Tensor x, const Shape& batch) {
  const std::size_t rank = std::size_t(x.ndim());
  auto layout = gemm_layout(x.shape()[rank - 2], x.shape()[rank - 1], x.strides()[rank - 2], x.strides()[rank - 1]);
  if (!layout) {
    const NoGradGuard internal;  // a private copy for gemm; the tape records matmul itself
    x = ops::contiguous(x);
    layout = MatrixLayout{false, x.shape()[rank - 1]};
  }
  Strides batch_strides(batch.size(), 0);
  const std::size_t x_batch = rank - 2;
  for (std::size_t i = 0; i < x_batch; ++i) {
    const std::size_t out = batch.size() - x_batch + i;
    if (x.shape()[i] != 1) batch_strides[out] = x.strides()[i];
  }
  return {x, *layout, batch_strides};
}

/// When every output row of the batched product can come from one gemm: `b` is the same matrix for every
/// batch entry and the rows of `a` over [batch..., m] are evenly spaced (a contiguous stack, e.g. [B, S, D]
/// @ [D, N]). Returns the row spacing, used as lda.
std::optional<std::int64_t> folded_row_step(const Operand& a, const Operand& b, const Shape& batch, std::int64_t m) {
  if (a.layout.transposed || batch.empty()) return std::nullopt;
  if (std::any_of(b.batch_strides.begin(), b.batch_strides.end(), [](std::int64_t s) { return s != 0; }))
    return std::nullopt;
  std::int64_t step = a.layout.ld, extent = m;  // rows seen so far are step apart
  for (std::size_t i = batch.size(); i-- > 0;) {
    if (batch[i] == 1) continue;
    if (a.batch_strides[i] != step * extent) return std::nullopt;
    extent *= batch[i];
  }
  return step;
}

/// C = op(A) @ op(B) (beta 0) or += (beta 1): float and double through OpenBLAS, bfloat16 into float32.
template <class T, class Out>
void gemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k, const T* a,
          std::int64_t lda, const T* b, std::int64_t ldb, Out beta, Out* c, std::int64_t ldc) {
  if constexpr (std::is_same_v<T, bfloat16>)
    blas::gemm_bf16(transpose_a, transpose_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
  else
    blas::gemm<T>(transpose_a, transpose_b, m, n, k, T(1), a, lda, b, ldb, beta, c, ldc);
}

/// x widened to float32 in its own layout: a transposed matrix (the backward's x^T) stays a transposed view,
/// of a contiguous copy, so that the product reads it as BLAS's transposed operand instead of the cast
/// copying it across.
Tensor widened(const Tensor& x) {
  if (x.ndim() >= 2 && !x.is_contiguous())
    if (const Tensor t = ops::transpose(x); t.is_contiguous()) return ops::transpose(ops::cast(t, DType::f32));
  return ops::cast(x, DType::f32);
}

/// The operands as the product reads them: bf16 ones widened (exactly) to float32 for sgemm when the bf16
/// engine is "float32", as they are otherwise. Internal copies, not recorded.
std::pair<Tensor, Tensor> product_operands(const Tensor& a, const Tensor& b) {
  if (a.dtype() != DType::bf16 || bf16_matmul_engine() != "float32") return {a, b};
  NoGradGuard no_grad;
  return {widened(a), widened(b)};
}

/// Calls fn.template operator()<T, Out>() for the operand and result types of a product of `dtype` operands
/// (as product_operands gives them).
template <class Fn>
void visit_product(DType dtype, const char* op, Fn&& fn) {
  if (dtype == DType::bf16) return fn.template operator()<bfloat16, float>();
  visit_floating(dtype, op, [&]<class T>() { fn.template operator()<T, T>(); });
}

template <class T, class Out>
void batched_gemm(const Tensor& a, const Tensor& b, const Shape& batch, std::int64_t m, std::int64_t n,
                  std::int64_t k, Tensor& out) {
  const Operand A = prepare(a, batch), B = prepare(b, batch);
  Out* c = out.data<Out>();
  const T* pa = A.data.data<T>();
  const T* pb = B.data.data<T>();
  const std::int64_t count = numel(batch);
  if (auto step = folded_row_step(A, B, batch, m)) {
    gemm(false, B.layout.transposed, count * m, n, k, pa, *step, pb, B.layout.ld, Out(0), c, n);
    return;
  }
  std::vector<std::int64_t> offset_a(static_cast<std::size_t>(count)), offset_b(static_cast<std::size_t>(count));
  for_each_strided(batch, A.batch_strides, 0, [&](std::int64_t i, std::int64_t at) { offset_a[std::size_t(i)] = at; });
  for_each_strided(batch, B.batch_strides, 0, [&](std::int64_t i, std::int64_t at) { offset_b[std::size_t(i)] = at; });
  for (std::int64_t i = 0; i < count; ++i)
    gemm(A.layout.transposed, B.layout.transposed, m, n, k, pa + offset_a[std::size_t(i)], A.layout.ld,
         pb + offset_b[std::size_t(i)], B.layout.ld, Out(0), c + i * m * n, n);
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (graph::any_symbolic(a, b))
    return graph::record_op("matmul", {a, b}, [](const std::vector<Tensor>& v) { return matmul(v[0], v[1]); });
  check(a.defined() && b.defined(), "matmul: an operand is undefined");
  check(is_differentiable(a.dtype()) && is_differentiable(b.dtype()),
        "matmul: expected float32, float64 or bf16 tensors, got {} {} @ {} {}", a.dtype(), a.shape(), b.dtype(),
        b.shape());
  check(a.dtype() == b.dtype(), "matmul: dtypes differ: {} {} @ {} {} (cast one with ops::cast)", a.dtype(),
        a.shape(), b.dtype(), b.shape());
  check(a.ndim() >= 1 && b.ndim() >= 1,
        "matmul: expected operands of rank >= 1, got {} @ {} (use ops::mul to scale by a scalar)", a.shape(),
        b.shape());

  // NumPy: a 1-D left operand is a row [1, k], a 1-D right operand a column [k, 1]; the added axis is removed
  // from the result. The views are internal (not recorded).
  const Tensor a2 = a.ndim() == 1 ? make_view(a, {1, a.shape()[0]}, {0, a.strides()[0]}, a.offset()) : a;
  const Tensor b2 = b.ndim() == 1 ? make_view(b, {b.shape()[0], 1}, {b.strides()[0], 0}, b.offset()) : b;
  const std::int64_t m = a2.size(-2), k = a2.size(-1), n = b2.size(-1);
  check(k == b2.size(-2), "matmul: inner dimensions differ: {} @ {} ({} != {})", a.shape(), b.shape(), k,
        b2.size(-2));

  const Shape batch_a(a2.shape().begin(), a2.shape().end() - 2), batch_b(b2.shape().begin(), b2.shape().end() - 2);
  const std::size_t batch_rank = std::max(batch_a.size(), batch_b.size());
  Shape batch(batch_rank);
  for (std::size_t i = 0; i < batch_rank; ++i) {
    const std::int64_t da = i + batch_a.size() < batch_rank ? 1 : batch_a[i + batch_a.size() - batch_rank];
    const std::int64_t db = i + batch_b.size() < batch_rank ? 1 : batch_b[i + batch_b.size() - batch_rank];
    check(da == db || da == 1 || db == 1,
          "matmul: batch dimensions cannot be broadcast: {} @ {} (batch shapes {} and {})", a.shape(), b.shape(),
          batch_a, batch_b);
    batch[i] = da == 1 ? db : da;
  }

  Shape out_shape = batch;
  if (a.ndim() > 1) out_shape.push_back(m);
  if (b.ndim() > 1) out_shape.push_back(n);
  // gemm with beta = 0 writes every element, so the output need not be zero-filled first (OpenBLAS clears
  // it itself); an empty sum (k == 0) is zeros.
  // bf16 operands give a float32 result (accumulated in float32).
  const DType out_dtype = compute_dtype(a.dtype());
  Tensor out = k > 0 ? Tensor::empty(out_shape, out_dtype) : Tensor::zeros(out_shape, out_dtype);
  if (out.numel() > 0 && k > 0) {
    const std::pair<Tensor, Tensor> operands = product_operands(a2, b2);
    visit_product(operands.first.dtype(), "matmul", [&]<class T, class Out>() {
      batched_gemm<T, Out>(operands.first, operands.second, batch, m, n, k, out);
    });
  }

  if (autograd::needs_recording({&a, &b})) {
    Shape promoted = batch;  // the result with the 1-D operands' added axes kept
    promoted.push_back(m);
    promoted.push_back(n);
    const std::int64_t rows = numel(batch) * m;
    autograd::record("matmul", {a, b}, {out}, [a, b, promoted, k, n, rows](const std::vector<Tensor>& g) {
      const Tensor lhs = a.ndim() == 1 ? ops::expand_dims(a, 0) : a;
      const Tensor rhs = b.ndim() == 1 ? ops::expand_dims(b, 1) : b;
      Tensor g2 = g[0].shape() == promoted ? g[0] : ops::reshape(g[0], promoted);
      // bf16 operands: the products of the backward pass run on bf16 too; their float32 results are the
      // gradients (the tape carries a bf16 tensor's gradient in float32).
      if (a.dtype() == DType::bf16) g2 = ops::cast(g2, DType::bf16);
      // dA = dC @ B^T and dB = A^T @ dC per batch entry; the tape sums broadcast batch dimensions away.
      Tensor ga = ops::matmul(g2, ops::transpose(rhs));
      // A shared 2-D B (a Dense kernel applied to [B, S, D]) gets its gradient from one folded product
      // instead of a stack of per-batch products summed afterwards.
      Tensor gb = rhs.ndim() == 2 && lhs.ndim() > 2
                      ? ops::matmul(ops::transpose(ops::reshape(lhs, {rows, k})), ops::reshape(g2, {rows, n}))
                      : ops::matmul(ops::transpose(lhs), g2);
      if (a.ndim() == 1) ga = ops::squeeze(ga, -2);
      if (b.ndim() == 1) gb = ops::squeeze(gb, -1);
      return std::vector<Tensor>{ga, gb};
    });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// dense
// ---------------------------------------------------------------------------------------------------------

Tensor dense(const Tensor& x, const Tensor& kernel, const Tensor& bias) {
  if (graph::any_symbolic(x, kernel, bias))
    return graph::record_op("dense", {x, kernel, bias},
                            [](const std::vector<Tensor>& v) { return dense(v[0], v[1], v[2]); });
  check(x.defined() && kernel.defined(), "dense: {} is undefined", x.defined() ? "the kernel" : "the input");
  // bf16 input and kernel give a float32 result; the bias is then float32.
  const DType out_dtype = compute_dtype(x.dtype());
  check(is_differentiable(x.dtype()) && kernel.dtype() == x.dtype() && (!bias.defined() || bias.dtype() == out_dtype),
        "dense: expected float32 or float64 tensors of one dtype (or a bf16 input and kernel with a float32 bias), "
        "got input {} {}, kernel {} {}, bias {}", x.dtype(), x.shape(), kernel.dtype(), kernel.shape(),
        bias.defined() ? fmt::format("{} {}", bias.dtype(), bias.shape()) : "none");
  check(x.ndim() >= 1 && kernel.ndim() == 2 && x.shape().back() == kernel.shape()[0],
        "dense: expected an input [..., in] and a kernel [in, units], got input {} and kernel {}", x.shape(),
        kernel.shape());
  const std::int64_t in = kernel.shape()[0], units = kernel.shape()[1];
  const std::int64_t rows = numel(Shape(x.shape().begin(), x.shape().end() - 1));
  if (bias.defined())
    check(bias.shape() == Shape{units}, "dense: expected a bias of shape [{}] for kernel {}, got {}", units,
          kernel.shape(), bias.shape());

  Shape out_shape = x.shape();
  out_shape.back() = units;
  Tensor out = Tensor::empty(out_shape, out_dtype);
  const std::pair<Tensor, Tensor> operands = product_operands(x, kernel);
  visit_product(operands.first.dtype(), "dense", [&]<class T, class Out>() {
    NoGradGuard no_grad;  // the contiguous copies below are internal
    const Tensor xc = ops::contiguous(operands.first), kc = ops::contiguous(operands.second);
    Out* y = out.data<Out>();
    if (bias.defined()) {
      const Tensor bc = ops::contiguous(bias);
      const Out* b = bc.data<Out>();
      parallel::for_ranges(rows, kRowsPerPiece, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t r = begin; r < end; ++r) std::copy(b, b + units, y + r * units);
      });
    }
    if (rows == 0 || units == 0) return;
    if (in == 0) {
      if (!bias.defined()) std::fill(y, y + rows * units, Out(0));
      return;
    }
    gemm(false, false, rows, units, in, xc.data<T>(), in, kc.data<T>(), units, bias.defined() ? Out(1) : Out(0), y,
         units);
  });

  std::vector<Tensor> inputs{x, kernel};
  if (bias.defined()) inputs.push_back(bias);
  if (autograd::needs_recording(inputs)) {
    const bool has_bias = bias.defined();
    // dx = g @ kernel^T, dkernel = x^T @ g, dbias = sum(g) over the rows
    autograd::record("dense", inputs, {out}, [x, kernel, rows, in, units, has_bias](const std::vector<Tensor>& g) {
      const Tensor g2 = ops::reshape(g[0], {rows, units});
      // bf16 input and kernel: their gradients are the float32 results of bf16 products.
      const Tensor gm = x.dtype() == DType::bf16 ? ops::cast(g2, DType::bf16) : g2;
      std::vector<Tensor> grads{ops::reshape(ops::matmul(gm, ops::transpose(kernel)), x.shape()),
                                ops::matmul(ops::transpose(ops::reshape(x, {rows, in})), gm)};
      if (has_bias) grads.push_back(ops::sum(g2, {0}));
      return grads;
    });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// einsum
// ---------------------------------------------------------------------------------------------------------

namespace {

bool contains(const std::string& s, char c) { return s.find(c) != std::string::npos; }

/// Positions of `letters` within `indices`.
std::vector<std::int64_t> positions(const std::string& letters, const std::string& indices) {
  std::vector<std::int64_t> out;
  for (char c : letters) out.push_back(std::int64_t(indices.find(c)));
  return out;
}

bool is_identity(const std::vector<std::int64_t>& perm) {
  for (std::size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != std::int64_t(i)) return false;
  return true;
}

/// x with its axes ordered as `target` (a permutation of `indices`): a view.
Tensor arrange(const Tensor& x, const std::string& indices, const std::string& target) {
  const auto perm = positions(target, indices);
  return is_identity(perm) ? x : ops::permute(x, perm);
}

/// Merges x's axes [batch..., first group..., second group...] into [batch..., prod(first), prod(second)].
/// A view when the groups already are single axes or x is contiguous, else one copy.
Tensor group_axes(const Tensor& x, std::size_t batch, std::size_t first) {
  Shape target(x.shape().begin(), x.shape().begin() + std::ptrdiff_t(batch));
  const auto product = [&](std::size_t from, std::size_t to) {
    std::int64_t p = 1;
    for (std::size_t i = from; i < to; ++i) p *= x.shape()[i];
    return p;
  };
  target.push_back(product(batch, batch + first));
  target.push_back(product(batch + first, x.shape().size()));
  return target == x.shape() ? x : ops::reshape(x, target);
}

struct Equation {
  std::string a, b, out;
};

Equation parse_equation(const std::string& equation, const Tensor& a, const Tensor& b) {
  std::string eq;
  for (char c : equation)
    if (!std::isspace(static_cast<unsigned char>(c))) eq += c;
  check(!contains(eq, '.'), "einsum: ellipsis ('...') is not supported, in '{}'", equation);
  const auto arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  const auto comma = lhs.find(',');
  check(comma != std::string::npos && lhs.find(',', comma + 1) == std::string::npos,
        "einsum: malformed equation '{}': expected two comma-separated operands, e.g. 'ij,jk->ik'", equation);
  Equation e{lhs.substr(0, comma), lhs.substr(comma + 1), ""};
  const bool explicit_output = arrow != std::string::npos;
  if (explicit_output) e.out = eq.substr(arrow + 2);
  for (const std::string* part : {&e.a, &e.b, &e.out})
    for (char c : *part)
      check(std::isalpha(static_cast<unsigned char>(c)) != 0,
            "einsum: malformed equation '{}': unexpected '{}' (indices are single letters, e.g. 'ij,jk->ik')",
            equation, c);

  const Tensor* operands[] = {&a, &b};
  const std::string* terms[] = {&e.a, &e.b};
  for (int i = 0; i < 2; ++i) {
    check(std::int64_t(terms[i]->size()) == operands[i]->ndim(),
          "einsum: operand {} has {} indices '{}' in '{}' but rank {} (shape {})", i, terms[i]->size(), *terms[i],
          equation, operands[i]->ndim(), operands[i]->shape());
    for (std::size_t p = 0; p < terms[i]->size(); ++p)
      check(terms[i]->find((*terms[i])[p], p + 1) == std::string::npos,
            "einsum: index '{}' is repeated in operand {} ('{}' in '{}'); diagonals and traces are not supported",
            (*terms[i])[p], i, *terms[i], equation);
  }
  if (!explicit_output) {  // NumPy's implicit mode: the indices that occur once, in alphabetical order
    for (char c : e.a + e.b)
      if (!(contains(e.a, c) && contains(e.b, c))) e.out += c;
    std::sort(e.out.begin(), e.out.end());
  }
  for (std::size_t p = 0; p < e.out.size(); ++p) {
    const char c = e.out[p];
    check(contains(e.a, c) || contains(e.b, c), "einsum: output index '{}' does not occur in the operands of '{}'",
          c, equation);
    check(e.out.find(c, p + 1) == std::string::npos, "einsum: output index '{}' is repeated in '{}'", c, equation);
  }
  for (std::size_t p = 0; p < e.a.size(); ++p) {
    const auto q = e.b.find(e.a[p]);
    if (q != std::string::npos)
      check(a.shape()[p] == b.shape()[q],
            "einsum: index '{}' has size {} in operand 0 {} but {} in operand 1 {} ('{}')", e.a[p], a.shape()[p],
            a.shape(), b.shape()[q], b.shape(), equation);
  }
  return e;
}

/// Sums x over the axes whose index is in neither `other` nor `out`; drops them from `indices`.
Tensor sum_private(const Tensor& x, std::string& indices, const std::string& other, const std::string& out) {
  std::vector<std::int64_t> axes;
  std::string kept;
  for (std::size_t p = 0; p < indices.size(); ++p) {
    if (contains(other, indices[p]) || contains(out, indices[p])) kept += indices[p];
    else axes.push_back(std::int64_t(p));
  }
  if (axes.empty()) return x;
  indices = kept;
  if (x.dtype() == DType::bf16) return ops::cast(ops::sum(ops::cast(x, DType::f32), axes), DType::bf16);
  return ops::sum(x, axes);
}

}  // namespace

Tensor einsum(const std::string& equation, const Tensor& a, const Tensor& b) {
  if (graph::any_symbolic(a, b))
    return graph::record_op("einsum", {a, b},
                            [=](const std::vector<Tensor>& v) { return einsum(equation, v[0], v[1]); });
  check(a.defined() && b.defined(), "einsum: an operand is undefined ('{}')", equation);
  check(is_differentiable(a.dtype()) && is_differentiable(b.dtype()),
        "einsum: expected float32, float64 or bf16 tensors, got {} {} and {} {} ('{}')", a.dtype(), a.shape(),
        b.dtype(), b.shape(), equation);
  check(a.dtype() == b.dtype(), "einsum: dtypes differ: {} {} and {} {} ('{}')", a.dtype(), a.shape(), b.dtype(),
        b.shape(), equation);
  Equation e = parse_equation(equation, a, b);

  // An index of one operand only that the output drops is summed away first.
  const Tensor x = sum_private(a, e.a, e.b, e.out);
  const Tensor y = sum_private(b, e.b, e.a, e.out);

  // Classify: batch (both operands and output), left/right (one operand and output), contracted (both
  // operands, not output). Batch, left and right follow the output's order, contracted follows a's, which
  // keeps the permutations identities for the common layouts.
  std::string batch, left, right, contracted;
  for (char c : e.out) {
    const bool in_a = contains(e.a, c), in_b = contains(e.b, c);
    (in_a && in_b ? batch : in_a ? left : right) += c;
  }
  for (char c : e.a)
    if (contains(e.b, c) && !contains(e.out, c)) contracted += c;

  // [batch..., left..., contracted...] @ [batch..., contracted..., right...] as a batched matmul; matmul reads
  // permuted views in place when their matrix part is a plain or transposed block.
  const Tensor lhs = group_axes(arrange(x, e.a, batch + left + contracted), batch.size(), left.size());
  const Tensor rhs = group_axes(arrange(y, e.b, batch + contracted + right), batch.size(), contracted.size());
  Tensor product = ops::matmul(lhs, rhs);

  Shape expanded(product.shape().begin(), product.shape().begin() + std::ptrdiff_t(batch.size()));
  for (char c : left) expanded.push_back(x.shape()[std::size_t(e.a.find(c))]);
  for (char c : right) expanded.push_back(y.shape()[std::size_t(e.b.find(c))]);
  if (expanded != product.shape()) product = ops::reshape(product, expanded);  // contiguous: a view
  const auto perm = positions(e.out, batch + left + right);
  // einsum is a compute op: its result is a fresh contiguous tensor like any other.
  return is_identity(perm) ? product : ops::contiguous(ops::permute(product, perm));
}

}  // namespace loom::ops
