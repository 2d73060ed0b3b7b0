#include "sparsecc/inspector/matrix_summary.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "sparsecc/common/error.hpp"

namespace sparsecc {
namespace {

// Start of region i of n over length len.
std::int64_t region_start(std::int64_t i, std::int64_t n, std::int64_t len) { return i * len / n; }

nlohmann::json stats_json(const NnzStats& s) {
  return {{"min", s.min}, {"mean", s.mean}, {"max", s.max}, {"stddev", s.stddev}};
}

}  // namespace

MatrixSummary summarize_matrix(const CsrMatrix& a, int block_grid) {
  if (block_grid < 1 || block_grid > 1024)
    throw UsageError(fmt::format("summarize_matrix: block grid {} outside 1..1024", block_grid));
  const MatrixStats st = matrix_stats(a);
  MatrixSummary s;
  s.rows = st.rows;
  s.cols = st.cols;
  s.nnz = st.nnz;
  s.sparsity = st.sparsity;
  s.source_dtype = a.source_dtype;
  s.row_nnz = st.row;
  s.col_nnz = st.col;
  if (a.rows == 0 || a.cols == 0) return s;
  const std::int64_t gr = std::min<std::int64_t>(block_grid, a.rows),
                     gc = std::min<std::int64_t>(block_grid, a.cols);
  std::vector<std::vector<std::int64_t>> count(gr, std::vector<std::int64_t>(gc, 0));
  for (std::int64_t i = 0; i < gr; ++i) {
    for (std::int64_t r = region_start(i, gr, a.rows); r < region_start(i + 1, gr, a.rows); ++r) {
      for (std::int64_t k = a.row_ptr[r]; k < a.row_ptr[r + 1]; ++k) {
        // The region j holding column c is the largest j with floor(j * cols / gc) <= c.
        const std::int64_t j = ((a.col_idx[k] + std::int64_t{1}) * gc - 1) / a.cols;
        ++count[i][j];
      }
    }
  }
  s.block_density.assign(gr, std::vector<double>(gc, 0.0));
  for (std::int64_t i = 0; i < gr; ++i) {
    const std::int64_t h = region_start(i + 1, gr, a.rows) - region_start(i, gr, a.rows);
    for (std::int64_t j = 0; j < gc; ++j) {
      const std::int64_t w = region_start(j + 1, gc, a.cols) - region_start(j, gc, a.cols);
      s.block_density[i][j] =
          static_cast<double>(count[i][j]) / (static_cast<double>(h) * static_cast<double>(w));
    }
  }
  return s;
}

nlohmann::json to_json(const MatrixSummary& s) {
  return {{"rows", s.rows},
          {"cols", s.cols},
          {"nnz", s.nnz},
          {"sparsity", s.sparsity},
          {"source_dtype", std::string(dtype_name(s.source_dtype))},
          {"row_nnz", stats_json(s.row_nnz)},
          {"col_nnz", stats_json(s.col_nnz)},
          {"empty_rows", s.row_nnz.empty},
          {"empty_cols", s.col_nnz.empty},
          {"block_density", s.block_density}};
}

std::string to_text(const MatrixSummary& s) {
  static constexpr std::string_view kRamp = " .:-=+*#%@";
  fmt::memory_buffer out;
  auto it = std::back_inserter(out);
  fmt::format_to(it, "matrix {} x {}, {} nonzeros, sparsity {:.2f}% (values from {})\n", s.rows, s.cols,
                 s.nnz, 100.0 * s.sparsity, dtype_name(s.source_dtype));
  const auto line = [&](const char* what, const NnzStats& st, const char* lines) {
    fmt::format_to(it, "nnz per {}: min {}  mean {:.2f}  max {}  stddev {:.2f}  empty {}s {}\n", what, st.min,
                   st.mean, st.max, st.stddev, lines, st.empty);
  };
  line("row", s.row_nnz, "row");
  line("col", s.col_nnz, "col");
  if (s.block_density.empty()) return fmt::to_string(out);
  double densest = 0.0;
  for (const auto& row : s.block_density)
    for (const double d : row) densest = std::max(densest, d);
  const std::size_t width = s.block_density[0].size();
  fmt::format_to(it, "nonzero density, {} x {} regions (' ' empty ... '@' = {:.4f}, the densest):\n",
                 s.block_density.size(), width, densest);
  fmt::format_to(it, "  +{}+\n", std::string(width, '-'));
  for (const auto& row : s.block_density) {
    std::string cells;
    for (const double d : row) {
      std::size_t level = 0;
      if (d > 0.0)
        level = 1 + std::min<std::size_t>(kRamp.size() - 2, static_cast<std::size_t>(d / densest * 9.0));
      cells += kRamp[level];
    }
    fmt::format_to(it, "  |{}|\n", cells);
  }
  fmt::format_to(it, "  +{}+\n", std::string(width, '-'));
  return fmt::to_string(out);
}

}  // namespace sparsecc
