#include "sparsecc/reference/spmm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "sparsecc/common/dtype.hpp"
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

namespace {

DType rounding_type(const std::string& dtype) {
  const std::optional<DType> t = parse_dtype(dtype);
  if (!t) throw UsageError(fmt::format("round_values: unknown dtype '{}'", dtype));
  return *t;
}

}  // namespace

CsrMatrix round_values(const CsrMatrix& a, const std::string& dtype) {
  return round_values(a, rounding_type(dtype));
}

void round_values(DenseMatrix& b, const std::string& dtype) { round_values(b, rounding_type(dtype)); }

CsrMatrix round_values(const CsrMatrix& a, DType t) {
  CsrMatrix r = a;
  for (double& v : r.values) v = round_to(t, v);
  return r;
}

void round_values(DenseMatrix& b, DType t) {
  for (double& v : b.data) v = round_to(t, v);
}

double spmm_tolerance(const std::string& dtype, const std::string& accumulate, std::int64_t max_row_nnz) {
  if (dtype == "f32") return 1e-5;
  return spmm_tolerance(dtype == "bf16" ? DType::bf16 : DType::f16,
                        accumulate == "f32" ? DType::f32
                        : dtype == "bf16"   ? DType::bf16
                                            : DType::f16,
                        max_row_nnz);
}

double spmm_tolerance(DType dtype, DType accumulate, std::int64_t max_row_nnz) {
  if (dtype == DType::f32) return 1e-5;
  const double u = dtype == DType::bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
  if (accumulate == DType::f32) return 2 * u;
  return u * (2 + 2 * std::sqrt(static_cast<double>(std::max<std::int64_t>(max_row_nnz, 0))));
}

}  // namespace sparsecc
