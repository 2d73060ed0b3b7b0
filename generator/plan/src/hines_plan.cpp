#include "sparsecc/plan/hines_plan.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "sparsecc/common/error.hpp"

namespace sparsecc {

namespace {

using json = nlohmann::json;
using Index = std::int32_t;

std::vector<Index> child_counts(const std::vector<Index>& parent) {
  std::vector<Index> count(parent.size(), 0);
  for (const Index p : parent)
    if (p >= 0) ++count[static_cast<std::size_t>(p)];
  return count;
}

// Problems of a parent array as a post-order forest (parent[i] > i, or -1).
void check_forest(const std::vector<Index>& parent, const std::string& what,
                  std::vector<std::string>& errors) {
  const auto n = static_cast<Index>(parent.size());
  for (Index i = 0; i < n; ++i) {
    const Index p = parent[static_cast<std::size_t>(i)];
    if (p != -1 && (p <= i || p >= n)) {
      errors.push_back(fmt::format("{}: parent {} of row {} is not after it", what, p, i));
      return;
    }
  }
}

}  // namespace

const char* to_string(HinesDecomposition d) { return d == HinesDecomposition::minimal ? "minimal" : "fine"; }
const char* to_string(HinesCode c) { return c == HinesCode::unrolled ? "unrolled" : "tables"; }

HinesLevel build_hines_level(const std::vector<Index>& parent, std::vector<Index> junctions, Index k) {
  const auto n = static_cast<Index>(parent.size());
  HinesLevel level;
  level.size = n;
  level.k = k;
  std::vector<Index> jidx(parent.size(), -1);
  for (std::size_t j = 0; j < junctions.size(); ++j) {
    const Index r = junctions[j];
    if (r < 0 || r >= n || (j > 0 && r <= junctions[j - 1]))
      throw UsageError(fmt::format("build_hines_level: junction {} is out of range or out of order", r));
    jidx[static_cast<std::size_t>(r)] = static_cast<Index>(j);
  }
  const auto children = child_counts(parent);
  for (Index r = 0; r < n; ++r)
    if (children[static_cast<std::size_t>(r)] > 1 && jidx[static_cast<std::size_t>(r)] < 0)
      throw UsageError(fmt::format("build_hines_level: row {} has {} children but is not a junction", r,
                                   children[static_cast<std::size_t>(r)]));
  const auto is_junction = [&](Index r) { return r >= 0 && jidx[static_cast<std::size_t>(r)] >= 0; };
  const auto up = [&](Index r) { return parent[static_cast<std::size_t>(r)]; };

  // Chains: maximal runs of non-junction rows linked by parent[r] = r + 1.
  std::vector<Index> chain_of(parent.size(), -1);  // per row: its chain
  for (Index r = 0; r < n;) {
    if (is_junction(r)) {
      ++r;
      continue;
    }
    HinesChain c;
    c.begin = r;
    Index e = r;
    while (e + 1 < n && up(e) == e + 1 && !is_junction(e + 1)) ++e;
    c.end = e;
    if (up(e) >= 0) {
      if (!is_junction(up(e)))
        throw UsageError(fmt::format(
            "build_hines_level: chain {}..{} ends below row {}, which is no junction", r, e, up(e)));
      c.parent_junction = jidx[static_cast<std::size_t>(up(e))];
    }
    if (r > 0 && is_junction(r - 1) && up(r - 1) == r)
      c.child_junction = jidx[static_cast<std::size_t>(r - 1)];
    for (Index i = r; i <= e; ++i)
      chain_of[static_cast<std::size_t>(i)] = static_cast<Index>(level.chains.size());
    level.chains.push_back(c);
    r = e + 1;
  }

  // Domain parents: the parent junction itself, or through the chain above.
  const auto s = junctions.size();
  level.domain_parent.assign(s, -1);
  level.direct.assign(s, 0);
  for (std::size_t j = 0; j < s; ++j) {
    const Index p = up(junctions[j]);
    if (p < 0) continue;
    if (is_junction(p)) {
      level.domain_parent[j] = jidx[static_cast<std::size_t>(p)];
      level.direct[j] = 1;
    } else {
      level.domain_parent[j] =
          level.chains[static_cast<std::size_t>(chain_of[static_cast<std::size_t>(p)])].parent_junction;
    }
  }

  // Gathers, ascending chain index per junction.
  std::vector<std::vector<Index>> lists(s);
  for (std::size_t c = 0; c < level.chains.size(); ++c) {
    if (level.chains[c].parent_junction >= 0)
      lists[static_cast<std::size_t>(level.chains[c].parent_junction)].push_back(static_cast<Index>(c));
    if (level.chains[c].child_junction >= 0)
      lists[static_cast<std::size_t>(level.chains[c].child_junction)].push_back(static_cast<Index>(c));
  }
  level.gather_offsets.push_back(0);
  for (auto& l : lists) {
    std::sort(l.begin(), l.end());
    level.gather.insert(level.gather.end(), l.begin(), l.end());
    level.gather_offsets.push_back(static_cast<Index>(level.gather.size()));
  }
  level.junctions = std::move(junctions);
  return level;
}

std::vector<std::string> check_hines_plan(const HinesPlan& plan) {
  std::vector<std::string> errors;
  const auto err = [&](std::string s) { errors.push_back(std::move(s)); };
  const HinesProblem& pr = plan.problem;
  if (pr.n < 1) err("n must be positive");
  if (pr.rhs < 1) err("rhs must be positive");
  if (pr.dtype != "f64" && pr.dtype != "f32") err(fmt::format("dtype '{}' is not f64 or f32", pr.dtype));
  if (static_cast<Index>(plan.parent.size()) != pr.n)
    err(fmt::format("{} parents for {} compartments", plan.parent.size(), pr.n));
  if (static_cast<Index>(plan.cell_offsets.size()) != pr.cells + 1 || plan.cell_offsets.empty() ||
      plan.cell_offsets.front() != 0 || plan.cell_offsets.back() != pr.n)
    err("cell_offsets do not cover the compartments of the cells");
  if (plan.threads_per_block < 32 || plan.threads_per_block > 1024 || plan.threads_per_block % 32)
    err(fmt::format("threads_per_block {} is not a multiple of 32 in 32..1024", plan.threads_per_block));
  if (plan.block_threads < 32 || plan.block_threads > 1024 || plan.block_threads % 32)
    err(fmt::format("block_threads {} is not a multiple of 32 in 32..1024", plan.block_threads));
  if (plan.shared_workspace_limit < 0 || plan.shared_workspace_limit > kHinesSharedWorkspaceMax)
    err(fmt::format("shared_workspace_limit {} is outside 0..{}", plan.shared_workspace_limit,
                    kHinesSharedWorkspaceMax));
  if (plan.grid_levels < 0 || plan.grid_levels > plan.depth())
    err(fmt::format("grid_levels {} is outside 0..{} (the depth)", plan.grid_levels, plan.depth()));
  if (!errors.empty()) return errors;
  check_forest(plan.parent, "level 0", errors);
  for (Index c = 0; c < pr.cells && errors.empty(); ++c) {
    const Index b = plan.cell_offsets[static_cast<std::size_t>(c)],
                e = plan.cell_offsets[static_cast<std::size_t>(c) + 1];
    if (e <= b) err(fmt::format("cell {} is empty", c));
    for (Index i = b; i < e && errors.empty(); ++i) {
      const Index p = plan.parent[static_cast<std::size_t>(i)];
      if ((i == e - 1) != (p == -1) || (p != -1 && p >= e))
        err(fmt::format("cell {}: row {} breaks the one-root-last layout", c, i));
    }
  }
  if (!errors.empty()) return errors;

  std::vector<Index> parent = plan.parent;  // the current level's matrix
  for (std::size_t li = 0; li < plan.levels.size(); ++li) {
    const HinesLevel& L = plan.levels[li];
    const auto lerr = [&](const std::string& s) { err(fmt::format("level {}: {}", li, s)); };
    const auto n = static_cast<Index>(parent.size());
    const auto s = L.junctions.size();
    if (L.size != n) {
      lerr(fmt::format("size {} but the matrix has {} rows", L.size, n));
      return errors;
    }
    if (L.domain_parent.size() != s || L.direct.size() != s || L.gather_offsets.size() != s + 1) {
      lerr("per-junction arrays differ in size");
      return errors;
    }
    // Coverage: every row a junction or in exactly one chain; junctions ascending.
    std::vector<Index> owner(parent.size(), -2), jidx(parent.size(), -1);
    for (std::size_t j = 0; j < s; ++j) {
      const Index r = L.junctions[j];
      if (r < 0 || r >= n || (j && r <= L.junctions[j - 1])) {
        lerr(fmt::format("junction {} out of range or order", r));
        return errors;
      }
      owner[static_cast<std::size_t>(r)] = -1;
      jidx[static_cast<std::size_t>(r)] = static_cast<Index>(j);
    }
    const auto children = child_counts(parent);
    for (Index r = 0; r < n; ++r)
      if (children[static_cast<std::size_t>(r)] > 1 && jidx[static_cast<std::size_t>(r)] < 0)
        lerr(fmt::format("branch point {} is not a junction", r));
    for (std::size_t c = 0; c < L.chains.size(); ++c) {
      const HinesChain& ch = L.chains[c];
      if (ch.begin < 0 || ch.end < ch.begin || ch.end >= n) {
        lerr(fmt::format("chain {} has rows {}..{}", c, ch.begin, ch.end));
        return errors;
      }
      for (Index r = ch.begin; r <= ch.end; ++r) {
        if (owner[static_cast<std::size_t>(r)] != -2) lerr(fmt::format("row {} is in two places", r));
        owner[static_cast<std::size_t>(r)] = static_cast<Index>(c);
        if (r < ch.end && parent[static_cast<std::size_t>(r)] != r + 1)
          lerr(fmt::format("chain {}: row {} is not linked to row {}", c, r, r + 1));
      }
      const Index top = parent[static_cast<std::size_t>(ch.end)];
      const Index want_p = top >= 0 ? jidx[static_cast<std::size_t>(top)] : -1;
      if (top >= 0 && want_p < 0)
        lerr(fmt::format("chain {} ends below row {}, which is no junction", c, top));
      if (ch.parent_junction != want_p)
        lerr(fmt::format("chain {}: parent junction {} instead of {}", c, ch.parent_junction, want_p));
      const bool below = ch.begin > 0 && jidx[static_cast<std::size_t>(ch.begin - 1)] >= 0 &&
                         parent[static_cast<std::size_t>(ch.begin - 1)] == ch.begin;
      const Index want_c = below ? jidx[static_cast<std::size_t>(ch.begin - 1)] : -1;
      if (ch.child_junction != want_c)
        lerr(fmt::format("chain {}: child junction {} instead of {}", c, ch.child_junction, want_c));
      if (ch.begin > 0 && owner[static_cast<std::size_t>(ch.begin - 1)] >= 0 &&
          parent[static_cast<std::size_t>(ch.begin - 1)] == ch.begin)
        lerr(fmt::format("chain {} is not maximal", c));
    }
    if (std::count(owner.begin(), owner.end(), -2)) lerr("rows in no chain and no junction");
    if (!errors.empty()) return errors;
    // Junction parents and gathers (the expected lists in one pass over the chains, ascending).
    std::vector<std::vector<Index>> expected(s);
    for (std::size_t c = 0; c < L.chains.size(); ++c)
      for (const Index j : {L.chains[c].parent_junction, L.chains[c].child_junction})
        if (j >= 0 && static_cast<std::size_t>(j) < s)
          expected[static_cast<std::size_t>(j)].push_back(static_cast<Index>(c));
    for (std::size_t j = 0; j < s; ++j) {
      const Index p = parent[static_cast<std::size_t>(L.junctions[j])];
      Index want = -1;
      const bool direct = p >= 0 && jidx[static_cast<std::size_t>(p)] >= 0;
      if (direct)
        want = jidx[static_cast<std::size_t>(p)];
      else if (p >= 0)
        want = L.chains[static_cast<std::size_t>(owner[static_cast<std::size_t>(p)])].parent_junction;
      if (L.domain_parent[j] != want || L.direct[j] != (direct ? 1 : 0))
        lerr(fmt::format("junction {}: domain parent {} (direct {}) instead of {} ({})", j,
                         L.domain_parent[j], int{L.direct[j]}, want, direct));
      const std::vector<Index>& expect = expected[j];
      const Index b = L.gather_offsets[j], e = L.gather_offsets[j + 1];
      if (b < 0 || e < b || static_cast<std::size_t>(e) > L.gather.size() ||
          !std::equal(expect.begin(), expect.end(), L.gather.begin() + b, L.gather.begin() + e) ||
          static_cast<std::size_t>(e - b) != expect.size())
        lerr(fmt::format("junction {}: gather list differs from the chains that touch it", j));
    }
    if (L.gather_offsets.front() != 0 || static_cast<std::size_t>(L.gather_offsets.back()) != L.gather.size())
      lerr("gather_offsets do not span the gather list");
    check_forest(L.domain_parent, fmt::format("level {} domain", li), errors);
    if (!errors.empty()) return errors;
    parent = L.domain_parent;
  }
  if (plan.base_parent != parent) err("base_parent is not the last domain");
  if (errors.empty() && plan.code == HinesCode::unrolled) {
    const std::int64_t bytes =
        hines_base_shared_bytes(hines_block_base_max(plan), pr.rhs, pr.dtype == "f32" ? 4 : 8);
    if (bytes > kHinesBaseSharedLimit)
      err(fmt::format(
          "unrolled code needs the bases in shared memory, but the largest takes {} bytes (limit {})", bytes,
          kHinesBaseSharedLimit));
  }
  return errors;
}

std::int32_t hines_block_base_max(const HinesPlan& plan) {
  const auto rows = hines_cell_offsets_by_level(plan);
  const std::vector<Index>& first = rows[static_cast<std::size_t>(plan.grid_levels)];
  const std::vector<Index>& base = rows.back();
  Index m = 0;
  for (std::size_t c = 0; c + 1 < base.size(); ++c)
    if (first[c + 1] > first[c]) m = std::max(m, base[c + 1] - base[c]);
  return m;
}

std::vector<std::vector<Index>> hines_cell_offsets_by_level(const HinesPlan& plan) {
  std::vector<std::vector<Index>> out{plan.cell_offsets};
  for (const HinesLevel& L : plan.levels) {
    const std::vector<Index>& rows = out.back();
    std::vector<Index> next(rows.size(), 0);
    std::size_t c = 0;
    for (std::size_t j = 0; j < L.junctions.size(); ++j) {
      while (c + 1 < rows.size() && L.junctions[j] >= rows[c + 1]) next[++c] = static_cast<Index>(j);
      if (c + 1 >= rows.size()) throw UsageError("Hines plan: a junction lies outside every cell");
    }
    while (c + 1 < rows.size()) next[++c] = L.domain_size();
    out.push_back(std::move(next));
  }
  return out;
}

json to_json(const HinesPlan& p) {
  json levels = json::array();
  for (const HinesLevel& L : p.levels) {
    json chains = json::array();
    for (const HinesChain& c : L.chains)
      chains.push_back({c.begin, c.end, c.parent_junction, c.child_junction});
    levels.push_back({{"size", L.size},
                      {"k", L.k},
                      {"junctions", L.junctions},
                      {"domain_parent", L.domain_parent},
                      {"direct", L.direct},
                      {"chains", std::move(chains)},
                      {"gather_offsets", L.gather_offsets},
                      {"gather", L.gather}});
  }
  return {
      {"kind", "hines"},
      {"problem",
       {{"n", p.problem.n}, {"cells", p.problem.cells}, {"rhs", p.problem.rhs}, {"dtype", p.problem.dtype}}},
      {"decomposition", to_string(p.decomposition)},
      {"kernel_name", p.kernel_name},
      {"depth", p.depth()},
      {"base_size", p.base_size()},
      {"threads_per_block", p.threads_per_block},
      {"grid_levels", p.grid_levels},
      {"block_threads", p.block_threads},
      {"estimated_instructions", p.estimated_instructions},
      {"code", to_string(p.code)},
      {"unrolled_instructions", p.unrolled_instructions},
      {"shared_workspace_limit", p.shared_workspace_limit},
      {"parent", p.parent},
      {"cell_offsets", p.cell_offsets},
      {"levels", std::move(levels)},
      {"base_parent", p.base_parent}};
}

HinesPlan hines_plan_from_json(const json& j) {
  try {
    if (j.at("kind") != "hines") throw UsageError("Hines plan: kind is not 'hines'");
    HinesPlan p;
    const json& pr = j.at("problem");
    p.problem = {pr.at("n"), pr.at("cells"), pr.at("rhs"), pr.at("dtype")};
    const std::string d = j.at("decomposition");
    if (d != "minimal" && d != "fine") throw UsageError(fmt::format("Hines plan: bad decomposition '{}'", d));
    p.decomposition = d == "minimal" ? HinesDecomposition::minimal : HinesDecomposition::fine;
    p.kernel_name = j.at("kernel_name");
    p.threads_per_block = j.at("threads_per_block");
    p.grid_levels = j.at("grid_levels");
    p.block_threads = j.at("block_threads");
    p.estimated_instructions = j.at("estimated_instructions");
    const std::string code = j.at("code");
    if (code != "tables" && code != "unrolled")
      throw UsageError(fmt::format("Hines plan: bad code mode '{}'", code));
    p.code = code == "unrolled" ? HinesCode::unrolled : HinesCode::tables;
    p.unrolled_instructions = j.at("unrolled_instructions");
    // Absent in plans of earlier generators, whose workspace was global.
    p.shared_workspace_limit = j.value("shared_workspace_limit", std::int64_t{0});
    p.parent = j.at("parent").get<std::vector<Index>>();
    p.cell_offsets = j.at("cell_offsets").get<std::vector<Index>>();
    p.base_parent = j.at("base_parent").get<std::vector<Index>>();
    for (const json& jl : j.at("levels")) {
      HinesLevel L;
      L.size = jl.at("size");
      L.k = jl.at("k");
      L.junctions = jl.at("junctions").get<std::vector<Index>>();
      L.domain_parent = jl.at("domain_parent").get<std::vector<Index>>();
      L.direct = jl.at("direct").get<std::vector<std::uint8_t>>();
      for (const json& c : jl.at("chains")) L.chains.push_back({c.at(0), c.at(1), c.at(2), c.at(3)});
      L.gather_offsets = jl.at("gather_offsets").get<std::vector<Index>>();
      L.gather = jl.at("gather").get<std::vector<Index>>();
      p.levels.push_back(std::move(L));
    }
    return p;
  } catch (const json::exception& e) {
    throw UsageError(fmt::format("Hines plan: malformed JSON: {}", e.what()));
  }
}

}  // namespace sparsecc
