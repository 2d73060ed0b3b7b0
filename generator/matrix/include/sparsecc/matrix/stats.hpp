// Structural statistics of a sparse matrix: nonzeros per row and per column (min, mean, max,
// population standard deviation, empty count) and overall sparsity.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sparsecc/matrix/csr.hpp"

namespace sparsecc {

// Statistics of a list of per-line nonzero counts. All zero for an empty list.
struct NnzStats {
  std::int64_t min = 0;
  double mean = 0.0;
  std::int64_t max = 0;
  double stddev = 0.0;     // population standard deviation (divides by the count)
  std::int64_t empty = 0;  // lines with no nonzero
};

struct MatrixStats {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t nnz = 0;
  double sparsity = 0.0;  // fraction of zero entries, 1 - nnz / (rows * cols); 0 for an empty shape
  NnzStats row;
  NnzStats col;
};

NnzStats nnz_stats(std::span<const std::int64_t> counts);
std::vector<std::int64_t> row_counts(const CsrMatrix& a);
std::vector<std::int64_t> col_counts(const CsrMatrix& a);
double sparsity(const CsrMatrix& a);
MatrixStats matrix_stats(const CsrMatrix& a);

}  // namespace sparsecc
