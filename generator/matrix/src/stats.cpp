#include "sparsecc/matrix/stats.hpp"

#include <algorithm>
#include <cmath>

namespace sparsecc {

NnzStats nnz_stats(std::span<const std::int64_t> counts) {
  NnzStats s;
  if (counts.empty()) return s;
  s.min = *std::min_element(counts.begin(), counts.end());
  s.max = *std::max_element(counts.begin(), counts.end());
  double sum = 0.0;
  for (const auto c : counts) {
    sum += static_cast<double>(c);
    if (c == 0) ++s.empty;
  }
  const double n = static_cast<double>(counts.size());
  s.mean = sum / n;
  double sq = 0.0;
  for (const auto c : counts) sq += (static_cast<double>(c) - s.mean) * (static_cast<double>(c) - s.mean);
  s.stddev = std::sqrt(sq / n);
  return s;
}

std::vector<std::int64_t> row_counts(const CsrMatrix& a) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(a.rows));
  for (std::int64_t r = 0; r < a.rows; ++r) out[r] = a.row_nnz(r);
  return out;
}

std::vector<std::int64_t> col_counts(const CsrMatrix& a) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(a.cols));
  for (const auto c : a.col_idx) ++out[c];
  return out;
}

double sparsity(const CsrMatrix& a) {
  const double total = static_cast<double>(a.rows) * static_cast<double>(a.cols);
  return total == 0.0 ? 0.0 : 1.0 - static_cast<double>(a.nnz()) / total;
}

MatrixStats matrix_stats(const CsrMatrix& a) {
  validate(a);
  MatrixStats s;
  s.rows = a.rows;
  s.cols = a.cols;
  s.nnz = a.nnz();
  s.sparsity = sparsity(a);
  s.row = nnz_stats(row_counts(a));
  s.col = nnz_stats(col_counts(a));
  return s;
}

}  // namespace sparsecc
