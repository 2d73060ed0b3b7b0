#include "sparsecc/tune/hines_space.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <future>
#include <set>
#include <thread>

#include "sparsecc/common/error.hpp"

namespace sparsecc::tune {

namespace {

std::string hines_label(const HinesOptions& o, const HinesPlan& plan) {
  return fmt::format("K{}/KL{}/D{}/BT{}", o.k, o.k_large ? o.k_large : o.k, plan.depth(), plan.block_threads);
}

struct Planned {
  std::string point;
  std::string error;  // why the point is rejected; empty when candidate holds its plan
  HinesCandidate candidate;
};

Planned plan_point(const HinesSystem& system, std::int32_t rhs, const std::string& dtype,
                   const HinesOptions& o, bool is_default, const std::string& point,
                   const GpuTarget& target) {
  Planned p;
  p.point = point;
  try {
    p.candidate.plan = plan_hines(system, rhs, dtype, o, target);
  } catch (const UsageError& e) {
    p.error = e.what();
    return p;
  }
  if (const auto errors = check_hines_plan(p.candidate.plan); !errors.empty()) {
    p.error = is_default ? "the default Hines plan is invalid: " + errors.front() : errors.front();
    return p;
  }
  p.candidate.options = o;
  // Recorded with the K the rule chose, so that a database winner keeps its plan if the rule changes.
  if (o.decomposition == HinesDecomposition::fine && o.k == 0) p.candidate.options.k = hines_k_rule(rhs);
  p.candidate.is_default = is_default;
  p.candidate.label = hines_label(p.candidate.options, p.candidate.plan);
  return p;
}

// Equal for equal plans of one system (the system and R are the space's): the execution choices and
// every level's K and junctions (which determine its chains, domain and gathers) and the base.
std::string plan_signature(const HinesPlan& plan) {
  std::uint64_t h = 1469598103934665603ull;
  const auto mix = [&h](std::int64_t v) {
    for (int i = 0; i < 8; ++i) h = (h ^ static_cast<std::uint8_t>(v >> (8 * i))) * 1099511628211ull;
  };
  for (const HinesLevel& l : plan.levels) {
    mix(l.k);
    mix(static_cast<std::int64_t>(l.junctions.size()));
    for (const std::int32_t j : l.junctions) mix(j);
  }
  return fmt::format("{}/{}/{}/{}/{}/{}/{}/{:016x}", to_string(plan.decomposition), plan.depth(),
                     plan.grid_levels, plan.block_threads, plan.threads_per_block, to_string(plan.code),
                     plan.base_size(), h);
}

}  // namespace

HinesSpace hines_space(const HinesSystem& system, std::int32_t rhs, const std::string& dtype,
                       const HinesOptions& base, const HinesSpaceDims& dims, const GpuTarget& target) {
  HinesSpace space;
  std::set<std::string> seen;  // plans already taken, by plan_signature
  const auto add = [&](Planned&& p) {
    ++space.points;
    if (!p.error.empty()) {
      space.rejected.emplace_back(p.point, p.error);
      return;
    }
    if (!seen.insert(plan_signature(p.candidate.plan)).second) return;  // the same plan again
    space.candidates.push_back(std::move(p.candidate));
  };

  // The default plan; its errors are the caller's.
  Planned d = plan_point(system, rhs, dtype, base, true, "default", target);
  if (!d.error.empty()) throw UsageError(d.error);
  add(std::move(d));

  // One task per (K, K large, block threads): the depth rule's plan, then one level fewer and more.
  // Plans of large forests take a while each, so the tasks run in parallel, a chunk of them at a
  // time (bounding the plans alive at once), and are taken in order, which keeps the space
  // deterministic.
  struct Triple {
    std::int32_t k, k_large, threads;
  };
  std::vector<Triple> triples;
  for (const std::int32_t k : dims.k)
    for (const std::int32_t k_large : dims.k_large)
      for (const std::int32_t threads : dims.block_threads) triples.push_back({k, k_large, threads});
  const auto run_triple = [&](const Triple& t) {
    std::vector<Planned> out;
    HinesOptions o = base;
    o.k = t.k;
    o.k_large = t.k_large;
    o.block_threads = t.threads;
    o.depth = -1;
    Planned rule =
        plan_point(system, rhs, dtype, o, false,
                   fmt::format("K{}/KL{}/D{}{:+d}/BT{}", t.k, t.k_large, "rule", 0, t.threads), target);
    const std::int32_t rule_depth = rule.error.empty() ? rule.candidate.plan.depth() : -1;
    for (const std::int32_t offset : dims.depth_offset) {
      const std::string point =
          fmt::format("K{}/KL{}/D{}{:+d}/BT{}", t.k, t.k_large, "rule", offset, t.threads);
      if (offset == 0) {
        out.push_back(rule);
        continue;
      }
      const std::int32_t depth = rule_depth + offset;
      if (rule_depth < 0 || depth < 0 || depth > kHinesMaxDepth) {
        Planned bad;
        bad.point = point;
        bad.error = fmt::format("depth {} is outside 0..{}", depth, kHinesMaxDepth);
        out.push_back(std::move(bad));
        continue;
      }
      HinesOptions od = o;
      od.depth = depth;
      out.push_back(plan_point(system, rhs, dtype, od, false, point, target));
    }
    return out;
  };
  const std::size_t chunk = std::max(1u, std::thread::hardware_concurrency());
  for (std::size_t first = 0; first < triples.size(); first += chunk) {
    const std::size_t last = std::min(triples.size(), first + chunk);
    std::vector<std::future<std::vector<Planned>>> running;
    for (std::size_t i = first; i < last; ++i)
      running.push_back(std::async(std::launch::async, run_triple, std::cref(triples[i])));
    for (auto& f : running)
      for (Planned& p : f.get()) add(std::move(p));
  }
  return space;
}

nlohmann::json to_json(const HinesSpace& space, const HinesSpaceDims& dims) {
  nlohmann::json cands = nlohmann::json::array();
  for (const HinesCandidate& c : space.candidates)
    cands.push_back({{"label", c.label},
                     {"default", c.is_default},
                     {"options",
                      {{"k", c.options.k},
                       {"k_large", c.options.k_large},
                       {"depth", c.options.depth},
                       {"block_threads", c.options.block_threads}}},
                     {"depth", c.plan.depth()},
                     {"grid_levels", c.plan.grid_levels},
                     {"block_threads", c.plan.block_threads},
                     {"base_rows", c.plan.base_size()}});
  nlohmann::json rejected = nlohmann::json::array();
  for (const auto& [point, rule] : space.rejected) rejected.push_back({{"point", point}, {"rule", rule}});
  return {{"op", "hines"},
          {"dimensions",
           {{"k", dims.k},
            {"k_large", dims.k_large},
            {"depth_offset", dims.depth_offset},
            {"block_threads", dims.block_threads}}},
          {"points", space.points},
          {"candidates", cands},
          {"rejected", rejected}};
}

}  // namespace sparsecc::tune
