#include "spmm_flags.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/file.hpp"
#include "sparsecc/target/target.hpp"

namespace sparsecc::flags {

void add_values_flag(CLI::App* cmd, SpmmPlanFlags& f) {
  cmd->add_option("--values", f.values,
                  "Weights as code literals (baked), read from an array (streamed), a loop over a step table "
                  "(rolled, fp32), compressed records decoded into tensor-core fragments (compressed, f16 / "
                  "bf16), or auto")
      ->check(CLI::IsMember({"baked", "streamed", "rolled", "compressed", "auto"}))
      ->capture_default_str();
}

void add_programmatic_flag(CLI::App* cmd, SpmmPlanFlags& f) {
  cmd->add_option(
         "--programmatic", f.programmatic,
         "Programmatic dependent launch (sm_90 on): wait (wait for the previous kernel), trigger (fp32: "
         "wait, and let the next kernel launch as each block row ends), off, or auto (trigger for fp32 "
         "kernels rolled or unrolled of at most 12k instructions, wait for the others)")
      ->check(CLI::IsMember({"auto", "off", "wait", "trigger"}))
      ->capture_default_str();
}

void add_spmm_plan_flags(CLI::App* cmd, SpmmPlanFlags& f) {
  add_values_flag(cmd, f);
  cmd->add_option("--rows-per-block", f.rows_per_block, "Rows of A per thread block (0: automatic)")
      ->check(CLI::Range(0, 64));
  cmd->add_option("--n-tile", f.n_tile, "Columns of C per thread group (0: automatic)")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--groups", f.groups, "Thread groups splitting K (0: automatic)")->check(CLI::Range(0, 32));
  cmd->add_option("--cols-per-thread", f.cols_per_thread,
                  "Columns of C a thread computes (0: automatic; 2 for fp32 needs a fixed even N)")
      ->check(CLI::Range(0, 2));
  cmd->add_option("--step-lanes", f.step_lanes,
                  "Rolled plans: lanes of a warp that take different steps of a row, 1, 2, 4, 8, 16 or 32 "
                  "(0: automatic, 32 / N rounded up to a power of two for a fixed N of at most 8, else 1)")
      ->check(CLI::IsMember({0, 1, 2, 4, 8, 16, 32}));
  cmd->add_option("--max-registers", f.max_registers,
                  "Register cap per thread for the assembler (0: automatic; PTX route)")
      ->check(CLI::Range(0, 255));
  cmd->add_option("--assembler-opt", f.assembler_opt,
                  "ptxas optimization level 0..3 (-1: automatic, which is 3)")
      ->check(CLI::Range(-1, 3));
  cmd->add_flag("--balanced", f.balanced, "Balance block rows by nonzeros instead of equal row panels");
  cmd->add_flag("--equal-rows", f.equal_rows,
                "Equal row panels even where they are uneven (default: balanced when the heaviest panel "
                "holds 35 % more nonzeros than the mean, fp32 unrolled plans; clustered for 32-row plans at "
                "N > 1024 where that cuts the loads of B by 10 %)");
  cmd->add_flag("--clustered-rows", f.clustered_rows,
                "Equal panels of rows regrouped so that a panel's rows share columns (fewer loads of B; "
                "fp32 unrolled plans)");
  cmd->add_option("--stage-dense", f.stage_dense,
                  "Copy B of the steps with at least this many nonzeros of their block row to shared memory "
                  "with cp.async at the start of each group (ASpT-style dense column segments; fp32 unrolled "
                  "plans; 0: none)")
      ->check(CLI::Range(0, 64));
  add_programmatic_flag(cmd, f);
}

void add_half_flags(CLI::App* cmd, SpmmPlanFlags& f) {
  cmd->add_option("--accumulate", f.accumulate,
                  "Accumulation of the unrolled path for f16 / bf16: f32, or the dtype (paired FMAs)")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--blocklets", f.blocklets,
                  "Dense tiles on tensor cores (f16 / bf16): off, auto (the inspector's cost estimate) or "
                  "BHxBW[:FILL] with BHxBW one of 16x8, 16x16, 8x8")
      ->capture_default_str();
  cmd->add_option("--warps", f.compressed_warps, "Compressed plans: warps a block (0: automatic)")
      ->check(CLI::Range(0, 16));
  cmd->add_option("--strips", f.compressed_strips, "Compressed plans: 16-row strips a warp (0: automatic)")
      ->check(CLI::Range(0, 4));
  cmd->add_option("--chunk-k", f.chunk_k,
                  "Compressed plans: columns of A a block stages at a time, a multiple of 64 (0: automatic)")
      ->check(CLI::Range(0, 16384));
  cmd->add_option("--stages", f.stages,
                  "Compressed plans: chunks a block holds in shared memory at once, 2..8 (0: as many as fit)")
      ->check(CLI::Range(0, 8));
  cmd->add_option(
         "--splits", f.splits,
         "Compressed plans: blocks (a thread-block cluster, sm_90 on; past 8 a non-portable one) splitting "
         "K, 1..16 (0: automatic)")
      ->check(CLI::Range(0, 16));
  cmd->add_option("--kept-rounds", f.kept_rounds,
                  "Compressed scatter plans: rounds of 32 list entries a warp loads at once and keeps "
                  "the places of for the zeros, 1..8 (0: automatic)")
      ->check(CLI::Range(0, 8));
  cmd->add_option(
         "--record-formats", f.record_formats,
         "Compressed plans: the record formats allowed, from bitmap, positions, dense (comma-separated; "
         "each record takes the cheapest), or auto")
      ->capture_default_str();
  cmd->add_option(
         "--compressed-layout", f.compressed_layout,
         "Compressed plans: records (each warp decodes its strips' records), scatter (each warp "
         "scatters its own list of nonzeros into its strips' operand tile), vector (a fixed N of 1..16: "
         "a warp a row, on CUDA cores), or auto")
      ->check(CLI::IsMember({"auto", "records", "scatter", "vector"}))
      ->capture_default_str();
}

SpmmOptions spmm_options(const SpmmPlanFlags& f, const std::string& dtype) {
  SpmmOptions o;
  o.rows_per_block = f.rows_per_block;
  o.n_tile = f.n_tile;
  o.groups = f.groups;
  o.cols_per_thread = f.cols_per_thread;
  o.step_lanes = f.step_lanes;
  o.max_registers = f.max_registers;
  if (f.assembler_opt >= 0) o.assembler_opt_level = f.assembler_opt;
  if (f.balanced + f.equal_rows + f.clustered_rows > 1)
    throw UsageError("--balanced, --equal-rows and --clustered-rows exclude each other");
  if (f.balanced) o.row_split = SpmmRowSplit::balanced;
  if (f.equal_rows) o.row_split = SpmmRowSplit::equal;
  if (f.clustered_rows) o.row_split = SpmmRowSplit::clustered;
  if (f.values != "auto") o.value_mode = parse_value_mode(f.values, "--values");
  o.stage_min_entries = f.stage_dense;
  o.accumulate = require_dtype(f.accumulate, "--accumulate", kSpmmDtypes);
  o.programmatic = parse_programmatic(f.programmatic, "--programmatic");
  set_blocklets(o, dtype == "f32" && f.blocklets == "auto" ? "off" : f.blocklets);
  o.compressed.warps = f.compressed_warps;
  o.compressed.strips_per_warp = f.compressed_strips;
  o.compressed.chunk_k = f.chunk_k;
  o.compressed.splits = f.splits;
  o.compressed.stages = f.stages;
  o.compressed.kept_rounds = f.kept_rounds;
  if (f.record_formats != "auto") {
    std::uint32_t bits = 0;
    for (const std::string_view word : split_fields(f.record_formats, true)) {
      const int code = word == "bitmap" ? 0 : word == "positions" ? 1 : word == "dense" ? 2 : -1;
      if (code < 0)
        throw UsageError(fmt::format("--record-formats: '{}' is not bitmap, positions or dense", word));
      bits |= 1u << code;
    }
    o.compressed.formats = bits;
  }
  if (f.compressed_layout != "auto")
    set_compressed_layout(o.compressed, f.compressed_layout);  // checked above
  return o;
}

CLI::Option* add_arch_flag(CLI::App* cmd, std::string& arch, const std::string& help) {
  // gpu_target's message names the known architectures.
  const CLI::Validator known(
      [](std::string& word) -> std::string {
        if (word == kNativeArch) return {};
        try {
          gpu_target(word);
          return {};
        } catch (const UsageError& e) {
          return fmt::format("{}, or {}: the live GPU's own figures", e.what(), kNativeArch);
        }
      },
      fmt::format("{{{},{}}}", fmt::join(known_gpu_archs(), ","), kNativeArch));
  return cmd
      ->add_option("--arch", arch, help + " (a row of `sparsecc targets`, or native: the live GPU's figures)")
      ->check(known)
      ->capture_default_str();
}

}  // namespace sparsecc::flags
