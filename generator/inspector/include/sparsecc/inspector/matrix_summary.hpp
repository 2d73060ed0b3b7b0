// A human- and machine-readable overview of a sparse matrix for `sparsecc inspect`: shape, nonzero
// statistics per row and column, and a coarse map of where the nonzeros lie.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/matrix/stats.hpp"

namespace sparsecc {

struct MatrixSummary {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t nnz = 0;
  double sparsity = 0.0;  // fraction of zero entries
  DType source_dtype = DType::f64;
  NnzStats row_nnz;  // row_nnz.empty: rows without a nonzero
  NnzStats col_nnz;  // col_nnz.empty: columns without a nonzero
  // The matrix cut into min(block_grid, rows) x min(block_grid, cols) near-equal regions; each cell is
  // the density of its region (nonzeros / elements, in [0, 1]). Region i of n over a length L spans
  // [floor(i * L / n), floor((i + 1) * L / n)). Empty when the matrix has no rows or no columns.
  std::vector<std::vector<double>> block_density;
};

// Throws UsageError when block_grid is outside 1..1024 or the matrix is invalid.
MatrixSummary summarize_matrix(const CsrMatrix& a, int block_grid = 16);

// Keys: rows, cols, nnz, sparsity, source_dtype, row_nnz and col_nnz ({min, mean, max, stddev}),
// empty_rows, empty_cols, block_density (array of rows of cells).
nlohmann::json to_json(const MatrixSummary& s);

// Several lines of text; the density map uses ' .:-=+*#%@', ' ' for an empty region and '@' for the
// densest one, scaled to the densest region.
std::string to_text(const MatrixSummary& s);

}  // namespace sparsecc
