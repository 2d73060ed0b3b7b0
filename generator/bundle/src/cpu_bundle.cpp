// CPU executors' bundles (sparsecc/bundle/cpu_bundle.hpp).
#include "sparsecc/bundle/cpu_bundle.hpp"

#include <fmt/format.h>

#include <span>

#include "sparsecc/bundle/spmm_bundle.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/common/version.hpp"

namespace sparsecc {

std::string cpu_spmm_symbol(const SpmmCpuPlan& plan, const CsrMatrix& a) {
  const std::string key = matrix_fingerprint(a) + to_json(plan).dump();
  return fmt::format("sparsecc_cpu_{:016x}",
                     rt::fnv1a64(std::span(reinterpret_cast<const unsigned char*>(key.data()), key.size())));
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
  md.dtype = "f32";
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
      plan.problem.bias != md.bias || std::min<std::int64_t>(plan.column_tile, plan.problem.n) != md.n_tile)
    throw rt::BundleError(fmt::format("{}: the metadata contradicts its plan (n, panels, column tile or epilogue)",
                                      name));
  return plan;
}

}  // namespace sparsecc
