// fp64 CPU reference for sparse x dense products: the oracle every generated SpMM/SpMV kernel is
// checked against. Straightforward loops, fp64 accumulation, no blocking or reordering.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sparsecc/common/dtype.hpp"
#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/matrix/dense.hpp"

namespace sparsecc {

// C = A * B (M x K times K x N), then C[r][*] += (*bias)[r] when bias is given (M entries), then
// max(0, C) when relu. Throws UsageError on a shape mismatch or an invalid A.
DenseMatrix spmm(const CsrMatrix& A, const DenseMatrix& B, const std::vector<double>* bias = nullptr,
                 bool relu = false);

// y = A * x (x has A.cols entries).
std::vector<double> spmv(const CsrMatrix& A, const std::vector<double>& x);

// ---- Accuracy of reduced-precision executors ----
//
// Half-precision executors are checked against the fp64 product of their own inputs: A's values and
// B rounded to the dtype ("f16" or "bf16"; "f32" rounds to float32), so the check measures the
// executor's arithmetic, not the quantization of the weights.
// Throws UsageError for another dtype.
CsrMatrix round_values(const CsrMatrix& a, const std::string& dtype);
void round_values(DenseMatrix& b, const std::string& dtype);
CsrMatrix round_values(const CsrMatrix& a, DType dtype);
void round_values(DenseMatrix& b, DType dtype);

// The bound on max |C - C_ref| / max |C_ref| for an executor storing C in `dtype` and accumulating
// in `accumulate`, derived from the unit roundoff u of the storage type (2^-24 f32, 2^-11 f16,
// 2^-8 bf16): f32 keeps the long-standing 1e-5; with fp32 accumulation only the final rounding of C
// counts, 2u; accumulating in the dtype rounds every partial sum, whose errors grow like the square
// root of the terms of a row: u (2 + 2 sqrt(max_row_nnz)).
double spmm_tolerance(DType dtype, DType accumulate, std::int64_t max_row_nnz);
// The same for the names of a bundle's metadata ("f32", "f16", "bf16").
double spmm_tolerance(const std::string& dtype, const std::string& accumulate, std::int64_t max_row_nnz);

}  // namespace sparsecc
