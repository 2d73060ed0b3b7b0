#include "sparsecc/plan/hines_schedule.hpp"

#include <fmt/format.h>

#include <limits>
#include <map>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/math.hpp"

namespace sparsecc {

namespace {

using Index = std::int32_t;
enum { RV, PV, QV, PIV, W, MD, MU, ML, MB, MX };

constexpr std::int64_t kAlign = 64;       // elements: 256-byte aligned arrays in both precisions
constexpr std::int64_t kSharedAlign = 4;  // elements: 16-byte aligned arrays in shared memory

std::int64_t align(std::int64_t x, std::int64_t to = kAlign) { return round_up(x, to); }

// A level's arrays for `n` rows and `nj` junctions at `at` onwards (kSharedAlign or kAlign apart);
// piv and w take no room when `factor` is false (no chain needs them).
std::array<std::int64_t, kHinesLevelArrays> level_arrays(std::int64_t& at, std::int64_t n, std::int64_t nj,
                                                         std::int64_t r, bool factor, std::int64_t to) {
  const auto take = [&](std::int64_t elements) {
    const std::int64_t o = at;
    at += align(elements, to);
    return o;
  };
  std::array<std::int64_t, kHinesLevelArrays> o{};
  o[RV] = take(n * r);
  o[PV] = take(n);
  o[QV] = take(n);
  o[PIV] = take(factor ? n : 0);
  o[W] = take(factor ? n : 0);
  o[MD] = take(nj);
  o[MU] = take(nj);
  o[ML] = take(nj);
  o[MB] = take(nj * r);
  o[MX] = take(nj * r);
  return o;
}

// Appends `v` to the table section and returns its offset in ints.
std::int64_t append(std::vector<Index>& tables, const std::vector<Index>& v) {
  const auto at = static_cast<std::int64_t>(tables.size());
  tables.insert(tables.end(), v.begin(), v.end());
  return at;
}

// One level's part for the rows [r0, r1) of one cell whose domain rows start at j0 and chains are
// [c0, c1): counts, then chains, junctions, direct flags, gather offsets and gathers, all relative.
void append_level_part(std::vector<Index>& out, const HinesLevel& L, Index r0, Index j0, Index j1, Index c0,
                       Index c1) {
  const Index g0 = L.gather_offsets[static_cast<std::size_t>(j0)],
              g1 = L.gather_offsets[static_cast<std::size_t>(j1)];
  out.insert(out.end(), {c1 - c0, j1 - j0, g1 - g0});
  const auto rel = [](Index v, Index base) { return v < 0 ? v : v - base; };
  for (Index c = c0; c < c1; ++c) {
    const HinesChain& ch = L.chains[static_cast<std::size_t>(c)];
    out.insert(out.end(),
               {ch.begin - r0, ch.end - r0, rel(ch.parent_junction, j0), rel(ch.child_junction, j0)});
  }
  for (Index k = j0; k < j1; ++k) out.push_back(L.junctions[static_cast<std::size_t>(k)] - r0);
  for (Index k = j0; k < j1; ++k) out.push_back(L.direct[static_cast<std::size_t>(k)]);
  for (Index k = j0; k <= j1; ++k) out.push_back(L.gather_offsets[static_cast<std::size_t>(k)] - g0);
  for (Index g = g0; g < g1; ++g) out.push_back(L.gather[static_cast<std::size_t>(g)] - c0);
}

// Per cell, the first chain of level L (chains ascend by row and cells are contiguous).
std::vector<Index> chain_offsets(const HinesLevel& L, const std::vector<Index>& rows) {
  std::vector<Index> out(rows.size(), static_cast<Index>(L.chains.size()));
  std::size_t c = 0;
  out[0] = 0;
  for (std::size_t i = 0; i < L.chains.size(); ++i)
    while (c + 1 < rows.size() && L.chains[i].begin >= rows[c + 1]) out[++c] = static_cast<Index>(i);
  return out;
}

}  // namespace

HinesSchedule schedule_hines(const HinesPlan& plan) {
  if (const auto errors = check_hines_plan(plan); !errors.empty())
    throw UsageError("schedule_hines: invalid plan: " + errors.front());
  HinesSchedule s;
  s.real_bytes = plan.problem.dtype == "f32" ? 4 : 8;
  s.rhs = plan.problem.rhs;
  const std::int64_t r = s.rhs;
  const Index depth = plan.depth(), G = plan.grid_levels;
  s.first_block_level = G;
  s.block_levels = depth - G;
  s.block_threads = plan.block_threads;

  for (const HinesLevel& L : plan.levels)
    for (const HinesChain& c : L.chains) s.chain_max = std::max(s.chain_max, c.end - c.begin + 1);
  const auto rows = hines_cell_offsets_by_level(plan);

  // Shared memory: one cell's part of levels shared_from .. depth - 1, sized for the largest part of
  // the cells the block kernel runs; the deepest levels that fit the plan's limit together.
  const bool factor = s.chain_max > kHinesRegisterChain;
  std::vector<std::int64_t> cell_rows(static_cast<std::size_t>(depth) + 1, 0);
  {
    const auto& first = rows[static_cast<std::size_t>(G)];
    for (std::size_t c = 0; c + 1 < first.size(); ++c) {
      if (first[c + 1] == first[c]) continue;
      for (Index l = G; l <= depth; ++l) {
        const auto& rl = rows[static_cast<std::size_t>(l)];
        cell_rows[static_cast<std::size_t>(l)] =
            std::max<std::int64_t>(cell_rows[static_cast<std::size_t>(l)], rl[c + 1] - rl[c]);
      }
    }
  }
  const auto shared_size = [&](Index from) {
    std::int64_t at = 0;
    for (Index l = from; l < depth; ++l)
      level_arrays(at, cell_rows[static_cast<std::size_t>(l)], cell_rows[static_cast<std::size_t>(l) + 1], r,
                   factor, kSharedAlign);
    return at;
  };
  s.shared_from = depth;
  for (Index from = depth - 1; from >= G && shared_size(from) * s.real_bytes <= plan.shared_workspace_limit;
       --from)
    s.shared_from = from;
  s.shared_elements = shared_size(s.shared_from);

  // Workspace: the levels before shared_from, then the base's pivots.
  std::int64_t at = 0, shared_at = 0;
  for (Index l = 0; l < depth; ++l) {
    const HinesLevel& L = plan.levels[static_cast<std::size_t>(l)];
    s.level_offsets.push_back(l < s.shared_from
                                  ? level_arrays(at, L.size, L.domain_size(), r, true, kAlign)
                                  : level_arrays(shared_at, cell_rows[static_cast<std::size_t>(l)],
                                                 cell_rows[static_cast<std::size_t>(l) + 1], r, factor,
                                                 kSharedAlign));
  }
  s.base_pivot_offset = at;
  at += align(plan.base_size());
  s.workspace_elements = std::max<std::int64_t>(at, kAlign);

  const auto ws = [&](std::size_t level, int array) {
    return HinesKernelArg{"workspace",
                          s.level_offsets[level][static_cast<std::size_t>(array)] * s.real_bytes};
  };
  const auto tab = [](std::int64_t ints) { return HinesKernelArg{"tables", ints * 4}; };
  const auto i32 = [](std::int64_t v) { return HinesKernelArg{"i32", v}; };
  // Level l's matrix (d, u, l, b) and solution x.
  const auto matrix = [&](std::size_t l) -> std::vector<HinesKernelArg> {
    if (l == 0) return {{"d", 0}, {"u", 0}, {"l", 0}, {"b", 0}};
    return {ws(l - 1, MD), ws(l - 1, MU), ws(l - 1, ML), ws(l - 1, MB)};
  };
  const auto solution = [&](std::size_t l) { return l == 0 ? HinesKernelArg{"x", 0} : ws(l - 1, MX); };
  const auto blocks = [&](std::int64_t threads) { return ceil_div(threads, plan.threads_per_block); };

  // Grid levels.
  struct GridTables {
    std::int64_t chains, junctions, direct, goff, gather;
  };
  std::vector<GridTables> grid;
  for (Index l = 0; l < G; ++l) {
    const HinesLevel& L = plan.levels[static_cast<std::size_t>(l)];
    std::vector<Index> flat;
    flat.reserve(L.chains.size() * 4);
    for (const HinesChain& c : L.chains)
      flat.insert(flat.end(), {c.begin, c.end, c.parent_junction, c.child_junction});
    GridTables g{};
    g.chains = append(s.tables, flat);
    g.junctions = append(s.tables, L.junctions);
    g.direct = append(s.tables, std::vector<Index>(L.direct.begin(), L.direct.end()));
    g.goff = append(s.tables, L.gather_offsets);
    g.gather = append(s.tables, L.gather);
    grid.push_back(g);
  }

  // Segment types and segments: one per cell with rows at level G or in the base.
  std::vector<std::vector<Index>> chain_first;
  for (Index l = G; l < depth; ++l)
    chain_first.push_back(
        chain_offsets(plan.levels[static_cast<std::size_t>(l)], rows[static_cast<std::size_t>(l)]));
  s.segment_stride = 2 + s.block_levels;
  std::vector<Index> segments;
  std::map<std::vector<Index>, Index> types;
  const std::size_t cells = static_cast<std::size_t>(plan.problem.cells);
  for (std::size_t c = 0; c < cells; ++c) {
    const auto& first = rows[static_cast<std::size_t>(G)];
    if (first[c + 1] == first[c]) continue;  // nothing left of this cell below the grid levels
    std::vector<Index> part;
    for (Index l = G; l < depth; ++l) {
      const auto li = static_cast<std::size_t>(l);
      const auto& cf = chain_first[static_cast<std::size_t>(l - G)];
      append_level_part(part, plan.levels[li], rows[li][c], rows[li + 1][c], rows[li + 1][c + 1], cf[c],
                        cf[c + 1]);
    }
    const auto& br = rows[static_cast<std::size_t>(depth)];
    part.push_back(br[c + 1] - br[c]);
    s.base_max = std::max(s.base_max, br[c + 1] - br[c]);
    for (Index i = br[c]; i < br[c + 1]; ++i) {
      const Index p = plan.base_parent[static_cast<std::size_t>(i)];
      part.push_back(p < 0 ? p : p - br[c]);
    }
    auto [it, fresh] = types.try_emplace(part, 0);
    if (fresh) {
      const std::int64_t o = append(s.tables, part);
      if (o > std::numeric_limits<Index>::max())
        throw UsageError("schedule_hines: the tables exceed 2^31 ints");
      it->second = static_cast<Index>(o);
      s.type_offsets.push_back(it->second);
    }
    segments.push_back(it->second);
    for (Index l = G; l <= depth; ++l) segments.push_back(rows[static_cast<std::size_t>(l)][c]);
    ++s.segments;
  }
  s.segment_types = static_cast<Index>(types.size());
  s.segments_offset = append(s.tables, segments);
  if (s.tables.size() > static_cast<std::size_t>(std::numeric_limits<Index>::max()))
    throw UsageError("schedule_hines: the tables exceed 2^31 ints");

  // The launch list of one step.
  const HinesKernelArg workspace{"workspace", 0};
  for (Index l = 0; l < G; ++l) {
    const auto li = static_cast<std::size_t>(l);
    const HinesLevel& L = plan.levels[li];
    const auto nc = static_cast<std::int64_t>(L.chains.size()),
               nj = static_cast<std::int64_t>(L.domain_size());
    const auto m = matrix(li);
    if (nc) {
      HinesLaunch a{"hines_stage1", blocks(nc), plan.threads_per_block, 0, {tab(grid[li].chains), i32(nc)}};
      a.args.insert(a.args.end(), m.begin(), m.end());
      for (int arr : {RV, PV, QV, PIV, W}) a.args.push_back(ws(li, arr));
      s.launches.push_back(std::move(a));
    }
    if (nj) {
      HinesLaunch a{"hines_stage2",
                    blocks(nj),
                    plan.threads_per_block,
                    0,
                    {tab(grid[li].junctions), tab(grid[li].direct), tab(grid[li].goff), tab(grid[li].gather),
                     tab(grid[li].chains), i32(nj)}};
      a.args.insert(a.args.end(), m.begin(), m.end());
      for (int arr : {RV, PV, QV, MD, MU, ML, MB}) a.args.push_back(ws(li, arr));
      s.launches.push_back(std::move(a));
    }
  }
  if (s.segments)
    s.launches.push_back(
        {"hines_block",
         s.segments,
         s.block_threads,
         s.shared_bytes(),
         {tab(s.segments_offset), tab(0), {"d", 0}, {"u", 0}, {"l", 0}, {"b", 0}, {"x", 0}, workspace}});
  for (Index l = G; l-- > 0;) {
    const auto li = static_cast<std::size_t>(l);
    const HinesLevel& L = plan.levels[li];
    const auto nc = static_cast<std::int64_t>(L.chains.size()),
               nj = static_cast<std::int64_t>(L.domain_size());
    if (nc + nj == 0) continue;
    s.launches.push_back({"hines_stage4",
                          blocks(nc + nj),
                          plan.threads_per_block,
                          0,
                          {tab(grid[li].chains), i32(nc), tab(grid[li].junctions), i32(nj), ws(li, RV),
                           ws(li, PV), ws(li, QV), ws(li, MX), solution(li)}});
  }
  return s;
}

nlohmann::json launches_to_json(const std::vector<HinesLaunch>& launches) {
  nlohmann::json out = nlohmann::json::array();
  for (const HinesLaunch& l : launches) out.push_back(rt::to_json(l));
  return out;
}

}  // namespace sparsecc
