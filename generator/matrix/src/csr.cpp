#include "sparsecc/matrix/csr.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/random.hpp"

namespace sparsecc {

void validate(const CsrMatrix& a) {
  if (a.rows < 0 || a.cols < 0) throw UsageError(fmt::format("CSR: negative shape {}x{}", a.rows, a.cols));
  if (a.cols > std::numeric_limits<std::int32_t>::max())
    throw UsageError(fmt::format("CSR: {} columns do not fit 32-bit column indices", a.cols));
  if (static_cast<std::int64_t>(a.row_ptr.size()) != a.rows + 1)
    throw UsageError(
        fmt::format("CSR: row_ptr has {} entries, expected rows + 1 = {}", a.row_ptr.size(), a.rows + 1));
  if (a.values.size() != a.col_idx.size())
    throw UsageError(fmt::format("CSR: {} values for {} column indices", a.values.size(), a.col_idx.size()));
  if (a.row_ptr[0] != 0) throw UsageError(fmt::format("CSR: row_ptr[0] is {}, expected 0", a.row_ptr[0]));
  for (std::int64_t r = 0; r < a.rows; ++r)
    if (a.row_ptr[r + 1] < a.row_ptr[r])
      throw UsageError(
          fmt::format("CSR: row_ptr decreases at row {} ({} -> {})", r, a.row_ptr[r], a.row_ptr[r + 1]));
  if (a.row_ptr[a.rows] != a.nnz())
    throw UsageError(
        fmt::format("CSR: row_ptr ends at {} but there are {} nonzeros", a.row_ptr[a.rows], a.nnz()));
  for (std::int64_t r = 0; r < a.rows; ++r) {
    for (std::int64_t k = a.row_ptr[r]; k < a.row_ptr[r + 1]; ++k) {
      const std::int32_t c = a.col_idx[k];
      if (c < 0 || c >= a.cols)
        throw UsageError(fmt::format("CSR: row {} has column index {} outside 0..{}", r, c, a.cols - 1));
      if (k > a.row_ptr[r] && a.col_idx[k - 1] >= c)
        throw UsageError(fmt::format("CSR: row {} column indices not strictly increasing ({} then {})", r,
                                     a.col_idx[k - 1], c));
    }
  }
}

CsrMatrix csr_from_dense(const DenseMatrix& d, DType source_dtype) {
  if (d.rows < 0 || d.cols < 0 || d.cols > std::numeric_limits<std::int32_t>::max() ||
      (d.cols > 0 && d.rows > std::numeric_limits<std::int64_t>::max() / d.cols) ||
      static_cast<std::int64_t>(d.data.size()) != d.rows * d.cols)
    throw UsageError(
        fmt::format("csr_from_dense: {}x{} matrix with {} elements", d.rows, d.cols, d.data.size()));
  CsrMatrix a;
  a.rows = d.rows;
  a.cols = d.cols;
  a.source_dtype = source_dtype;
  a.row_ptr.assign(static_cast<std::size_t>(d.rows + 1), 0);
  for (std::int64_t r = 0; r < d.rows; ++r) {
    for (std::int64_t c = 0; c < d.cols; ++c) {
      const double v = d(r, c);
      if (v == 0.0) continue;
      a.col_idx.push_back(static_cast<std::int32_t>(c));
      a.values.push_back(v);
    }
    a.row_ptr[r + 1] = a.nnz();
  }
  return a;
}

DenseMatrix dense_from_csr(const CsrMatrix& a) {
  validate(a);
  if (a.cols > 0 && a.rows > std::numeric_limits<std::int64_t>::max() / a.cols)
    throw UsageError(fmt::format("dense_from_csr: {}x{} is too large", a.rows, a.cols));
  DenseMatrix d(a.rows, a.cols);
  for (std::int64_t r = 0; r < a.rows; ++r)
    for (std::int64_t k = a.row_ptr[r]; k < a.row_ptr[r + 1]; ++k) d(r, a.col_idx[k]) = a.values[k];
  return d;
}

CsrMatrix permute_rows(const CsrMatrix& a, const std::vector<std::int64_t>& order,
                       std::vector<std::int64_t>* source_index) {
  validate(a);
  if (static_cast<std::int64_t>(order.size()) != a.rows)
    throw UsageError(fmt::format("permute_rows: {} rows ordered, the matrix has {}", order.size(), a.rows));
  std::vector<char> taken(order.size(), 0);
  CsrMatrix out;
  out.rows = a.rows;
  out.cols = a.cols;
  out.source_dtype = a.source_dtype;
  out.row_ptr.reserve(order.size() + 1);
  out.col_idx.reserve(a.col_idx.size());
  out.values.reserve(a.values.size());
  if (source_index) source_index->clear();
  for (const std::int64_t r : order) {
    if (r < 0 || r >= a.rows || taken[static_cast<std::size_t>(r)])
      throw UsageError(fmt::format("permute_rows: row {} is out of range or ordered twice", r));
    taken[static_cast<std::size_t>(r)] = 1;
    for (std::int64_t i = a.row_ptr[r]; i < a.row_ptr[r + 1]; ++i) {
      out.col_idx.push_back(a.col_idx[i]);
      out.values.push_back(a.values[i]);
      if (source_index) source_index->push_back(i);
    }
    out.row_ptr.push_back(static_cast<std::int64_t>(out.col_idx.size()));
  }
  return out;
}

CsrMatrix transpose(const CsrMatrix& a) {
  validate(a);
  if (a.rows > std::numeric_limits<std::int32_t>::max())
    throw UsageError(fmt::format("transpose: {} rows do not fit 32-bit column indices", a.rows));
  CsrMatrix t;
  t.rows = a.cols;
  t.cols = a.rows;
  t.source_dtype = a.source_dtype;
  t.row_ptr.assign(static_cast<std::size_t>(a.cols + 1), 0);
  for (const std::int32_t c : a.col_idx) ++t.row_ptr[c + 1];
  for (std::int64_t c = 0; c < a.cols; ++c) t.row_ptr[c + 1] += t.row_ptr[c];
  t.col_idx.resize(a.col_idx.size());
  t.values.resize(a.values.size());
  std::vector<std::int64_t> next(t.row_ptr.begin(), t.row_ptr.end() - 1);
  // Rows are visited in increasing order, so every row of the transpose comes out sorted.
  for (std::int64_t r = 0; r < a.rows; ++r) {
    for (std::int64_t k = a.row_ptr[r]; k < a.row_ptr[r + 1]; ++k) {
      const std::int64_t dst = next[a.col_idx[k]]++;
      t.col_idx[dst] = static_cast<std::int32_t>(r);
      t.values[dst] = a.values[k];
    }
  }
  return t;
}

// Values are SplitMix64::uniform_pm1 draws (state starts at `seed`): multiples of 2^-23 in [-1, 1),
// hence exact in float32; an exact zero is redrawn so the pattern keeps every entry.
void fill_values_uniform(CsrMatrix& a, std::uint64_t seed) {
  SplitMix64 rng(seed);
  a.values.resize(a.col_idx.size());
  for (double& v : a.values) {
    do {
      v = rng.uniform_pm1();
    } while (v == 0.0);
  }
}

}  // namespace sparsecc
