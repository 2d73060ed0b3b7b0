// Command-line options shared by the SpMM sub-commands: the problem's flags here, the planner's in
// the shared flags library (tools/flags/spmm_flags.hpp).
#pragma once

#include <string>

#include "cli.hpp"
#include "sparsecc/pipeline/pipeline.hpp"
#include "spmm_flags.hpp"

namespace sparsecc::cli {

struct SpmmArgs : flags::SpmmPlanFlags {
  std::string matrix;
  std::int64_t n = 0;
  bool runtime_n = false;
  std::string bias;
  bool relu = false;
  std::uint64_t seed = 1;
  std::string dtype = "f32";  // f32 | f16 | bf16
};

using pipeline::load_bias;
using pipeline::load_spmm_matrix;

// Registers the matrix, problem and plan options on `cmd`.
void add_spmm_options(CLI::App* cmd, SpmmArgs& args);

// The inspector's options from the command line (flags::spmm_options for the args' dtype).
SpmmOptions spmm_options(const SpmmArgs& args);

// The progress lines of the pipeline's long steps on stderr: redrawn on a terminal, every quarter
// otherwise.
pipeline::ProgressSink progress_printer();

// --allow-long-compile, and the rule it sets with --emit: an automatic emitter may take the PTX route
// for a CUDA C++ compile of minutes; an explicit one is refused with the reason unless allowed.
void add_allow_long_compile_flag(CLI::App* cmd, bool& allow);
pipeline::LongCompile long_compile_rule(bool allow, bool emit_given);

}  // namespace sparsecc::cli
