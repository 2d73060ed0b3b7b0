#include "sparsecc/inspector/hines_planner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/math.hpp"

namespace sparsecc {

namespace {

using Index = std::int32_t;

// Instructions of the unrolled executor per row of a level and per base row, per right-hand side
// and fixed: loads, the elimination and the stores (a coarse count, for the code-size budget).
constexpr std::int64_t kChainRowFixed = 8, kChainRowPerRhs = 6, kJunctionFixed = 6, kJunctionPerRhs = 4;
constexpr std::int64_t kBaseRowFixed = 6, kBaseRowPerRhs = 5;

// Estimated instructions of the unrolled bases: one function per distinct base structure (the parents
// relative to the cell's first base row) of the cells the block kernel runs; -1 when there are more
// than kHinesMaxBaseFunctions of them.
std::int64_t unrolled_base_instructions(const HinesPlan& plan) {
  const auto rows = hines_cell_offsets_by_level(plan);
  const std::vector<Index>& first = rows[static_cast<std::size_t>(plan.grid_levels)];
  const std::vector<Index>& base = rows.back();
  std::set<std::vector<Index>> shapes;
  std::int64_t instructions = 0;
  for (std::size_t c = 0; c + 1 < base.size(); ++c) {
    if (first[c + 1] == first[c]) continue;
    std::vector<Index> shape;
    for (Index i = base[c]; i < base[c + 1]; ++i) {
      const Index p = plan.base_parent[static_cast<std::size_t>(i)];
      shape.push_back(p < 0 ? p : p - base[c]);
    }
    const auto n = static_cast<std::int64_t>(shape.size());
    if (shapes.insert(std::move(shape)).second) {
      if (shapes.size() > static_cast<std::size_t>(kHinesMaxBaseFunctions)) return -1;
      instructions += n * (kBaseRowFixed + kBaseRowPerRhs * plan.problem.rhs);
    }
  }
  return instructions;
}

}  // namespace

std::int32_t hines_k_rule(std::int32_t rhs) {
  if (rhs < 1) throw UsageError(fmt::format("hines_k_rule: {} right-hand sides", rhs));
  return rhs == 1 ? 6 : 3;
}

std::int32_t hines_base_threshold(std::int32_t rhs) {
  if (rhs < 1) throw UsageError(fmt::format("hines_base_threshold: {} right-hand sides", rhs));
  return std::max(8, 64 / rhs);
}

std::int32_t hines_published_base_threshold(std::int32_t rhs) {
  if (rhs < 1) throw UsageError(fmt::format("hines_published_base_threshold: {} right-hand sides", rhs));
  return rhs == 1 ? 3500 : 5245 / rhs + 40;
}

std::int64_t hines_shared_workspace_rule(std::int32_t block_threads, std::int64_t base_shared_bytes,
                                         const GpuTarget& target) {
  if (block_threads < 32 || block_threads > 1024)
    throw UsageError(fmt::format("hines_shared_workspace_rule: {} threads", block_threads));
  constexpr std::int64_t kRegistersPerThread = 64;  // what the block kernel is budgeted to take
  const std::int64_t blocks = std::clamp<std::int64_t>(
      std::min<std::int64_t>(target.max_threads_per_sm / block_threads,
                             target.registers_per_sm / (block_threads * kRegistersPerThread)),
      1, std::max(target.max_blocks_per_sm, 1));
  const std::int64_t limit = target.shared_per_block_optin / blocks -
                             std::max<std::int64_t>(0, base_shared_bytes) - target.shared_reserved_per_block;
  return std::clamp<std::int64_t>(limit, 0, kHinesSharedWorkspaceMax);
}

std::vector<Index> select_junctions(const std::vector<Index>& parent, HinesDecomposition decomposition,
                                    Index k) {
  const auto n = static_cast<Index>(parent.size());
  std::vector<Index> children(parent.size(), 0);
  for (const Index p : parent)
    if (p >= 0) ++children[static_cast<std::size_t>(p)];
  std::vector<char> branch_point(parent.size(), 0), junction(parent.size(), 0);
  for (Index i = 0; i < n; ++i)
    branch_point[static_cast<std::size_t>(i)] = junction[static_cast<std::size_t>(i)] =
        children[static_cast<std::size_t>(i)] > 1;
  if (decomposition == HinesDecomposition::fine) {
    // Every branch from its leaf end (a leaf, or a row whose only child is a branch point) up to the
    // next branch point or the root: each K-th row is a junction, leaving chains of K - 1 rows.
    for (Index i = 0; i < n; ++i) {
      const auto si = static_cast<std::size_t>(i);
      if (branch_point[si]) continue;
      const bool start = children[si] == 0 || (i > 0 && branch_point[si - 1] && parent[si - 1] == i);
      if (!start) continue;
      Index count = 0;
      for (Index v = i; v >= 0 && !branch_point[static_cast<std::size_t>(v)];
           v = parent[static_cast<std::size_t>(v)])
        if (++count % k == 0) junction[static_cast<std::size_t>(v)] = 1;
    }
  }
  std::vector<Index> out;
  for (Index i = 0; i < n; ++i)
    if (junction[static_cast<std::size_t>(i)]) out.push_back(i);
  return out;
}

// Below this many cells the block kernel occupies under half of an H100's SMs.
constexpr Index kFewCells = 64;

HinesPlan plan_hines(const HinesSystem& system, std::int32_t rhs, const std::string& dtype,
                     const HinesOptions& options, const GpuTarget& target) {
  if (rhs < 1) throw UsageError(fmt::format("plan_hines: {} right-hand sides (at least 1)", rhs));
  if (dtype != "f64" && dtype != "f32")
    throw UsageError(fmt::format("plan_hines: dtype '{}' is not f64 or f32", dtype));
  if (options.decomposition == HinesDecomposition::fine && options.k != 0 &&
      (options.k < 2 || options.k > 1024))
    throw UsageError(fmt::format("plan_hines: K = {} is outside 2..1024 (0: the rule)", options.k));
  if (options.decomposition == HinesDecomposition::fine && options.k_large != 0 &&
      (options.k_large < 2 || options.k_large > 1024))
    throw UsageError(
        fmt::format("plan_hines: K of large levels = {} is outside 2..1024 (0: K)", options.k_large));
  if (options.depth < -1 || options.depth > kHinesMaxDepth)
    throw UsageError(
        fmt::format("plan_hines: depth {} is outside 0..{} (-1: automatic)", options.depth, kHinesMaxDepth));
  if (options.base_rows < 0) throw UsageError("plan_hines: the base threshold must not be negative");
  if (options.block_rows < 1) throw UsageError("plan_hines: block_rows must be positive");
  if (options.block_threads != 0 &&
      (options.block_threads < 32 || options.block_threads > 1024 || options.block_threads % 32))
    throw UsageError(fmt::format("plan_hines: block_threads {} is not a multiple of 32 in 32..1024",
                                 options.block_threads));
  if (options.threads_per_block < 32 || options.threads_per_block > 1024 || options.threads_per_block % 32)
    throw UsageError(fmt::format("plan_hines: threads_per_block {} is not a multiple of 32 in 32..1024",
                                 options.threads_per_block));
  if (options.code != "auto" && options.code != "tables" && options.code != "unrolled")
    throw UsageError(fmt::format("plan_hines: code mode '{}' is not auto, tables or unrolled", options.code));
  if (options.code_budget < 0) throw UsageError("plan_hines: the code budget must not be negative");
  if (options.shared_workspace < -1 || options.shared_workspace > kHinesSharedWorkspaceMax)
    throw UsageError(fmt::format("plan_hines: shared workspace {} bytes is outside 0..{} (-1: the rule)",
                                 options.shared_workspace, kHinesSharedWorkspaceMax));
  if (system.size() < 1) throw UsageError("plan_hines: the system has no rows");
  if (system.cell_offsets.size() < 2 || system.cell_offsets.front() != 0 ||
      system.cell_offsets.back() != system.size())
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
  const Index k = options.decomposition != HinesDecomposition::fine ? 0
                  : options.k                                       ? options.k
                                                                    : hines_k_rule(rhs);
  const Index threshold = options.base_rows ? options.base_rows : hines_base_threshold(rhs);
  std::vector<Index> parent = system.parent;
  std::vector<Index> cells = system.cell_offsets;  // per-cell row offsets of the current level
  const auto largest_cell = [](const std::vector<Index>& offsets) {
    Index m = 0;
    for (std::size_t c = 0; c + 1 < offsets.size(); ++c) m = std::max(m, offsets[c + 1] - offsets[c]);
    return m;
  };
  std::vector<Index> largest{largest_cell(cells)};  // per level, then the base
  // A few large cells: the block kernel runs a handful of blocks, so its levels are latency-bound and
  // fewer of them (long chains) win over the short chains that suit forests of many cells.
  const bool few_large_cells = largest.front() > options.block_rows && system.num_cells() < kFewCells;
  std::int64_t instructions = 0;
  while (!parent.empty()) {
    const auto n = static_cast<Index>(parent.size());
    if (options.depth >= 0 ? plan.depth() >= options.depth : largest.back() <= threshold) break;
    const Index kl = k && options.k_large && (largest.back() > options.block_rows || few_large_cells)
                         ? options.k_large
                         : k;
    HinesLevel level = build_hines_level(parent, select_junctions(parent, options.decomposition, kl), kl);
    // The automatic rule stops when a level no longer shrinks the matrix (a minimal decomposition of
    // a tree without unbranched runs).
    if (options.depth < 0 && level.domain_size() >= n) break;
    const auto chain_rows = static_cast<std::int64_t>(n - level.domain_size());
    instructions += chain_rows * (kChainRowFixed + kChainRowPerRhs * rhs) +
                    static_cast<std::int64_t>(level.gather.size() + level.junctions.size()) *
                        (kJunctionFixed + kJunctionPerRhs * rhs);
    std::vector<Index> next(cells.size(), 0);
    std::size_t c = 0;
    for (std::size_t j = 0; j < level.junctions.size(); ++j)
      while (level.junctions[j] >= cells[c + 1]) next[++c] = static_cast<Index>(j);
    while (c + 1 < cells.size()) next[++c] = level.domain_size();
    cells = std::move(next);
    largest.push_back(largest_cell(cells));
    parent = level.domain_parent;
    plan.levels.push_back(std::move(level));
  }
  plan.base_parent = parent;
  if (options.grid_levels > plan.depth())
    throw UsageError(
        fmt::format("plan_hines: grid_levels {} exceeds the depth {}", options.grid_levels, plan.depth()));
  if (options.grid_levels >= 0) {
    plan.grid_levels = options.grid_levels;
  } else {
    plan.grid_levels = 0;
    while (plan.grid_levels < plan.depth() &&
           largest[static_cast<std::size_t>(plan.grid_levels)] > options.block_rows)
      ++plan.grid_levels;
  }
  if (options.block_threads) {
    plan.block_threads = options.block_threads;
  } else {
    // Enough threads for the first block level's largest cell: its chains (stage 1) or junctions.
    Index work = 1;
    if (plan.grid_levels < plan.depth()) {
      const HinesLevel& L = plan.levels[static_cast<std::size_t>(plan.grid_levels)];
      const auto g = static_cast<std::size_t>(plan.grid_levels);
      const Index cell_rows = largest[g];
      // Chains and junctions per row of the level as a whole, scaled to the largest cell.
      const double per_row =
          static_cast<double>(std::max(L.chains.size(), L.junctions.size())) / std::max(1, L.size);
      work = static_cast<Index>(per_row * cell_rows) + 1;
    }
    // More than 512 threads leave 64 registers a thread, which the R accumulators of stage 2 exceed.
    plan.block_threads = std::clamp(static_cast<Index>(round_up(work, 32)), 32, rhs > 1 ? 512 : 1024);
    if (system.num_cells() > 256) plan.block_threads = std::min(plan.block_threads, 512);
  }
  instructions += static_cast<std::int64_t>(parent.size()) * (kBaseRowFixed + kBaseRowPerRhs * rhs);
  plan.estimated_instructions = instructions;
  // The block kernel stages the bases in shared memory where the largest fits.
  const std::int64_t base_bytes =
      hines_base_shared_bytes(hines_block_base_max(plan), rhs, dtype == "f32" ? 4 : 8);
  const bool fits = base_bytes <= kHinesBaseSharedLimit;
  plan.shared_workspace_limit =
      options.shared_workspace >= 0
          ? options.shared_workspace
          : hines_shared_workspace_rule(plan.block_threads, fits ? base_bytes : 0, target);
  if (options.code != "tables") {
    const std::int64_t unrolled = fits ? unrolled_base_instructions(plan) : -1;
    if (options.code == "unrolled" && !fits)
      throw UsageError(
          fmt::format("plan_hines: unrolled code needs the bases in shared memory, but the largest ({} rows) "
                      "exceeds {} bytes",
                      hines_block_base_max(plan), kHinesBaseSharedLimit));
    if (options.code == "unrolled" && unrolled < 0)
      throw UsageError(fmt::format("plan_hines: unrolled code allows at most {} distinct base structures",
                                   kHinesMaxBaseFunctions));
    if (unrolled > 0 && (options.code == "unrolled" || unrolled <= options.code_budget)) {
      plan.code = HinesCode::unrolled;
      plan.unrolled_instructions = unrolled;
    }
  }
  return plan;
}

}  // namespace sparsecc
