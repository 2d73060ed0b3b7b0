#include "sparsecc/reference/spmm.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "sparsecc/common/error.hpp"

namespace sparsecc {

DenseMatrix spmm(const CsrMatrix& A, const DenseMatrix& B, const std::vector<double>* bias, bool relu) {
  validate(A);
  if (B.rows < 0 || B.cols < 0 || static_cast<std::int64_t>(B.data.size()) != B.rows * B.cols)
    throw UsageError(fmt::format("spmm: B is {}x{} but holds {} values", B.rows, B.cols, B.data.size()));
  if (A.cols != B.rows)
    throw UsageError(fmt::format("spmm: A is {}x{} but B is {}x{}", A.rows, A.cols, B.rows, B.cols));
  if (bias && static_cast<std::int64_t>(bias->size()) != A.rows)
    throw UsageError(fmt::format("spmm: bias has {} entries, A has {} rows", bias->size(), A.rows));
  DenseMatrix C(A.rows, B.cols);
  for (std::int64_t r = 0; r < A.rows; ++r) {
    for (std::int64_t n = 0; n < B.cols; ++n) {
      double acc = 0.0;
      for (std::int64_t k = A.row_ptr[r]; k < A.row_ptr[r + 1]; ++k) acc += A.values[k] * B(A.col_idx[k], n);
      if (bias) acc += (*bias)[r];
      C(r, n) = relu ? std::max(0.0, acc) : acc;
    }
  }
  return C;
}

std::vector<double> spmv(const CsrMatrix& A, const std::vector<double>& x) {
  validate(A);
  if (static_cast<std::int64_t>(x.size()) != A.cols)
    throw UsageError(fmt::format("spmv: A is {}x{} but x has {} entries", A.rows, A.cols, x.size()));
  std::vector<double> y(static_cast<std::size_t>(A.rows), 0.0);
  for (std::int64_t r = 0; r < A.rows; ++r)
    for (std::int64_t k = A.row_ptr[r]; k < A.row_ptr[r + 1]; ++k) y[r] += A.values[k] * x[A.col_idx[k]];
  return y;
}

}  // namespace sparsecc
