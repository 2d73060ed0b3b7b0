#include "sparsecc/inspector/hines_planner.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "sparsecc/common/error.hpp"

namespace sparsecc {

namespace {

using Index = std::int32_t;

// Instructions of the unrolled executor per row of a level and per base row, per right-hand side
// and fixed: loads, the elimination and the stores (a coarse count, for the code-size budget).
constexpr std::int64_t kChainRowFixed = 8, kChainRowPerRhs = 6, kJunctionFixed = 6, kJunctionPerRhs = 4;
constexpr std::int64_t kBaseRowFixed = 6, kBaseRowPerRhs = 5;

}  // namespace

std::int32_t hines_base_threshold(std::int32_t rhs) {
  if (rhs < 1) throw UsageError(fmt::format("hines_base_threshold: {} right-hand sides", rhs));
  return rhs == 1 ? 3500 : 5245 / rhs + 40;
}

std::vector<Index> select_junctions(const std::vector<Index>& parent, HinesDecomposition decomposition, Index k) {
  const auto n = static_cast<Index>(parent.size());
  std::vector<Index> children(parent.size(), 0);
  for (const Index p : parent)
    if (p >= 0) ++children[static_cast<std::size_t>(p)];
  std::vector<char> branch_point(parent.size(), 0), junction(parent.size(), 0);
  for (Index i = 0; i < n; ++i) branch_point[static_cast<std::size_t>(i)] = junction[static_cast<std::size_t>(i)] = children[static_cast<std::size_t>(i)] > 1;
  if (decomposition == HinesDecomposition::fine) {
    // Every branch from its leaf end (a leaf, or a row whose only child is a branch point) up to the
    // next branch point or the root: each K-th row is a junction, leaving chains of K - 1 rows.
    for (Index i = 0; i < n; ++i) {
      const auto si = static_cast<std::size_t>(i);
      if (branch_point[si]) continue;
      const bool start = children[si] == 0 || (i > 0 && branch_point[si - 1] && parent[si - 1] == i);
      if (!start) continue;
      Index count = 0;
      for (Index v = i; v >= 0 && !branch_point[static_cast<std::size_t>(v)]; v = parent[static_cast<std::size_t>(v)])
        if (++count % k == 0) junction[static_cast<std::size_t>(v)] = 1;
    }
  }
  std::vector<Index> out;
  for (Index i = 0; i < n; ++i)
    if (junction[static_cast<std::size_t>(i)]) out.push_back(i);
  return out;
}

HinesPlan plan_hines(const HinesSystem& system, std::int32_t rhs, const std::string& dtype,
                     const HinesOptions& options) {
  if (rhs < 1) throw UsageError(fmt::format("plan_hines: {} right-hand sides (at least 1)", rhs));
  if (dtype != "f64" && dtype != "f32") throw UsageError(fmt::format("plan_hines: dtype '{}' is not f64 or f32", dtype));
  if (options.decomposition == HinesDecomposition::fine && (options.k < 2 || options.k > 1024))
    throw UsageError(fmt::format("plan_hines: K = {} is outside 2..1024", options.k));
  if (options.depth < -1 || options.depth > kHinesMaxDepth)
    throw UsageError(fmt::format("plan_hines: depth {} is outside 0..{} (-1: automatic)", options.depth, kHinesMaxDepth));
  if (options.base_rows < 0) throw UsageError("plan_hines: the base threshold must not be negative");
  if (system.size() < 1) throw UsageError("plan_hines: the system has no rows");
  if (system.cell_offsets.size() < 2 || system.cell_offsets.front() != 0 || system.cell_offsets.back() != system.size())
    throw UsageError("plan_hines: cell_offsets do not cover the system");
  for (Index i = 0; i < system.size(); ++i) {
    const Index p = system.parent[static_cast<std::size_t>(i)];
    if (p != -1 && (p <= i || p >= system.size()))
      throw UsageError(fmt::format("plan_hines: parent {} of row {} is not after it (not post-order)", p, i));
  }

  HinesPlan plan;
  plan.problem = {system.size(), system.num_cells(), rhs, dtype};
  plan.decomposition = options.decomposition;
  plan.kernel_name = options.kernel_name;
  plan.threads_per_block = options.threads_per_block;
  plan.parent = system.parent;
  plan.cell_offsets = system.cell_offsets;
  const Index k = options.decomposition == HinesDecomposition::fine ? options.k : 0;
  const Index threshold = options.base_rows ? options.base_rows : hines_base_threshold(rhs);
  std::vector<Index> parent = system.parent;
  std::int64_t instructions = 0;
  while (!parent.empty()) {
    const auto n = static_cast<Index>(parent.size());
    if (options.depth >= 0 ? plan.depth() >= options.depth : n <= threshold) break;
    HinesLevel level = build_hines_level(parent, select_junctions(parent, options.decomposition, k), k);
    // The automatic rule stops when a level no longer shrinks the matrix (a minimal decomposition of
    // a tree without unbranched runs).
    if (options.depth < 0 && level.domain_size() >= n) break;
    const auto chain_rows = static_cast<std::int64_t>(n - level.domain_size());
    instructions += chain_rows * (kChainRowFixed + kChainRowPerRhs * rhs) +
                    static_cast<std::int64_t>(level.gather.size() + level.junctions.size()) *
                        (kJunctionFixed + kJunctionPerRhs * rhs);
    parent = level.domain_parent;
    plan.levels.push_back(std::move(level));
  }
  plan.base_parent = parent;
  instructions += static_cast<std::int64_t>(parent.size()) * (kBaseRowFixed + kBaseRowPerRhs * rhs);
  plan.estimated_instructions = instructions;
  plan.tables = instructions > options.unrolled_instruction_budget;
  return plan;
}

}  // namespace sparsecc
