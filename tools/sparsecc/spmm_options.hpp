// Command-line options shared by the SpMM sub-commands, and turning them into a problem and a plan.
#pragma once

#include <string>
#include <vector>

#include "cli.hpp"
#include "sparsecc/inspector/spmm_inspector.hpp"
#include "sparsecc/io/load.hpp"

namespace sparsecc::cli {

struct SpmmArgs {
  std::string matrix;
  std::int64_t n = 0;
  bool runtime_n = false;
  std::string bias;
  bool relu = false;
  std::string values = "auto";  // baked | streamed | auto
  std::uint64_t seed = 1;
  std::int32_t rows_per_block = 0;
  std::int32_t n_tile = 0;
  std::int32_t groups = 0;
  std::int32_t cols_per_thread = 0;
  std::int32_t step_lanes = 0;
  std::int32_t max_registers = 0;
  std::int32_t assembler_opt = -1;  // -1: automatic
  bool balanced = false;    // --balanced; with neither flag the inspector's rule decides
  bool equal_rows = false;  // --equal-rows
  bool clustered_rows = false;  // --clustered-rows
  std::int32_t stage_dense = 0;  // --stage-dense
  std::string dtype = "f32";       // f32 | f16 | bf16
  std::string accumulate = "f32";  // f32 | the dtype
  std::string blocklets = "auto";  // off | auto | BHxBW[:FILL]; auto is off for f32
  std::string programmatic = "auto";  // auto | off | wait | trigger
};

// Registers the options on `cmd`.
void add_spmm_options(CLI::App* cmd, SpmmArgs& args);

// The inspector's options from the command line (value mode, tiling overrides, accumulation,
// blocklets). Throws UsageError for a bad --blocklets text.
SpmmOptions spmm_options(const SpmmArgs& args);

// The matrix FILE[:TENSOR] (load_matrix), or an InputError naming the file when an SpMM executor cannot
// take its shape (require_spmm_matrix) or a weight does not fit `dtype` (check_values_fit).
CsrMatrix load_spmm_matrix(const std::string& spec, const LoadOptions& options, const std::string& dtype);

// The bias vector FILE[:TENSOR], one value per row: InputError naming the file when the count differs.
std::vector<double> load_bias(const std::string& spec, std::int64_t rows);

}  // namespace sparsecc::cli
