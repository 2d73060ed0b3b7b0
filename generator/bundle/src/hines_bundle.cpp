#include "sparsecc/bundle/hines_bundle.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "section_bytes.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/common/version.hpp"
#include "sparsecc/plan/launch_metadata.hpp"

namespace sparsecc {

namespace {

using section_bytes::append;
using section_bytes::take;

}  // namespace

std::vector<unsigned char> hines_reference_bytes(const HinesSystem& s) {
  std::vector<unsigned char> out;
  const bool passive = !s.cap_over_dt.empty();
  const std::uint64_t head[3] = {static_cast<std::uint64_t>(s.size()),
                                 static_cast<std::uint64_t>(s.num_cells()), passive ? 1u : 0u};
  append(out, head, 3);
  append(out, s.parent.data(), s.parent.size());
  append(out, s.cell_offsets.data(), s.cell_offsets.size());
  for (const auto* v : {&s.diag, &s.upper, &s.lower}) append(out, v->data(), v->size());
  if (passive) {
    append(out, s.cap_over_dt.data(), s.cap_over_dt.size());
    append(out, s.leak.data(), s.leak.size());
    append(out, &s.leak_reversal_mv, 1);
  }
  return out;
}

HinesSystem hines_system_from_reference_bytes(std::span<const unsigned char> d, const std::string& name) {
  std::size_t at = 0;
  std::uint64_t head[3];
  take(d, at, head, 3, name, "header");
  const std::uint64_t limit = d.size() / 4;  // every count is bounded by the bytes present
  if (head[0] < 1 || head[0] > limit || head[1] < 1 || head[1] > head[0] || head[2] > 1)
    throw_at_byte(name, 0,
                  fmt::format("verification section: implausible header ({} rows, {} cells, passive {})",
                              head[0], head[1], head[2]));
  const std::size_t n = head[0];
  HinesSystem s;
  s.parent.resize(n);
  take(d, at, s.parent.data(), n, name, "parents");
  s.cell_offsets.resize(head[1] + 1);
  take(d, at, s.cell_offsets.data(), s.cell_offsets.size(), name, "cell offsets");
  for (auto* v : {&s.diag, &s.upper, &s.lower}) {
    v->resize(n);
    take(d, at, v->data(), n, name, "values");
  }
  if (head[2]) {
    s.cap_over_dt.resize(n);
    take(d, at, s.cap_over_dt.data(), n, name, "capacitance terms");
    s.leak.resize(n);
    take(d, at, s.leak.data(), n, name, "leak terms");
    take(d, at, &s.leak_reversal_mv, 1, name, "leak reversal");
  }
  if (at != d.size())
    throw_at_byte(name, static_cast<std::int64_t>(at), "verification section: trailing bytes");
  if (const auto problems = validate_hines(s); !problems.empty())
    throw_at_byte(name, 0, fmt::format("verification section: {}", problems.front()));
  if (s.cell_offsets.front() != 0 || s.cell_offsets.back() != static_cast<std::int32_t>(n) ||
      !std::is_sorted(s.cell_offsets.begin(), s.cell_offsets.end()))
    throw_at_byte(name, 0, "verification section: cell offsets do not cover the rows");
  return s;
}

rt::Bundle hines_bundle(const HinesPlan& plan, const HinesSchedule& schedule, const HinesSystem& system,
                        std::vector<unsigned char> cubin, std::string ptx, const std::string& arch) {
  if (system.size() != plan.problem.n || system.num_cells() != plan.problem.cells)
    throw UsageError("hines_bundle: the system is not the one the plan was made for");
  rt::Bundle b;
  b.metadata = hines_launch_metadata(plan, schedule);
  rt::BundleMetadata& md = b.metadata;
  md.arch = arch;
  md.generator_version = kVersion;
  b.reference = hines_reference_bytes(system);
  md.fingerprint = fmt::format("{:016x}", rt::fnv1a64(b.reference));
  std::vector<std::int32_t> sizes;
  for (const HinesLevel& L : plan.levels) sizes.push_back(L.size);
  md.plan_summary = {{"decomposition", to_string(plan.decomposition)},
                     {"k", plan.levels.empty() ? 0 : plan.levels.back().k},         // of the block levels
                     {"k_large", plan.levels.empty() ? 0 : plan.levels.front().k},  // of the large levels
                     {"depth", plan.depth()},
                     {"level_sizes", sizes},
                     {"base_size", plan.base_size()},
                     {"grid_levels", plan.grid_levels},
                     {"block_threads", plan.block_threads},
                     {"threads_per_block", plan.threads_per_block},
                     {"segments", schedule.segments},
                     {"segment_types", schedule.segment_types},
                     {"table_bytes", schedule.tables.size() * 4},
                     {"mode", to_string(plan.code)}};
  b.tables = schedule.tables;
  if (system.compartment_of.size() == static_cast<std::size_t>(system.size()))
    b.permutation = system.compartment_of;
  b.cubin = std::move(cubin);
  b.ptx = std::move(ptx);
  b.plan = to_json(plan).dump();
  rt::validate_bundle(b, "Hines bundle");
  return b;
}

HinesPlan hines_bundle_plan(const rt::Bundle& bundle, const HinesSystem& s, const std::string& name) {
  const rt::BundleMetadata& md = bundle.metadata;
  if (s.size() != md.hines.rows || s.num_cells() != md.hines.cells)
    throw rt::BundleError(
        fmt::format("{}: metadata hines.rows and hines.cells are {} and {} but the bundle's system (its "
                    "verification section) has {} rows in {} cells",
                    name, md.hines.rows, md.hines.cells, s.size(), s.num_cells()));
  if (bundle.plan.empty())
    throw rt::BundleError(
        fmt::format("{}: has no plan section (written without one); compile the executor again", name));
  HinesPlan plan;
  HinesSchedule schedule;
  try {
    plan = hines_plan_from_json(nlohmann::json::parse(bundle.plan));
    if (const auto problems = check_hines_plan(plan); !problems.empty())
      throw UsageError(fmt::format("not a valid Hines plan: {}", problems.front()));
    if (plan.parent != s.parent || plan.cell_offsets != s.cell_offsets)
      throw UsageError("not a plan of the bundle's system (its parents or cells differ)");
    schedule = schedule_hines(plan);
  } catch (const UsageError& e) {
    throw rt::BundleError(fmt::format("{}: section plan: {}", name, e.what()));
  } catch (const nlohmann::json::exception& e) {
    throw rt::BundleError(fmt::format("{}: section plan: not valid JSON: {}", name, e.what()));
  }
  const auto stated = rt::hines_contract(md, bundle.tables);
  const auto planned = rt::hines_contract(hines_launch_metadata(plan, schedule), schedule.tables);
  for (std::size_t i = 0; i < stated.size(); ++i)
    if (stated[i].value != planned[i].value)
      throw rt::BundleError(
          fmt::format("{}: {} is {} in the bundle but {} in the schedule of its plan section: the "
                      "bundle contradicts its plan",
                      name, stated[i].key, stated[i].value, planned[i].value));
  return plan;
}

}  // namespace sparsecc
