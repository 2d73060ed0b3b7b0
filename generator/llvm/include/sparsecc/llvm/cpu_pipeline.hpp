// The pipeline driver of CPU executors: plan -> emit (LLVM IR) -> compile (objects) -> bundle for a
// matrix and a CPU target, returning the artifact with a report, as compile_spmm does for a GPU
// (sparsecc/pipeline/pipeline.hpp). The CLI (`compile`, `compile-model` with --target), the bench
// and the tests call it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sparsecc/inspector/spmm_cpu_planner.hpp"
#include "sparsecc/llvm/cpu_compile.hpp"
#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/neuron/hines.hpp"
#include "sparsecc/plan/hines_cpu_plan.hpp"
#include "sparsecc/plan/spmm_cpu_plan.hpp"
#include "sparsecc/runtime/bundle.hpp"
#include "sparsecc/target/target.hpp"

namespace sparsecc {

struct CpuSpmmRequest {
  SpmmProblem problem;       // f32, f16 or bf16, fixed N; m, k must be the matrix's
  SpmmCpuOptions options;    // the planner's options
  std::vector<double> bias;  // m values when problem.bias, else empty
  int opt_level = 2;         // LLVM's code generation level
  int threads = 0;           // compile threads (0: the target's cores)
};

struct CpuSpmmArtifact {
  SpmmCpuPlan plan;
  std::string symbol;                // the entry is {symbol}_tile
  std::vector<std::string> objects;  // relocatable objects (ELF)
  rt::Bundle bundle;                 // target "cpu", the objects as a static archive
  CpuCompileStats stats;
  double plan_seconds = 0, emit_seconds = 0;
  std::string text() const;  // the line `sparsecc compile` prints
  nlohmann::json json() const;
};

// plan_spmm_cpu -> emit_spmm_llvm_modules (kCpuModulesPerThread a compile thread) ->
// compile_cpu_objects -> make_cpu_spmm_bundle. Throws UsageError for a problem or options the
// planner refuses, std::runtime_error when LLVM fails.
CpuSpmmArtifact compile_spmm_cpu(const CsrMatrix& a, const CpuSpmmRequest& request, const CpuTarget& target);

// The artifact's code checked in this process (its objects linked by the JIT, the code a deployment
// links): C from random B in [-1, 1) (seeded; rounded to the dtype for half plans), C poisoned with
// NaN before the run (0xFFFF for half plans), against the fp64 reference of A's values and B as the
// code takes them (rounded to the dtype); max |C - C_ref| / max |C_ref| (0 for an all-zero
// reference) and the elements left unwritten. Throws UsageError when this CPU cannot run the
// target's code.
struct CpuSpmmCheck {
  double rel_error = 0;
  std::int64_t unwritten = 0;
  double tolerance = 0;  // spmm_tolerance(dtype, f32, the longest row)
  bool ok() const { return unwritten == 0 && rel_error <= tolerance; }
};
CpuSpmmCheck check_spmm_cpu(const CpuSpmmArtifact& artifact, const CsrMatrix& a,
                            const std::vector<double>& bias, std::uint64_t seed = 1);

struct CpuHinesArtifact {
  HinesCpuPlan plan;
  std::string symbol;                // the entry is {symbol}_solve
  std::vector<std::string> objects;  // relocatable objects (ELF)
  rt::Bundle bundle;                 // target "cpu"
  CpuCompileStats stats;
  double plan_seconds = 0, emit_seconds = 0;
  std::string text() const;
  nlohmann::json json() const;
};

// plan_hines_cpu -> emit_hines_llvm_modules -> compile_cpu_objects -> make_cpu_hines_bundle, on
// `threads` compile threads (0: the target's cores). Throws UsageError for a dtype other than f64 /
// f32, rhs < 1 or an invalid system; std::runtime_error when LLVM fails.
CpuHinesArtifact compile_hines_cpu(const HinesSystem& system, DType dtype, std::int32_t rhs,
                                   const CpuTarget& target, int opt_level = 2, int threads = 0);

// The artifact's code checked in this process: one step on realistic right-hand sides
// (random_step_rhs; random ones for a system without passive-step terms), x poisoned with NaN, in
// the executor's row order, against the accuracy yardstick (hines_accuracy). Throws UsageError when
// this CPU cannot run the target's code.
struct CpuHinesCheck {
  double rel_error = 0, tolerance = 0;
  bool ok() const { return rel_error <= tolerance; }
};
CpuHinesCheck check_hines_cpu(const CpuHinesArtifact& artifact, const HinesSystem& system,
                              std::uint64_t seed = 1);

}  // namespace sparsecc
