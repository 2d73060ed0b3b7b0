#include "sparsecc/inspector/row_clusters.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include "sparsecc/common/error.hpp"

namespace sparsecc {

std::vector<std::int64_t> cluster_rows(const CsrMatrix& a, std::int64_t panel_rows) {
  if (panel_rows < 1) throw UsageError(fmt::format("cluster_rows: {} rows a panel", panel_rows));
  const std::int64_t m = a.rows;
  const auto words = static_cast<std::size_t>((a.cols + 63) / 64);
  std::vector<std::uint64_t> bits(static_cast<std::size_t>(m) * words, 0);
  const auto row_bits = [&](std::int64_t r) { return bits.data() + static_cast<std::size_t>(r) * words; };
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t i = a.row_ptr[r]; i < a.row_ptr[r + 1]; ++i)
      row_bits(r)[a.col_idx[i] / 64] |= std::uint64_t{1} << (a.col_idx[i] % 64);
  // Unplaced rows, heaviest first (stable: lower index first on ties).
  std::vector<std::int64_t> pool(static_cast<std::size_t>(m));
  for (std::int64_t r = 0; r < m; ++r) pool[static_cast<std::size_t>(r)] = r;
  std::stable_sort(pool.begin(), pool.end(),
                   [&](std::int64_t x, std::int64_t y) { return a.row_nnz(x) > a.row_nnz(y); });
  std::vector<std::int64_t> order;
  order.reserve(static_cast<std::size_t>(m));
  std::vector<std::uint64_t> panel(words);
  while (!pool.empty()) {
    const std::int64_t seed = pool.front();
    pool.erase(pool.begin());
    order.push_back(seed);
    std::copy_n(row_bits(seed), words, panel.begin());
    for (std::int64_t n = 1; n < panel_rows && !pool.empty(); ++n) {
      const std::size_t candidates = std::min(pool.size(), static_cast<std::size_t>(kRowClusterCandidates));
      std::size_t best = 0;
      std::int64_t best_new = -1, best_shared = -1;
      for (std::size_t c = 0; c < candidates; ++c) {
        const std::uint64_t* row = row_bits(pool[c]);
        std::int64_t fresh = 0, shared = 0;
        for (std::size_t w = 0; w < words; ++w) {
          fresh += std::popcount(row[w] & ~panel[w]);
          shared += std::popcount(row[w] & panel[w]);
        }
        // The pool is heaviest first, so the first of equals is the heavier (or lower) row.
        if (best_new < 0 || fresh < best_new || (fresh == best_new && shared > best_shared)) {
          best = c;
          best_new = fresh;
          best_shared = shared;
        }
      }
      const std::int64_t row = pool[best];
      pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(best));
      order.push_back(row);
      for (std::size_t w = 0; w < words; ++w) panel[w] |= row_bits(row)[w];
    }
  }
  return order;
}

std::int64_t panel_column_pairs(const CsrMatrix& a, const std::vector<std::int64_t>& order,
                                std::int64_t panel_rows) {
  if (panel_rows < 1) throw UsageError(fmt::format("panel_column_pairs: {} rows a panel", panel_rows));
  std::vector<std::int64_t> seen(static_cast<std::size_t>(a.cols), -1);  // the last panel of each column
  std::int64_t pairs = 0;
  for (std::int64_t pos = 0; pos < a.rows; ++pos) {
    const std::int64_t r = order.empty() ? pos : order[static_cast<std::size_t>(pos)];
    for (std::int64_t i = a.row_ptr[r]; i < a.row_ptr[r + 1]; ++i) {
      std::int64_t& last = seen[static_cast<std::size_t>(a.col_idx[i])];
      if (last != pos / panel_rows) {
        last = pos / panel_rows;
        ++pairs;
      }
    }
  }
  return pairs;
}

}  // namespace sparsecc
