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
// "sparsecc_cpu_" and 16 hex digits of FNV-1a 64 over the fingerprint and the plan's JSON.
std::string digest_symbol(const std::string& fingerprint, const std::string& plan) {
  const std::string key = fingerprint + plan;
  return fmt::format("sparsecc_cpu_{:016x}",
                     rt::fnv1a64(std::span(reinterpret_cast<const unsigned char*>(key.data()), key.size())));
}

// What every CPU bundle has: op, target, dtype, the verification section and its fingerprint, the
// plan, and the symbol prefix made from them.
rt::Bundle cpu_bundle(const char* op, const CpuTarget& target, DType dtype,
                      std::vector<unsigned char> reference, std::string plan) {
  rt::Bundle b;
  rt::BundleMetadata& md = b.metadata;
  md.op = op;
  md.target = "cpu";
  md.arch = target.isa;
  md.dtype = std::string(dtype_name(dtype));
  md.generator_version = kVersion;
  b.reference = std::move(reference);
  md.fingerprint = fmt::format("{:016x}", rt::fnv1a64(b.reference));
  md.kernel = digest_symbol(md.fingerprint, plan);
  b.plan = std::move(plan);
  return b;
}
}  // namespace

std::string cpu_spmm_symbol(const SpmmCpuPlan& plan, const CsrMatrix& a) {
  return digest_symbol(matrix_fingerprint(a), to_json(plan).dump());
}

rt::Bundle make_cpu_spmm_bundle(const SpmmCpuPlan& plan, const CsrMatrix& a,
                                const std::vector<double>& bias) {
  rt::Bundle b =
      cpu_bundle("spmm", plan.target, plan.problem.dtype, csr_reference_bytes(a), to_json(plan).dump());
  rt::BundleMetadata& md = b.metadata;
  md.m = plan.problem.m;
  md.k = plan.problem.k;
  md.n = plan.problem.n;
  md.nnz = a.nnz();
  md.n_mode = "fixed";
  md.accumulate = "f32";  // f16 / bf16 executors accumulate in fp32 too
  md.n_tile = std::min<std::int64_t>(plan.column_tile, plan.problem.n);
  md.block_rows = plan.panel_count();
  md.block_x = 1;
  md.bias = plan.problem.bias;
  md.relu = plan.problem.relu;
  md.values_mode = "baked";
  md.plan_summary = {{"panels", plan.panel_count()},
                     {"column_tile", md.n_tile},
                     {"lanes", plan.lanes},
                     {"rolled", plan.rolled},
                     {"cpu", plan.target.cpu}};
  b.bias.assign(bias.begin(), bias.end());
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

rt::Bundle make_cpu_hines_bundle(const HinesCpuPlan& plan, const HinesSystem& system) {
  rt::Bundle b =
      cpu_bundle("hines", plan.target, plan.dtype, hines_reference_bytes(system), to_json(plan).dump());
  rt::BundleMetadata& md = b.metadata;
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
  return b;
}

}  // namespace sparsecc
