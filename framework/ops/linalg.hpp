#pragma once
// Matrix products on OpenBLAS (sgemm/dgemm).
#include <string>

#include "framework/tensor/tensor.hpp"

namespace loom::ops {

/// NumPy matmul: 1-D operands are promoted (and the added axis removed after), 2-D is a matrix product,
/// higher ranks are stacks of matrices whose batch dimensions broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);
/// matmul(x, kernel) + bias, what a Dense layer computes, in one gemm (PyTorch's addmm): x [..., in],
/// kernel [in, units], bias [units] or undefined for none; the result is [..., units]. The bias is written
/// into the output and the product accumulates onto it, which saves the pass a separate add would take.
Tensor dense(const Tensor& x, const Tensor& kernel, const Tensor& bias);
/// Einstein summation for two operands, e.g. "abc,cde->abde" and "abcd,cde->abe" (the projections of
/// MultiHeadAttention), "aecd,abcd->acbe". Implemented as permute + reshape + matmul, so it is
/// differentiable to any order. No repeated indices within one operand, no ellipsis.
Tensor einsum(const std::string& equation, const Tensor& a, const Tensor& b);

}  // namespace loom::ops
