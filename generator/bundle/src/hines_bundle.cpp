#include "sparsecc/bundle/hines_bundle.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "section_bytes.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/common/version.hpp"
#include "sparsecc/inspector/hines_planner.hpp"

namespace sparsecc {

namespace {

using section_bytes::append;
using section_bytes::take;

}  // namespace

std::vector<unsigned char> hines_reference_bytes(const HinesSystem& s) {
  std::vector<unsigned char> out;
  const bool passive = !s.cap_over_dt.empty();
  const std::uint64_t head[3] = {static_cast<std::uint64_t>(s.size()), static_cast<std::uint64_t>(s.num_cells()),
                                 passive ? 1u : 0u};
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
                  fmt::format("verification section: implausible header ({} rows, {} cells, passive {})", head[0],
                              head[1], head[2]));
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
  if (at != d.size()) throw_at_byte(name, static_cast<std::int64_t>(at), "verification section: trailing bytes");
  if (const auto problems = validate_hines(s); !problems.empty())
    throw_at_byte(name, 0, fmt::format("verification section: {}", problems.front()));
  if (s.cell_offsets.front() != 0 || s.cell_offsets.back() != static_cast<std::int32_t>(n) ||
      !std::is_sorted(s.cell_offsets.begin(), s.cell_offsets.end()))
    throw_at_byte(name, 0, "verification section: cell offsets do not cover the rows");
  return s;
}

rt::BundleMetadata hines_launch_metadata(const HinesPlan& plan, const HinesSchedule& schedule) {
  rt::BundleMetadata md;
  md.op = "hines";
  md.dtype = plan.problem.dtype;
  md.kernel = plan.kernel_name;
  md.hines.rows = plan.problem.n;
  md.hines.cells = plan.problem.cells;
  md.hines.rhs = plan.problem.rhs;
  md.hines.workspace_bytes = schedule.workspace_bytes();
  for (const HinesLaunch& l : schedule.launches) {
    rt::KernelLaunch k{l.kernel, l.grid, l.block, l.shared_bytes, {}};
    for (const HinesKernelArg& a : l.args) k.args.push_back({a.buffer, a.value});
    md.hines.launches.push_back(std::move(k));
  }
  return md;
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
  if (system.compartment_of.size() == static_cast<std::size_t>(system.size())) b.permutation = system.compartment_of;
  b.cubin = std::move(cubin);
  b.ptx = std::move(ptx);
  rt::validate_bundle(b, "Hines bundle");
  return b;
}

HinesPlan replan_hines_bundle(const rt::BundleMetadata& md, const HinesSystem& s, const std::string& name) {
  if (s.size() != md.hines.rows || s.num_cells() != md.hines.cells)
    throw rt::BundleError(fmt::format("{}: metadata hines.rows and hines.cells are {} and {} but the bundle's system (its "
                                      "verification section) has {} rows in {} cells",
                                      name, md.hines.rows, md.hines.cells, s.size(), s.num_cells()));
  const auto& sum = md.plan_summary;
  HinesPlan plan;
  std::int64_t base_size = -1;
  try {
    HinesOptions o;
    o.decomposition = sum.value("decomposition", std::string("fine")) == "minimal" ? HinesDecomposition::minimal
                                                                                    : HinesDecomposition::fine;
    o.k = std::max(2, sum.value("k", 3));
    o.k_large = std::max(2, sum.value("k_large", o.k));
    o.depth = sum.value("depth", -1);
    o.code = sum.value("mode", std::string("tables"));
    plan = plan_hines(s, md.hines.rhs, md.dtype, o);
    base_size = sum.value("base_size", std::int64_t{-1});
  } catch (const UsageError& e) {
    throw rt::BundleError(fmt::format("{}: its plan_summary does not plan its system: {}", name, e.what()));
  } catch (const nlohmann::json::exception& e) {
    throw rt::BundleError(fmt::format("{}: its plan_summary does not plan its system: {}", name, e.what()));
  }
  if (plan.base_size() != base_size)
    throw rt::BundleError(fmt::format("{}: plan_summary.base_size is {} but re-planning the bundle's system gives {}", name,
                                      base_size, plan.base_size()));
  return plan;
}

}  // namespace sparsecc
