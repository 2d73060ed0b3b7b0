// Condensed tensor-core windows for half-precision SpMM at large N (compute-bound): A's rows, in an
// order chosen offline, are cut into windows of `window_rows` consecutive positions; each window keeps
// the sorted union of its rows' nonzero columns, is packed dense over that union (padded up to the
// mma's k granule) and multiplied on tensor cores. The kernel gathers the union's rows of B (or, in
// the transposed product Cᵀ = Bᵀ·Aᵀ, puts the window's rows on the mma's 8-wide operand).
//
// The plan's measure is the tensor-core work it keeps: window_rows x padded width for every window on
// tensor cores (MACs per column of B; a short last window still costs a full one), against the dense
// product's M x K. A window whose union is wider than fallback_fraction x K goes to the CUDA-core path
// instead (its nonzeros are counted apart).
//
// Orders:
// - none: A's own order.
// - greedy: similarity clustering. Rows with no nonzeros go last. A window starts from the heaviest
//   unplaced row (lower index on ties), its seed. Its candidates are the unplaced rows met in the
//   column -> rows index over the seed's columns, rarest column first, at most `scan_rows` entries in
//   all; the `candidates` rows met most often are kept (then: the heavier; then: the lower index).
//   Each further row is the candidate that adds the fewest columns to the window's union (then: the
//   heavier; then: the lower index); when the candidates run out, the heaviest unplaced rows fill the
//   window. The work is O(nnz x candidates). When the greedy order keeps more work than A's own order,
//   A's own order is taken (the plan says which: `reordered`). Deterministic.
//
// Design: docs/design/condensed-windows.md. Measurements: docs/performance/2026-11-28-condensed-windows.md
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "sparsecc/matrix/csr.hpp"

namespace sparsecc {

enum class WindowReorder { none, greedy };
std::string_view window_reorder_name(WindowReorder r);      // "none", "greedy"
WindowReorder parse_window_reorder(std::string_view name);  // UsageError for another word

struct WindowOptions {
  std::int64_t window_rows = 8;  // rows a window (1..256): 8 on the mma's 8-wide operand; 16, 32, 64
  WindowReorder reorder = WindowReorder::greedy;
  std::int64_t k_granule = 16;     // a window's width is its union rounded up to this (m16n8k16: 16)
  double fallback_fraction = 1.0;  // union wider than this x K: CUDA-core window (1: never), in (0, 1]
  std::int64_t candidates = 32;    // greedy: candidate rows a window compares (>= 1)
  std::int64_t scan_rows = 4096;   // greedy: column-index entries a window's candidate search reads (>= 1)
};

// UsageError naming the option when one is out of range.
void check_window_options(const WindowOptions& options);

struct CondensedWindow {
  std::int64_t first = 0;   // first position in the order
  std::int64_t height = 0;  // rows (positions first .. first + height - 1), 1..window_rows
  std::int64_t width = 0;   // the union rounded up to the k granule (0 for a window without nonzeros)
  std::int64_t nnz = 0;     // nonzeros of its rows
  bool cuda_core = false;   // the fallback path: its union is wider than fallback_fraction x K
};

struct CondensedWindows {
  std::int64_t rows = 0, cols = 0;  // A is rows x cols
  WindowOptions options;
  bool reordered = false;  // the order is the greedy one (false: A's own order)
  // Position p of the order holds row order[p] (a permutation of 0..rows).
  std::vector<std::int64_t> order;
  std::vector<CondensedWindow> windows;
  // Window w's union, sorted ascending and unpadded: columns[column_ptr[w] .. column_ptr[w + 1]).
  std::vector<std::int64_t> column_ptr{0};
  std::vector<std::int32_t> columns;

  // Totals. Work counts MACs per column of B.
  std::int64_t nnz = 0;
  std::int64_t tensor_nnz = 0;     // nonzeros in tensor-core windows
  std::int64_t cuda_core_nnz = 0;  // nonzeros in CUDA-core windows
  std::int64_t cuda_core_windows = 0;
  std::int64_t union_columns = 0;  // sum of the unpadded unions of tensor-core windows
  std::int64_t kept_work = 0;      // sum over tensor-core windows of window_rows x width
  std::int64_t dense_work = 0;     // rows x cols

  double kept_share() const;       // kept_work / dense_work (0 for an empty matrix)
  double useful_fraction() const;  // tensor_nnz / kept_work (0 when nothing is kept)
};

// The plan for A under `options` (UsageError for bad options).
CondensedWindows plan_condensed_windows(const CsrMatrix& a, const WindowOptions& options);

// The greedy order alone (options.window_rows, candidates, scan_rows), a permutation of 0..a.rows.
std::vector<std::int64_t> greedy_window_order(const CsrMatrix& a, const WindowOptions& options);

// The windows of A in a given order (empty: A's own order), ignoring options.reorder; `reordered`
// is set when the order is not the identity. UsageError when the order is not a permutation.
CondensedWindows condense_windows(const CsrMatrix& a, const std::vector<std::int64_t>& order,
                                  const WindowOptions& options);

// Throws UsageError describing the first broken invariant: the order is a permutation, the windows
// cover the positions once in order with heights 1..window_rows (only the last one short), every
// union is sorted, inside 0..cols, holds exactly the columns of its rows, widths are the padded
// unions, the fallback marks follow the rule, and the totals add up.
void check_condensed_windows(const CsrMatrix& a, const CondensedWindows& w);

// A summary (options, totals, shares, window-width histogram), not the order or the column lists.
nlohmann::json to_json(const CondensedWindows& w);

}  // namespace sparsecc
