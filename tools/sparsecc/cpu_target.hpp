// --target for the CPU backend: `compile`, `compile-model` and `hines` build CPU executors through
// LLVM (sparsecc/llvm/cpu_pipeline.hpp) when it names a CPU target, and check them in process where
// this CPU runs their code. A sparsecc built without LLVM refuses the flag with the reason.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sparsecc/inspector/spmm_cpu_planner.hpp"
#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/neuron/hines.hpp"
#include "sparsecc/plan/spmm_plan.hpp"
#include "sparsecc/runtime/bundle.hpp"

namespace sparsecc::cli {

// Adds --target (x86-64-avx512, x86-64-avx2, native; empty: the GPU the command builds for).
CLI::Option* add_cpu_target_flag(CLI::App* cmd, std::string& target);

struct CpuExecutor {
  rt::Bundle bundle;
  std::string text;   // the report line
  std::string check;  // the in-process check's line ("" when this CPU cannot run the code)
  bool check_ok = true;
  nlohmann::json json;  // the report, with the check
  nlohmann::json plan;  // the plan
};

// The CPU SpMM executor of `a` for `problem` (fp32, fixed N) with the planner's `options`: plan,
// lower, compile, bundle, and the check against the fp64 reference. Throws UsageError for a problem
// or options the CPU planner refuses or a sparsecc without LLVM.
CpuExecutor compile_cpu_spmm(const CsrMatrix& a, const SpmmProblem& problem, const std::vector<double>& bias,
                             const std::string& target, const SpmmCpuOptions& options = {});

// `compile --target --db`: the planner's options of the tuning database's record for `a`, `problem`,
// this CPU model and the target's ISA (the automatic plan's without one); *how says which it took.
// Throws InputError for a database that cannot be read, UsageError without LLVM.
SpmmCpuOptions tuned_cpu_spmm_options(const std::string& db, const CsrMatrix& a, const SpmmProblem& problem,
                                      const std::string& target, std::string* how);

// The CPU Hines executor of `system` (f64 or f32, rhs right-hand sides), checked likewise.
CpuExecutor compile_cpu_hines(const HinesSystem& system, const std::string& dtype, std::int32_t rhs,
                              const std::string& target);

}  // namespace sparsecc::cli
