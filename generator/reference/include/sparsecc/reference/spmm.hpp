// fp64 CPU reference for sparse x dense products: the oracle every generated SpMM/SpMV kernel is
// checked against. Straightforward loops, fp64 accumulation, no blocking or reordering.
#pragma once

#include <vector>

#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/matrix/dense.hpp"

namespace sparsecc {

// C = A * B (M x K times K x N), then C[r][*] += (*bias)[r] when bias is given (M entries), then
// max(0, C) when relu. Throws UsageError on a shape mismatch or an invalid A.
DenseMatrix spmm(const CsrMatrix& A, const DenseMatrix& B, const std::vector<double>* bias = nullptr,
                 bool relu = false);

// y = A * x (x has A.cols entries).
std::vector<double> spmv(const CsrMatrix& A, const std::vector<double>& x);

}  // namespace sparsecc
