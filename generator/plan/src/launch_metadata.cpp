#include "sparsecc/plan/launch_metadata.hpp"

#include <fmt/format.h>

#include "sparsecc/common/version.hpp"
#include "sparsecc/plan/spmm_compressed.hpp"

namespace sparsecc {

rt::BundleMetadata spmm_launch_metadata(const SpmmPlan& plan, const CsrMatrix& a, const GpuTarget& target) {
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
  md.arch = target.arch;
  md.programmatic_launch = plan.hints.programmatic && target.programmatic_launch;
  md.kernel = plan.hints.kernel_name;
  md.block_rows = plan.block_rows();
  md.block_x = plan.layout.block_x;
  md.shared_bytes = plan.layout.shared_bytes;
  md.generator_version = kVersion;
  md.conv = plan.problem.conv;
  if (md.conv) md.params = rt::kConvParams;
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
  if (const SpmmCompressedBody* c = plan.compressed()) {
    // The stream's shape (rt::CompressedShape), which the runtime walks the stream with; the keys of
    // the block-row families do not describe these blocks.
    const rt::CompressedShape shape = spmm_compressed_shape(plan);
    md.tile_nnz = md.nnz;
    md.fragment_words = c->stream_words;
    md.plan_summary = {{"family", "compressed"},
                       {"row_blocks", shape.row_blocks},
                       {"chunks", shape.chunks},
                       {"splits", shape.splits},
                       {"strips", shape.strips},
                       {"chunk_k", shape.chunk_k},
                       {"stage_bytes", shape.stage_bytes},
                       {"scatter", shape.scatter ? (shape.warp_lists ? 2 : 1) : 0},
                       {"warps", c->warps},
                       {"stages", c->stages},
                       {"rows_per_row_block", plan.layout.rows_per_block},
                       {"records_bitmap", c->records[0]},
                       {"records_positions", c->records[1]},
                       {"records_dense", c->records[2]},
                       {"max_registers", plan.hints.max_registers},
                       {"assembler_opt_level", plan.hints.assembler_opt_level}};
    if (shape.vector) md.plan_summary["vector"] = 1;
    return md;
  }
  if (plan.stage_slots() > 0) md.plan_summary["stage_min_entries"] = plan.stage_min_entries();
  if (plan.value_mode() == SpmmValueMode::rolled) md.plan_summary["step_lanes"] = plan.step_lanes();
  if (plan.half()) {
    md.plan_summary["n_tile"] = plan.layout.n_tile;  // threads per group; metadata n_tile counts columns
    md.plan_summary["blocklets"] =
        plan.blocklets().shape.empty()
            ? std::string("off")
            : fmt::format("{}:{}", plan.blocklets().shape, plan.blocklets().fill_threshold);
    md.plan_summary["fragments"] = plan.fragment_count();
    md.plan_summary["tiles"] = plan.blocklets().tiles;
    md.plan_summary["tile_explicit_zeros"] = plan.blocklets().explicit_zeros;
  }
  return md;
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
  md.hines.launches = schedule.launches;  // one launch record type, the runtime's
  return md;
}

}  // namespace sparsecc
