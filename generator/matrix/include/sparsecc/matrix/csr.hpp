// The project's sparse matrix: compressed sparse rows with fp64 storage that remembers the dtype
// the values came from (every f16/bf16/f32 value is exact in a double).
#pragma once

#include <cstdint>
#include <vector>

#include "sparsecc/common/dtype.hpp"
#include "sparsecc/matrix/dense.hpp"

namespace sparsecc {

struct CsrMatrix {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::vector<std::int64_t> row_ptr{0};  // rows + 1 entries, non-decreasing, row_ptr[0] == 0
  std::vector<std::int32_t> col_idx;     // nnz entries, strictly increasing within each row
  std::vector<double> values;            // nnz entries
  DType source_dtype = DType::f64;

  std::int64_t nnz() const { return static_cast<std::int64_t>(col_idx.size()); }
  std::int64_t row_nnz(std::int64_t r) const { return row_ptr[r + 1] - row_ptr[r]; }
};

// Throws UsageError describing the first broken invariant (sizes, ordering, index range).
void validate(const CsrMatrix& a);

// Dense (row-major) <-> CSR. Zeros are dropped; values keep their positions exactly.
CsrMatrix csr_from_dense(const DenseMatrix& d, DType source_dtype = DType::f64);
DenseMatrix dense_from_csr(const CsrMatrix& a);

CsrMatrix transpose(const CsrMatrix& a);

// A with its rows reordered: row i of the result is row order[i] of a (order a permutation of
// 0..a.rows; UsageError otherwise). When `source_index` is given it receives, for every nonzero of
// the result, its index in a.
CsrMatrix permute_rows(const CsrMatrix& a, const std::vector<std::int64_t>& order,
                       std::vector<std::int64_t>* source_index = nullptr);

// Fills the values of a pattern-only matrix (DLMC .smtx) deterministically from a seed:
// uniform in [-1, 1) excluding exact zeros, stored as float32-representable numbers.
void fill_values_uniform(CsrMatrix& a, std::uint64_t seed);

}  // namespace sparsecc
