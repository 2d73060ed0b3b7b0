// The command-line flags of SpMM planning, shared by `sparsecc` (compile, compile-model, tune) and
// `sparsecc_bench`, so that one spelling, one help text and one mapping to SpmmOptions serve every
// tool (as LLVM's CommandFlags.h does for llc and opt).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "sparsecc/inspector/spmm_inspector.hpp"

namespace sparsecc::flags {

struct SpmmPlanFlags {
  std::string values = "auto";  // baked | streamed | rolled | auto
  std::int32_t rows_per_block = 0;
  std::int32_t n_tile = 0;
  std::int32_t groups = 0;
  std::int32_t cols_per_thread = 0;
  std::int32_t step_lanes = 0;
  std::int32_t max_registers = 0;
  std::int32_t assembler_opt = -1;  // -1: automatic
  bool balanced = false;            // with none of the three row flags the inspector's rule decides
  bool equal_rows = false;
  bool clustered_rows = false;
  std::int32_t stage_dense = 0;
  std::string programmatic = "auto";  // auto | off | wait | trigger
  std::string accumulate = "f32";     // f32 | the dtype (f16 / bf16 plans)
  std::string blocklets = "auto";     // off | auto | BHxBW[:FILL]; auto is off for f32
  // Compressed plans (SpmmCompressedOptions); 0 / "auto": the rule.
  std::int32_t compressed_warps = 0, compressed_strips = 0, chunk_k = 0, splits = 0, stages = 0,
               kept_rounds = 0;
  std::string record_formats = "auto";     // auto, or a comma-separated list of bitmap, positions, dense
  std::string compressed_layout = "auto";  // auto | records | scatter
};

// The tiling, value-mode, row-split, staging, register and programmatic-launch flags.
void add_spmm_plan_flags(CLI::App* cmd, SpmmPlanFlags& f);
// --values and --programmatic alone (commands that take no tiling overrides).
void add_values_flag(CLI::App* cmd, SpmmPlanFlags& f);
void add_programmatic_flag(CLI::App* cmd, SpmmPlanFlags& f);
// The half-precision flags: --accumulate and --blocklets, and the compressed family's --warps, --strips,
// --chunk-k, --stages, --splits, --kept-rounds, --record-formats and --compressed-layout.
void add_half_flags(CLI::App* cmd, SpmmPlanFlags& f);

// The planner's options from the flags for a problem of `dtype`. Throws UsageError for flags that
// exclude each other or a bad --blocklets text.
SpmmOptions spmm_options(const SpmmPlanFlags& f, const std::string& dtype);

// The --arch word that asks for the live device's target (resolved by the tools: target_flags.hpp).
inline constexpr const char* kNativeArch = "native";

// --arch, checked against the target table (sparsecc/target/target.hpp) or kNativeArch.
CLI::Option* add_arch_flag(
    CLI::App* cmd, std::string& arch,
    const std::string& help = "GPU architecture of the cubin (PTX is included for others)");

}  // namespace sparsecc::flags
