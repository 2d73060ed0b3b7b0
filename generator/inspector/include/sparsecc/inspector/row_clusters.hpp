// Row clustering for SpMM plans: an order of A's rows in which every panel of consecutive rows shares
// as many columns as a greedy search finds, so that a block row of an unrolled executor loads fewer
// distinct rows of B (one load a distinct k a group).
//
// Greedy, heaviest row first: the panel's first row is the unplaced row with the most nonzeros
// (lowest index on ties); each further row is the unplaced row that adds the fewest columns not yet
// in the panel (then: shares the most with it; then: the heavier; then: the lower index), among the
// first kRowClusterCandidates unplaced rows in that heaviest-first order. Starting from the heaviest
// rows keeps the panels' nonzeros close to each other. Deterministic.
//
// It cuts the distinct (panel, k) pairs of pruned layers by some 10-15 % in geometric mean.
// Evidence: docs/design/evidence.md#row-clusters
#pragma once

#include <cstdint>
#include <vector>

#include "sparsecc/matrix/csr.hpp"

namespace sparsecc {

// Rows a step of the search compares (bounds the time on tall matrices: O(M x this x K / 64)).
inline constexpr std::int64_t kRowClusterCandidates = 2048;

// The order (a permutation of 0..a.rows): position p holds row order[p]; panels are positions
// [i * panel_rows, (i + 1) * panel_rows). Throws UsageError when panel_rows < 1.
std::vector<std::int64_t> cluster_rows(const CsrMatrix& a, std::int64_t panel_rows);

// The distinct (panel, column) pairs of A's rows in `order` (empty: A's own order) cut into panels of
// panel_rows rows: the rows of B that the block rows of an unrolled plan load, which cluster_rows
// reduces. Throws UsageError when panel_rows < 1.
std::int64_t panel_column_pairs(const CsrMatrix& a, const std::vector<std::int64_t>& order,
                                std::int64_t panel_rows);

}  // namespace sparsecc
