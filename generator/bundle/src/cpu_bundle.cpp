// CPU executors' bundles (sparsecc/bundle/cpu_bundle.hpp).
#include "sparsecc/bundle/cpu_bundle.hpp"

#include <fmt/format.h>

#include <span>

#include "sparsecc/bundle/hines_bundle.hpp"
#include "sparsecc/bundle/spmm_bundle.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/common/version.hpp"

namespace sparsecc {

namespace {
// "sparsecc_cpu_" and 16 hex digits of FNV-1a 64 over `key`.
std::string digest_symbol(const std::string& key) {
  return fmt::format("sparsecc_cpu_{:016x}",
                     rt::fnv1a64(std::span(reinterpret_cast<const unsigned char*>(key.data()), key.size())));
}
}  // namespace

std::string cpu_spmm_symbol(const SpmmCpuPlan& plan, const CsrMatrix& a) {
  return digest_symbol(matrix_fingerprint(a) + to_json(plan).dump());
}

rt::Bundle make_cpu_spmm_bundle(const SpmmCpuPlan& plan, const CsrMatrix& a, const std::string& symbol,
                                std::string archive, const std::vector<double>& bias) {
  rt::Bundle b;
  rt::BundleMetadata& md = b.metadata;
  md.op = "spmm";
  md.target = "cpu";
  md.arch = plan.target.isa;
  md.kernel = symbol;
  md.m = plan.problem.m;
  md.k = plan.problem.k;
  md.n = plan.problem.n;
  md.nnz = a.nnz();
  md.n_mode = "fixed";
  md.dtype = std::string(dtype_name(plan.problem.dtype));  // f16 / bf16: fp32 accumulation
  md.accumulate = "f32";
  md.n_tile = std::min<std::int64_t>(plan.column_tile, plan.problem.n);
  md.block_rows = plan.panel_count();
  md.block_x = 1;
  md.bias = plan.problem.bias;
  md.relu = plan.problem.relu;
  md.values_mode = "baked";
  md.generator_version = kVersion;
  md.fingerprint = matrix_fingerprint(a);
  md.plan_summary = {{"panels", plan.panel_count()},
                     {"column_tile", md.n_tile},
                     {"lanes", plan.lanes},
                     {"rolled", plan.rolled},
                     {"cpu", plan.target.cpu}};
  b.objects.assign(archive.begin(), archive.end());
  b.bias.assign(bias.begin(), bias.end());
  b.reference = csr_reference_bytes(a);
  b.plan = to_json(plan).dump();
  return b;
}

SpmmCpuPlan cpu_spmm_bundle_plan(const rt::Bundle& bundle, const CsrMatrix& a, const std::string& name) {
  const rt::BundleMetadata& md = bundle.metadata;
  check_spmm_bundle_matrix(md, a, name);
  SpmmCpuPlan plan;
  try {
    plan = spmm_cpu_plan_from_json(nlohmann::json::parse(bundle.plan));
  } catch (const UsageError& e) {
    throw rt::BundleError(fmt::format("{}: section plan: {}", name, e.what()));
  } catch (const nlohmann::json::exception& e) {
    throw rt::BundleError(fmt::format("{}: section plan: not valid JSON: {}", name, e.what()));
  }
  if (const auto problems = check_cpu_plan(plan, a); !problems.empty())
    throw rt::BundleError(fmt::format("{}: section plan: not a valid plan for the bundle's matrix: {}", name,
                                      problems.front()));
  if (plan.panel_count() != md.block_rows || plan.problem.n != md.n || plan.problem.relu != md.relu ||
      dtype_name(plan.problem.dtype) != md.dtype || plan.problem.bias != md.bias ||
      std::min<std::int64_t>(plan.column_tile, plan.problem.n) != md.n_tile)
    throw rt::BundleError(fmt::format(
        "{}: the metadata contradicts its plan (n, dtype, panels, column tile or epilogue)", name));
  return plan;
}

std::string cpu_hines_symbol(const HinesCpuPlan& plan, const HinesSystem& system) {
  const std::vector<unsigned char> reference = hines_reference_bytes(system);
  return digest_symbol(fmt::format("{:016x}", rt::fnv1a64(reference)) + to_json(plan).dump());
}

rt::Bundle make_cpu_hines_bundle(const HinesCpuPlan& plan, const HinesSystem& system,
                                 const std::string& symbol, std::string archive) {
  rt::Bundle b;
  rt::BundleMetadata& md = b.metadata;
  md.op = "hines";
  md.target = "cpu";
  md.arch = plan.target.isa;
  md.kernel = symbol;
  md.dtype = std::string(dtype_name(plan.dtype));
  md.generator_version = kVersion;
  b.reference = hines_reference_bytes(system);
  md.fingerprint = fmt::format("{:016x}", rt::fnv1a64(b.reference));
  md.hines.rows = system.size();
  md.hines.cells = system.num_cells();
  md.hines.rhs = plan.rhs;
  md.hines.workspace_bytes = plan.workspace_elements() * static_cast<std::int64_t>(dtype_size(plan.dtype));
  std::int64_t full = 0;
  for (const HinesCpuGroup& g : plan.groups) full += g.width > 1 ? 1 : 0;
  md.plan_summary = {{"items", static_cast<std::int64_t>(plan.groups.size())},
                     {"lanes", plan.lanes},
                     {"shapes", static_cast<std::int64_t>(plan.shapes.size())},
                     {"vector_groups", full},
                     {"cpu", plan.target.cpu}};
  b.tables = plan.permutation();
  if (system.compartment_of.size() == static_cast<std::size_t>(system.size()))
    b.permutation = system.compartment_of;
  b.objects.assign(archive.begin(), archive.end());
  b.plan = to_json(plan).dump();
  rt::validate_bundle(b, "CPU Hines bundle");
  return b;
}

}  // namespace sparsecc
