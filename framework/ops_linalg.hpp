#pragma once
// Matrix products on OpenBLAS (sgemm/dgemm).
#include <string>

#include "framework/tensor.hpp"

namespace loom::ops {

/// NumPy matmul: 1-D operands are promoted (and the added axis removed after), 2-D is a matrix product,
/// higher ranks are stacks of matrices whose batch dimensions broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);
/// Einstein summation for two operands, e.g. "abc,cde->abde" and "abcd,cde->abe" (the projections of
/// MultiHeadAttention), "aecd,abcd->acbe". Implemented as permute + reshape + matmul, so it is
/// differentiable to any order. No repeated indices within one operand, no ellipsis.
Tensor einsum(const std::string& equation, const Tensor& a, const Tensor& b);

}  // namespace loom::ops
