#include "sparsecc/inspector/row_clusters.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/math.hpp"

namespace sparsecc {

std::vector<std::int64_t> cluster_rows(const CsrMatrix& a, std::int64_t panel_rows) {
  if (panel_rows < 1) throw UsageError(fmt::format("cluster_rows: {} rows a panel", panel_rows));
  const std::int64_t m = a.rows;
  // The panel's columns as bits; a row's fresh and shared columns are counted from its own nonzeros.
  std::vector<std::uint64_t> panel(static_cast<std::size_t>(ceil_div(a.cols, 64)), 0);
  const auto in_panel = [&](std::int32_t k) {
    return (panel[static_cast<std::size_t>(k / 64)] >> (k % 64)) & 1u;
  };
  const auto add_to_panel = [&](std::int64_t r) {
    for (std::int64_t i = a.row_ptr[r]; i < a.row_ptr[r + 1]; ++i)
      panel[static_cast<std::size_t>(a.col_idx[i] / 64)] |= std::uint64_t{1} << (a.col_idx[i] % 64);
  };
  const auto clear_panel = [&](std::int64_t r) {
    for (std::int64_t i = a.row_ptr[r]; i < a.row_ptr[r + 1]; ++i)
      panel[static_cast<std::size_t>(a.col_idx[i] / 64)] = 0;
  };
  // Unplaced rows with nonzeros, heaviest first (stable: lower index first on ties). Placed rows stay
  // in the pool as holes until enough of them are compacted away at once.
  std::vector<std::int64_t> pool;
  for (std::int64_t r = 0; r < m; ++r)
    if (a.row_nnz(r) > 0) pool.push_back(r);
  std::stable_sort(pool.begin(), pool.end(),
                   [&](std::int64_t x, std::int64_t y) { return a.row_nnz(x) > a.row_nnz(y); });
  std::vector<char> placed(static_cast<std::size_t>(m), 0);
  std::vector<std::int64_t> clustered;  // the rows with nonzeros, panel after panel
  clustered.reserve(pool.size());
  std::size_t left = pool.size(), holes = 0;
  const auto place = [&](std::int64_t r) {
    placed[static_cast<std::size_t>(r)] = 1;
    clustered.push_back(r);
    add_to_panel(r);
    --left;
    ++holes;
  };
  while (left > 0) {
    if (holes >= static_cast<std::size_t>(kRowClusterCandidates)) {
      std::erase_if(pool, [&](std::int64_t r) { return placed[static_cast<std::size_t>(r)] != 0; });
      holes = 0;
    }
    const std::size_t panel_start = clustered.size();
    std::size_t head = 0;
    while (placed[static_cast<std::size_t>(pool[head])]) ++head;
    place(pool[head]);
    for (std::int64_t n = 1; n < panel_rows && left > 0; ++n) {
      std::int64_t best = -1, best_new = -1, best_shared = -1;
      std::int64_t seen = 0;
      for (std::size_t c = head; c < pool.size() && seen < kRowClusterCandidates; ++c) {
        const std::int64_t r = pool[c];
        if (placed[static_cast<std::size_t>(r)]) continue;
        ++seen;
        std::int64_t shared = 0;
        for (std::int64_t i = a.row_ptr[r]; i < a.row_ptr[r + 1]; ++i) shared += in_panel(a.col_idx[i]);
        const std::int64_t fresh = a.row_nnz(r) - shared;
        // The pool is heaviest first, so the first of equals is the heavier (or lower) row.
        if (best_new < 0 || fresh < best_new || (fresh == best_new && shared > best_shared)) {
          best = r;
          best_new = fresh;
          best_shared = shared;
        }
      }
      place(best);
    }
    for (std::size_t i = panel_start; i < clustered.size(); ++i) clear_panel(clustered[i]);
  }
  // The panels of rows with nonzeros take, in order, the panel slots that hold rows with nonzeros in
  // A's own order; every other slot keeps its empty rows in place (they take no code of their own,
  // spmm_plain_empty_block), and the empty rows displaced fill the positions left, in ascending order.
  const std::int64_t slots = ceil_div(m, panel_rows);
  std::vector<char> busy(static_cast<std::size_t>(slots), 0);
  for (const std::int64_t r : clustered) busy[static_cast<std::size_t>(r / panel_rows)] = 1;
  std::vector<std::int64_t> order(static_cast<std::size_t>(m), -1);
  std::size_t next = 0;  // the next clustered row to place
  for (std::int64_t s = 0; s < slots; ++s) {
    const std::int64_t begin = s * panel_rows, end = std::min(m, begin + panel_rows);
    if (!busy[static_cast<std::size_t>(s)]) {
      for (std::int64_t p = begin; p < end; ++p) order[static_cast<std::size_t>(p)] = p;
      continue;
    }
    for (std::int64_t p = begin; p < end && next < clustered.size(); ++p)
      order[static_cast<std::size_t>(p)] = clustered[next++];
  }
  std::vector<char> used(static_cast<std::size_t>(m), 0);
  for (const std::int64_t r : order)
    if (r >= 0) used[static_cast<std::size_t>(r)] = 1;
  std::int64_t displaced = 0;
  for (std::int64_t p = 0; p < m; ++p) {
    if (order[static_cast<std::size_t>(p)] >= 0) continue;
    while (used[static_cast<std::size_t>(displaced)]) ++displaced;
    order[static_cast<std::size_t>(p)] = displaced;
    used[static_cast<std::size_t>(displaced)] = 1;
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
