#include "sparsecc/tune/hines_space.hpp"

#include <fmt/format.h>

#include <set>

#include "sparsecc/common/error.hpp"

namespace sparsecc::tune {

namespace {

std::string hines_label(const HinesOptions& o, const HinesPlan& plan) {
  return fmt::format("K{}/KL{}/D{}/BT{}", o.k, o.k_large ? o.k_large : o.k, plan.depth(), plan.block_threads);
}

}  // namespace

HinesSpace hines_space(const HinesSystem& system, std::int32_t rhs, const std::string& dtype,
                       const HinesOptions& base, const HinesSpaceDims& dims) {
  HinesSpace space;
  std::set<std::string> seen;  // plans already taken, as JSON text
  const auto add = [&](const HinesOptions& o, bool is_default, const std::string& point) {
    ++space.points;
    HinesCandidate c;
    try {
      c.plan = plan_hines(system, rhs, dtype, o);
    } catch (const UsageError& e) {
      if (is_default) throw;
      space.rejected.emplace_back(point, e.what());
      return;
    }
    if (const auto errors = check_hines_plan(c.plan); !errors.empty()) {
      if (is_default) throw UsageError("the default Hines plan is invalid: " + errors.front());
      space.rejected.emplace_back(point, errors.front());
      return;
    }
    if (!seen.insert(to_json(c.plan).dump()).second) return;  // the same plan again
    c.options = o;
    c.is_default = is_default;
    c.label = hines_label(o, c.plan);
    space.candidates.push_back(std::move(c));
  };

  add(base, true, "default");
  for (const std::int32_t k : dims.k)
    for (const std::int32_t k_large : dims.k_large)
      for (const std::int32_t threads : dims.block_threads) {
        HinesOptions o = base;
        o.k = k;
        o.k_large = k_large;
        o.block_threads = threads;
        o.depth = -1;
        // The depth rule's choice for these options, then one level fewer or more.
        std::int32_t rule_depth = -1;
        try {
          rule_depth = plan_hines(system, rhs, dtype, o).depth();
        } catch (const UsageError&) {
        }
        for (const std::int32_t offset : dims.depth_offset) {
          const std::string point = fmt::format("K{}/KL{}/D{}{:+d}/BT{}", k, k_large, "rule", offset, threads);
          const std::int32_t depth = rule_depth + offset;
          if (offset != 0 && (rule_depth < 0 || depth < 0 || depth > kHinesMaxDepth)) {
            ++space.points;
            space.rejected.emplace_back(point, fmt::format("depth {} is outside 0..{}", depth, kHinesMaxDepth));
            continue;
          }
          o.depth = offset == 0 ? -1 : depth;
          add(o, false, point);
        }
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
           {{"k", dims.k}, {"k_large", dims.k_large}, {"depth_offset", dims.depth_offset},
            {"block_threads", dims.block_threads}}},
          {"points", space.points},
          {"candidates", cands},
          {"rejected", rejected}};
}

}  // namespace sparsecc::tune
