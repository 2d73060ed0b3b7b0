#include "sparsecc/bundle/spmm_bundle.hpp"

#include <fmt/format.h>

#include <cstring>
#include <stdexcept>
#include <tuple>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/version.hpp"
#include "sparsecc/inspector/spmm_inspector.hpp"
#include "section_bytes.hpp"

namespace sparsecc {

using section_bytes::append;
using section_bytes::take;

std::vector<unsigned char> csr_reference_bytes(const CsrMatrix& a) {
  std::vector<unsigned char> out;
  const std::uint64_t head[3] = {static_cast<std::uint64_t>(a.rows), static_cast<std::uint64_t>(a.cols),
                                 static_cast<std::uint64_t>(a.nnz())};
  append(out, head, 3);
  append(out, a.row_ptr.data(), a.row_ptr.size());
  append(out, a.col_idx.data(), a.col_idx.size());
  std::vector<float> values(a.values.begin(), a.values.end());
  append(out, values.data(), values.size());
  return out;
}

CsrMatrix csr_from_reference_bytes(std::span<const unsigned char> d, const std::string& name) {
  std::size_t at = 0;
  std::uint64_t head[3];
  take(d, at, head, 3, name, "header");
  const std::uint64_t limit = d.size();  // every count is bounded by the bytes present
  if (head[0] >= limit || head[1] > (std::uint64_t{1} << 31) || head[2] > limit)
    throw_at_byte(name, 0,
                  fmt::format("verification section: implausible shape {}x{} with {} nonzeros", head[0],
                              head[1], head[2]));
  CsrMatrix a;
  a.rows = static_cast<std::int64_t>(head[0]);
  a.cols = static_cast<std::int64_t>(head[1]);
  a.source_dtype = DType::f32;
  a.row_ptr.resize(head[0] + 1);
  take(d, at, a.row_ptr.data(), a.row_ptr.size(), name, "row offsets");
  a.col_idx.resize(head[2]);
  take(d, at, a.col_idx.data(), a.col_idx.size(), name, "column indices");
  std::vector<float> values(head[2]);
  take(d, at, values.data(), values.size(), name, "values");
  if (at != d.size())
    throw_at_byte(name, static_cast<std::int64_t>(at), "verification section: trailing bytes");
  a.values.assign(values.begin(), values.end());
  try {
    validate(a);
  } catch (const UsageError& e) {
    throw_at_byte(name, 0, fmt::format("verification section: {}", e.what()));
  }
  return a;
}

std::string matrix_fingerprint(const CsrMatrix& a) {
  return fmt::format("{:016x}", rt::fnv1a64(csr_reference_bytes(a)));
}

rt::BundleMetadata spmm_bundle_metadata(const SpmmPlan& plan, const CsrMatrix& a, const std::string& arch) {
  rt::BundleMetadata md;
  md.op = "spmm";
  md.m = plan.problem.m;
  md.k = plan.problem.k;
  md.n = plan.problem.n;
  md.nnz = a.nnz();
  md.n_mode = plan.problem.n_mode == SpmmNMode::fixed ? "fixed" : "runtime";
  md.dtype = dtype_name(plan.problem.dtype);
  if (plan.half()) {
    md.accumulate = dtype_name(plan.epilogue.accumulate);
    md.params = rt::kSpmmHalfParams;
    for (const auto& b : plan.layout.blocks)
      for (const auto& f : b.fragments)
        for (const std::int64_t e : f.entries) md.tile_nnz += e >= 0;
    md.fragment_words = plan.fragment_count() * 8 * plan.fragment_k();
  }
  md.n_tile = plan.block_columns();
  md.bias = plan.problem.bias;
  md.relu = plan.problem.relu;
  md.values_mode = to_string(plan.value_mode());
  md.arch = arch;
  md.programmatic_launch = plan.hints.programmatic && rt::arch_has_programmatic_launch(arch);
  md.kernel = plan.hints.kernel_name;
  md.block_rows = plan.block_rows();
  md.block_x = plan.layout.block_x;
  md.shared_bytes = plan.layout.shared_bytes;
  md.generator_version = kVersion;
  md.fingerprint = matrix_fingerprint(a);
  md.plan_summary = {{"rows_per_block", plan.layout.rows_per_block},
                     {"panel_rows", plan.layout.panel_rows},
                     {"n_tile", plan.layout.n_tile},
                     {"groups", plan.layout.groups},
                     {"cols_per_thread", plan.layout.cols_per_thread},
                     {"max_registers", plan.hints.max_registers},
                     {"assembler_opt_level", plan.hints.assembler_opt_level},
                     {"row_split", to_string(plan.layout.row_split)},
                     {"block_rows", plan.block_rows()},
                     {"loads", spmm_plan_loads(plan)},
                     {"estimated_registers", plan.hints.estimated_registers},
                     {"estimated_instructions", plan.hints.estimated_instructions}};
  if (plan.stage_slots() > 0) md.plan_summary["stage_min_entries"] = plan.stage_min_entries();
  if (plan.value_mode() == SpmmValueMode::rolled) md.plan_summary["step_lanes"] = plan.step_lanes();
  if (plan.half()) {
    md.plan_summary["n_tile"] = plan.layout.n_tile;  // threads per group; metadata n_tile counts columns
    md.plan_summary["blocklets"] = plan.blocklets().shape.empty() ? std::string("off")
                                   : fmt::format("{}:{}", plan.blocklets().shape, plan.blocklets().fill_threshold);
    md.plan_summary["fragments"] = plan.fragment_count();
    md.plan_summary["tiles"] = plan.blocklets().tiles;
    md.plan_summary["tile_explicit_zeros"] = plan.blocklets().explicit_zeros;
  }
  return md;
}

rt::Bundle make_spmm_bundle(const SpmmPlan& plan, const CsrMatrix& a, const std::string& arch,
                            std::vector<unsigned char> cubin, std::string ptx, std::vector<float> values,
                            std::vector<std::uint32_t> fragments, const std::vector<double>& bias) {
  rt::Bundle bundle;
  bundle.metadata = spmm_bundle_metadata(plan, a, arch);
  bundle.cubin = std::move(cubin);
  bundle.ptx = std::move(ptx);
  bundle.values = std::move(values);
  bundle.fragments = std::move(fragments);
  bundle.bias.assign(bias.begin(), bias.end());
  bundle.reference = csr_reference_bytes(a);
  return bundle;
}

void check_spmm_bundle_matrix(const rt::BundleMetadata& md, const CsrMatrix& a, const std::string& name) {
  for (const auto& [key, stated, actual, what] :
       {std::tuple{"m", md.m, a.rows, "rows"}, {"k", md.k, a.cols, "columns"}, {"nnz", md.nnz, a.nnz(), "nonzeros"}})
    if (stated != actual)
      throw rt::BundleError(fmt::format("{}: metadata key '{}' is {} but the bundle's matrix (its verification section) has {} {}",
                                        name, key, stated, actual, what));
}

SpmmPlan replan_spmm_bundle(const rt::BundleMetadata& md, const CsrMatrix& a, const std::string& name) {
  check_spmm_bundle_matrix(md, a, name);
  // Throws UsageError (or nlohmann::json::exception) on a summary it cannot plan from.
  const auto replan = [&] {
    SpmmProblem problem;
    problem.m = md.m;
    problem.k = md.k;
    problem.n = md.n;
    problem.n_mode = md.n_mode == "fixed" ? SpmmNMode::fixed : SpmmNMode::runtime;
    problem.bias = md.bias;
    problem.relu = md.relu;
    problem.dtype = require_dtype(md.dtype, "dtype", kSpmmDtypes);
    SpmmOptions o;
    if (problem.dtype != DType::f32) {
      o.accumulate = require_dtype(md.accumulate, "accumulate", kSpmmDtypes);
      // The configuration recorded ("off" or "16x8:0.5"), forced: that reproduces an automatic choice.
      set_blocklets(o, md.plan_summary.value("blocklets", std::string("off")));
    }
    const auto& s = md.plan_summary;
    // The panel rows, not the tallest block row: a balanced split cuts its block rows from panels of
    // panel_rows rows and may make one up to twice as tall.
    o.rows_per_block = s.value("panel_rows", s.value("rows_per_block", 0));
    o.n_tile = s.value("n_tile", 0);
    o.groups = s.value("groups", 0);
    o.cols_per_thread = s.value("cols_per_thread", 0);
    o.row_split = parse_row_split(s.value("row_split", std::string("equal")), "bundle row_split");
    o.value_mode = parse_value_mode(md.values_mode, "bundle values_mode");
    o.stage_min_entries = s.value("stage_min_entries", 0);
    // Rolled bundles written before step lanes existed have none.
    if (o.value_mode == SpmmValueMode::rolled) o.step_lanes = s.value("step_lanes", 1);
    o.kernel_name = md.kernel;
    return plan_spmm(a, problem, o);
  };
  SpmmPlan plan;
  try {
    plan = replan();
  } catch (const UsageError& e) {
    throw rt::BundleError(fmt::format("{}: its plan_summary does not plan its matrix: {}", name, e.what()));
  } catch (const nlohmann::json::exception& e) {
    throw rt::BundleError(fmt::format("{}: its plan_summary does not plan its matrix: {}", name, e.what()));
  }
  // Everything the code contract binds, but the values (the re-plan packs its own).
  const auto stated = rt::spmm_contract(md, 0);
  const auto replanned = rt::spmm_contract(spmm_bundle_metadata(plan, a, md.arch), 0);
  for (std::size_t i = 0; i < stated.size(); ++i)
    if (stated[i].value != replanned[i].value)
      throw rt::BundleError(fmt::format("{}: {} is {} in the metadata but re-planning the bundle's matrix from its "
                                        "plan_summary gives {}: the metadata contradicts its plan",
                                        name, stated[i].key, stated[i].value, replanned[i].value));
  return plan;
}

}  // namespace sparsecc
