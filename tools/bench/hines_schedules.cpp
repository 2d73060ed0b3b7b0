// Layouts and schedules of the Hines solver baselines, and the fused serial step.
#include "bench/hines_schedules.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <map>
#include <queue>
#include <utility>

#include "sparsecc/common/error.hpp"
#include "sparsecc/inspector/hines_planner.hpp"
#include "sparsecc/plan/hines_plan.hpp"
#include "sparsecc/reference/hines_solve.hpp"

namespace sparsecc::bench {

namespace {

using Index = std::int32_t;

// A size or index of a kernel table: it must fit the kernels' int arithmetic.
Index checked_index(std::int64_t v, const char* what) {
  if (v < 0 || v > INT_MAX)
    throw UsageError(fmt::format("Hines baseline layout: {} ({}) does not fit in 32-bit indices", what, v));
  return static_cast<Index>(v);
}

std::vector<Index> child_counts(const std::vector<Index>& parent) {
  std::vector<Index> n(parent.size(), 0);
  for (const Index p : parent)
    if (p >= 0) ++n[static_cast<std::size_t>(p)];
  return n;
}

// Fills map.slot/rhs_at/rhs_step of node `row` (Hines order).
void place(NodeMap& map, Index row, std::int64_t slot, std::int64_t rhs_at, std::int64_t rhs_step) {
  const auto r = static_cast<std::size_t>(row);
  map.slot[r] = checked_index(slot, "node slot");
  map.rhs_at[r] = checked_index(rhs_at, "right-hand-side slot");
  map.rhs_step[r] = checked_index(rhs_step, "right-hand-side stride");
}

NodeMap empty_map(const HinesSystem& s, std::int64_t slots, int rhs) {
  NodeMap map;
  map.slots = checked_index(slots, "node slots");
  map.rhs_slots = checked_index(slots * rhs, "right-hand-side slots");
  const auto n = static_cast<std::size_t>(s.size());
  map.slot.assign(n, -1);
  map.rhs_at.assign(n, -1);
  map.rhs_step.assign(n, 0);
  return map;
}

void check_rhs(int rhs) {
  if (rhs < 1) throw UsageError(fmt::format("Hines baselines: {} right-hand sides (at least 1)", rhs));
}

}  // namespace

template <typename T>
std::vector<T> scatter_nodes(const NodeMap& map, std::span<const double> by_hines) {
  if (by_hines.size() != map.slot.size())
    throw UsageError(fmt::format("scatter_nodes: {} values for {} nodes", by_hines.size(), map.slot.size()));
  std::vector<T> out(static_cast<std::size_t>(map.slots), T(0));
  for (std::size_t i = 0; i < by_hines.size(); ++i)
    out[static_cast<std::size_t>(map.slot[i])] = static_cast<T>(by_hines[i]);
  return out;
}

template <typename T>
std::vector<T> scatter_rhs(const NodeMap& map, std::span<const double> b, int rhs) {
  const std::size_t n = map.slot.size(), r = static_cast<std::size_t>(rhs);
  if (b.size() != n * r)
    throw UsageError(
        fmt::format("scatter_rhs: {} values for {} nodes x {} right-hand sides", b.size(), n, r));
  std::vector<T> out(static_cast<std::size_t>(map.rhs_slots), T(0));
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t k = 0; k < r; ++k)
      out[static_cast<std::size_t>(map.rhs_at[i]) + k * static_cast<std::size_t>(map.rhs_step[i])] =
          static_cast<T>(b[i * r + k]);
  return out;
}

template <typename T>
std::vector<double> gather_rhs(const NodeMap& map, std::span<const T> x, int rhs) {
  const std::size_t n = map.slot.size(), r = static_cast<std::size_t>(rhs);
  if (x.size() != static_cast<std::size_t>(map.rhs_slots))
    throw UsageError(fmt::format("gather_rhs: {} values for {} slots", x.size(), map.rhs_slots));
  std::vector<double> out(n * r);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t k = 0; k < r; ++k)
      out[i * r + k] = static_cast<double>(
          x[static_cast<std::size_t>(map.rhs_at[i]) + k * static_cast<std::size_t>(map.rhs_step[i])]);
  return out;
}

template std::vector<float> scatter_nodes<float>(const NodeMap&, std::span<const double>);
template std::vector<double> scatter_nodes<double>(const NodeMap&, std::span<const double>);
template std::vector<float> scatter_rhs<float>(const NodeMap&, std::span<const double>, int);
template std::vector<double> scatter_rhs<double>(const NodeMap&, std::span<const double>, int);
template std::vector<double> gather_rhs<float>(const NodeMap&, std::span<const float>, int);
template std::vector<double> gather_rhs<double>(const NodeMap&, std::span<const double>, int);

std::vector<CellGroup> group_cells(const HinesSystem& s) {
  std::vector<CellGroup> groups;
  std::map<std::vector<Index>, std::size_t> index;
  for (Index c = 0; c < s.num_cells(); ++c) {
    const Index b = s.cell_offsets[static_cast<std::size_t>(c)],
                e = s.cell_offsets[static_cast<std::size_t>(c) + 1];
    std::vector<Index> rel(static_cast<std::size_t>(e - b));
    for (Index i = b; i < e; ++i) {
      const Index p = s.parent[static_cast<std::size_t>(i)];
      rel[static_cast<std::size_t>(i - b)] = p < 0 ? -1 : p - b;
    }
    auto [it, added] = index.try_emplace(rel, groups.size());
    if (added) groups.push_back(CellGroup{std::move(rel), {}});
    groups[it->second].cells.push_back(c);
  }
  return groups;
}

std::vector<Index> interleaved_codes(const std::vector<Index>& parent) {
  const std::size_t n = parent.size();
  if (n >= (std::size_t{1} << 27)) throw UsageError("interleaved_codes: cell too large for the node codes");
  const std::vector<Index> children = child_counts(parent);
  std::vector<Index> first(n, -1);  // smallest child of each node
  for (std::size_t i = 0; i < n; ++i) {
    const Index p = parent[i];
    if (p >= 0 && first[static_cast<std::size_t>(p)] < 0)
      first[static_cast<std::size_t>(p)] = static_cast<Index>(i);
  }
  std::vector<Index> code(n);
  for (std::size_t i = 0; i < n; ++i) {
    const Index p = parent[i];
    Index flags = 0;
    if (children[i] > 0) flags |= kHasChildren;
    if (children[i] > 1) flags |= kMultiChild;
    if (p >= 0 && children[static_cast<std::size_t>(p)] > 1 &&
        first[static_cast<std::size_t>(p)] == static_cast<Index>(i))
      flags |= kFirstChild;
    code[i] = ((p + 1) << 3) | flags;
  }
  return code;
}

InterleavedLayout build_interleaved(const HinesSystem& s, int rhs) {
  check_rhs(rhs);
  InterleavedLayout L;
  std::int64_t data = 0;
  const std::vector<CellGroup> groups = group_cells(s);
  for (const CellGroup& g : groups) {
    const auto cells = static_cast<std::int64_t>(g.cells.size());
    const std::int64_t stride = cells == 1 ? 1 : (cells + 31) / 32 * 32;
    const auto nodes = static_cast<std::int64_t>(g.parent.size());
    const Index group = L.num_groups();
    for (std::int64_t w = 0; w < stride; w += 32) {
      L.warps.push_back(group);
      L.warps.push_back(static_cast<Index>(w));
    }
    L.groups.insert(L.groups.end(),
                    {static_cast<Index>(nodes), static_cast<Index>(stride), static_cast<Index>(cells),
                     checked_index(data, "interleaved data base"),
                     checked_index(static_cast<std::int64_t>(L.codes.size()), "code offset")});
    const std::vector<Index> codes = interleaved_codes(g.parent);
    L.codes.insert(L.codes.end(), codes.begin(), codes.end());
    data += nodes * stride;
  }
  L.map = empty_map(s, data, rhs);
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    const CellGroup& g = groups[gi];
    const std::int64_t stride = L.groups[gi * 5 + 1], base = L.groups[gi * 5 + 3];
    for (std::size_t c = 0; c < g.cells.size(); ++c) {
      const Index first = s.cell_offsets[static_cast<std::size_t>(g.cells[c])];
      for (std::size_t i = 0; i < g.parent.size(); ++i) {
        const auto si = static_cast<std::int64_t>(i), sc = static_cast<std::int64_t>(c);
        place(L.map, first + static_cast<Index>(i), base + si * stride + sc,
              base * rhs + si * rhs * stride + sc, stride);
      }
    }
  }
  return L;
}

std::vector<std::vector<Index>> dhs_schedule(const std::vector<Index>& parent, int k) {
  if (k < 1) throw UsageError(fmt::format("dhs_schedule: {} threads per cell (at least 1)", k));
  const std::size_t n = parent.size();
  std::vector<Index> depth(n, 0), pending = child_counts(parent);
  for (std::size_t i = n; i-- > 0;) {
    const Index p = parent[i];
    if (p >= 0) {
      if (static_cast<std::size_t>(p) <= i || static_cast<std::size_t>(p) >= n)
        throw UsageError(fmt::format("dhs_schedule: parent {} of node {} is not after it", p, i));
      depth[i] = depth[static_cast<std::size_t>(p)] + 1;
    }
  }
  // Ready nodes, deepest first, then by ascending index.
  const auto later = [&](Index a, Index b) {
    const Index da = depth[static_cast<std::size_t>(a)], db = depth[static_cast<std::size_t>(b)];
    return da != db ? da < db : a > b;
  };
  std::priority_queue<Index, std::vector<Index>, decltype(later)> ready(later);
  for (std::size_t i = 0; i < n; ++i)
    if (pending[i] == 0) ready.push(static_cast<Index>(i));
  std::vector<std::vector<Index>> steps;
  std::size_t done = 0;
  while (!ready.empty()) {
    std::vector<Index> step;
    while (!ready.empty() && step.size() < static_cast<std::size_t>(k)) {
      step.push_back(ready.top());
      ready.pop();
    }
    for (const Index v : step) {
      const Index p = parent[static_cast<std::size_t>(v)];
      if (p >= 0 && --pending[static_cast<std::size_t>(p)] == 0) ready.push(p);
    }
    done += step.size();
    steps.push_back(std::move(step));
  }
  if (done != n) throw UsageError("dhs_schedule: the parent array is not a forest");
  return steps;
}

DhsLayout build_dhs(const HinesSystem& s, int k, int rhs) {
  check_rhs(rhs);
  if (k < 1 || k > 32) throw UsageError(fmt::format("DHS: {} threads per cell (1 to 32)", k));
  DhsLayout L;
  L.k = k;
  struct Shape {
    Index table = 0, steps = 0;
    std::vector<Index> slot_of;  // cell-relative node -> slot
  };
  const std::vector<CellGroup> groups = group_cells(s);
  std::vector<Shape> shapes;
  for (const CellGroup& g : groups) {
    const auto steps = dhs_schedule(g.parent, k);
    Shape sh;
    sh.table = checked_index(static_cast<std::int64_t>(L.table.size() / 4), "DHS table offset");
    sh.steps = checked_index(static_cast<std::int64_t>(steps.size()), "DHS steps");
    const std::int64_t slots = static_cast<std::int64_t>(sh.steps) * k;
    sh.slot_of.assign(g.parent.size(), -1);
    for (std::size_t t = 0; t < steps.size(); ++t)
      for (std::size_t l = 0; l < steps[t].size(); ++l)
        sh.slot_of[static_cast<std::size_t>(steps[t][l])] =
            static_cast<Index>(t * static_cast<std::size_t>(k) + l);
    std::vector<std::vector<Index>> kids(g.parent.size());
    for (std::size_t i = 0; i < g.parent.size(); ++i)
      if (g.parent[i] >= 0) kids[static_cast<std::size_t>(g.parent[i])].push_back(static_cast<Index>(i));
    std::vector<Index> entries(static_cast<std::size_t>(slots) * 4, 0);
    for (std::int64_t q = 0; q < slots; ++q) entries[static_cast<std::size_t>(q) * 4] = -2;
    for (std::size_t i = 0; i < g.parent.size(); ++i) {
      const auto e = static_cast<std::size_t>(sh.slot_of[i]) * 4;
      const Index p = g.parent[i];
      entries[e] = p < 0 ? -1 : sh.slot_of[static_cast<std::size_t>(p)];
      entries[e + 1] = checked_index(static_cast<std::int64_t>(L.children.size()), "DHS child list");
      entries[e + 2] = static_cast<Index>(kids[i].size());
      for (const Index c : kids[i]) L.children.push_back(sh.slot_of[static_cast<std::size_t>(c)]);
    }
    L.table.insert(L.table.end(), entries.begin(), entries.end());
    shapes.push_back(std::move(sh));
  }
  // Cells by descending step count, so the cells sharing a warp take similar numbers of steps.
  struct CellRef {
    Index group, cell;
  };
  std::vector<CellRef> order;
  for (std::size_t g = 0; g < groups.size(); ++g)
    for (const Index c : groups[g].cells) order.push_back({static_cast<Index>(g), c});
  std::stable_sort(order.begin(), order.end(), [&](const CellRef& a, const CellRef& b) {
    return shapes[static_cast<std::size_t>(a.group)].steps > shapes[static_cast<std::size_t>(b.group)].steps;
  });
  std::int64_t slots = 0;
  for (const CellRef& c : order)
    slots += static_cast<std::int64_t>(shapes[static_cast<std::size_t>(c.group)].steps) * k;
  L.map = empty_map(s, slots, rhs);
  std::int64_t base = 0;
  for (const CellRef& c : order) {
    const Shape& sh = shapes[static_cast<std::size_t>(c.group)];
    const std::int64_t cell_slots = static_cast<std::int64_t>(sh.steps) * k;
    L.cells.insert(L.cells.end(), {checked_index(base, "DHS slot base"), sh.table, sh.steps, 0});
    const Index first = s.cell_offsets[static_cast<std::size_t>(c.cell)];
    for (std::size_t i = 0; i < sh.slot_of.size(); ++i)
      place(L.map, first + static_cast<Index>(i), base + sh.slot_of[i], base * rhs + sh.slot_of[i],
            cell_slots);
    L.max_steps = std::max(L.max_steps, sh.steps);
    L.total_steps = checked_index(static_cast<std::int64_t>(L.total_steps) + sh.steps, "DHS total steps");
    base += cell_slots;
  }
  return L;
}

MinTrsvLayout build_min_trsv(const HinesSystem& s) {
  const HinesLevel level =
      build_hines_level(s.parent, select_junctions(s.parent, HinesDecomposition::minimal, 0), 0);
  MinTrsvLayout L;
  L.n = s.size();
  L.m = std::max<Index>(L.n, 3);
  L.rows.assign(static_cast<std::size_t>(L.m) * 4, -1);
  for (Index r = L.n; r < L.m; ++r) L.rows[static_cast<std::size_t>(r) * 4 + 3] = 0;
  for (std::size_t k = 0; k < level.junctions.size(); ++k) {
    const auto r = static_cast<std::size_t>(level.junctions[k]);
    L.rows[r * 4] = static_cast<Index>(k);
    L.rows[r * 4 + 3] = 0;
    L.junctions.push_back(level.junctions[k]);
    L.junctions.push_back(level.direct[k]);
  }
  for (const HinesChain& c : level.chains) {
    L.chains.insert(L.chains.end(), {c.begin, c.end, c.parent_junction, c.child_junction});
    for (Index r = c.begin; r <= c.end; ++r) {
      const auto at = static_cast<std::size_t>(r) * 4;
      L.rows[at + 1] = c.parent_junction;
      L.rows[at + 2] = c.child_junction;
      L.rows[at + 3] = (r == c.begin ? kChainFirst : 0) | (r == c.end ? kChainLast : 0);
    }
  }
  L.gather_offsets = level.gather_offsets;
  L.gather = level.gather;
  L.domain_parent = level.domain_parent;
  // The domain forest splits by cell: junctions ascend, and no domain parent leaves its cell.
  L.domain_cells.push_back(0);
  std::size_t j = 0;
  for (Index c = 0; c < s.num_cells(); ++c) {
    const Index end = s.cell_offsets[static_cast<std::size_t>(c) + 1];
    const std::size_t first = j;
    while (j < level.junctions.size() && level.junctions[j] < end) ++j;
    if (j == first) continue;
    for (std::size_t q = first; q < j; ++q) {
      const Index p = level.domain_parent[q];
      if (p >= 0 && (static_cast<std::size_t>(p) <= q || static_cast<std::size_t>(p) >= j))
        throw UsageError(
            fmt::format("build_min_trsv: domain parent {} of junction {} leaves its cell", p, q));
    }
    L.domain_cells.push_back(static_cast<Index>(j));
  }
  return L;
}

void serial_hines_step(const HinesSystem& s, std::span<const double> b, int rhs, std::span<double> x,
                       std::span<double> pivot) {
  const auto n = static_cast<std::size_t>(s.size()), r = static_cast<std::size_t>(rhs);
  if (rhs < 1 || b.size() != n * r || x.size() != n * r || pivot.size() != n || s.diag.size() != n ||
      s.upper.size() != n || s.lower.size() != n)
    throw UsageError("serial_hines_step: sizes disagree");
  std::copy(b.begin(), b.end(), x.begin());
  std::copy(s.diag.begin(), s.diag.end(), pivot.begin());
  const Index* parent = s.parent.data();
  const double *upper = s.upper.data(), *lower = s.lower.data();
  double *xs = x.data(), *piv = pivot.data();
  // Factor and forward elimination in one sweep (children before parents).
  for (std::size_t i = 0; i < n; ++i) {
    const Index p = parent[i];
    if (p < 0) continue;
    const double f = lower[i] / piv[i];
    piv[p] -= f * upper[i];
    double* xp = xs + static_cast<std::size_t>(p) * r;
    const double* xi = xs + i * r;
    for (std::size_t c = 0; c < r; ++c) xp[c] -= f * xi[c];
  }
  for (std::size_t i = n; i-- > 0;) {
    const Index p = parent[i];
    double* xi = xs + i * r;
    const double inv = 1.0 / piv[i];
    if (p < 0) {
      for (std::size_t c = 0; c < r; ++c) xi[c] *= inv;
    } else {
      const double u = upper[i];
      const double* xp = xs + static_cast<std::size_t>(p) * r;
      for (std::size_t c = 0; c < r; ++c) xi[c] = (xi[c] - u * xp[c]) * inv;
    }
  }
}

}  // namespace sparsecc::bench
