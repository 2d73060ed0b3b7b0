// The pipeline driver: one entry point per operation that runs plan -> emit -> compile -> bundle for
// a matrix (or a Hines system) and a target, and returns everything it made as an artifact with a
// report. The tools (sparsecc, sparsecc_bench), the tuner and the model compiler call these instead
// of wiring the stages themselves.
//
// Compile cost: before compiling, the driver estimates each step's time from the plan
// (estimate_spmm_compile). A step expected to take longer than a second prints a progress line
// through the request's progress sink; a CUDA C++ compile expected to take longer than
// `max_cuda_seconds` is not started silently: by `long_cuda` it is refused with the estimate and the
// reason (UsageError), or the PTX route is taken instead (fp32 unrolled plans), or it runs as asked.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sparsecc/compile/compile_hines.hpp"
#include "sparsecc/compile/nvrtc.hpp"
#include "sparsecc/compile/resource_usage.hpp"
#include "sparsecc/emit/emitted_kernel.hpp"
#include "sparsecc/inspector/hines_planner.hpp"
#include "sparsecc/inspector/spmm_inspector.hpp"
#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/neuron/hines.hpp"
#include "sparsecc/plan/hines_plan.hpp"
#include "sparsecc/plan/spmm_plan.hpp"
#include "sparsecc/runtime/bundle.hpp"
#include "sparsecc/target/target.hpp"

namespace sparsecc::pipeline {

// Progress of the steps that run longer than a second: called with the step's name, the fraction done
// (0 at the start, 1 at the end) and the estimated seconds left (negative: unknown).
using ProgressSink = std::function<void(const std::string& step, double fraction, double seconds_left)>;

// What to do with a CUDA C++ compile whose estimate exceeds max_cuda_seconds.
enum class LongCompile {
  refuse,    // UsageError with the estimate and the way out (--emit ptx, or --allow-long-compile)
  take_ptx,  // emit PTX instead where the plan allows it (fp32 unrolled), else refuse
  allow,     // compile as asked
};

struct StepCost {
  std::string step;       // "plan", "emit", "compile" (NVRTC / nvJitLink), "bundle"
  double estimated = -1;  // seconds, before the step (-1: not estimated)
  double seconds = 0;     // measured
};

struct SpmmRequest {
  SpmmProblem problem;                 // m, k, n, N mode, bias, ReLU, dtype (m, k must match the matrix)
  SpmmOptions options;                 // the planner's options (tiling overrides, value mode, blocklets, ...)
  std::optional<KernelLanguage> emit;  // empty: emitter_default(problem)
  std::vector<std::string> ptxas;      // extra ptxas options ("-O1", ...), without -Xptxas=
  std::vector<double> bias;            // one value per row when problem.bias, else empty
  LongCompile long_cuda = LongCompile::refuse;
  double max_cuda_seconds = 60;
  ProgressSink progress;         // empty: no progress lines
  bool bundle = true;            // false: stop after compile (no bundle in the artifact)
  std::string name;              // the compile's label in logs; empty: the plan's kernel name
  unsigned compile_threads = 0;  // PTX route: modules assembled at once (0: one per hardware thread)
};

struct SpmmReport {
  std::string matrix;  // a name for the text (the file, or the problem's name)
  std::int64_t rows = 0, cols = 0, nnz = 0;
  std::string
      chosen_by;  // how the options were chosen ("automatic plan", a tuning record, ...), may be empty
  std::vector<StepCost> steps;
  std::string emit_note;    // why the emitter differs from the request (take_ptx), else empty
  std::string family_note;  // compile_spmm: the executor family and whether it was asked for or the rule's
  // The report as the user reads it (the lines `sparsecc compile` prints) and as JSON (every figure).
  std::string text(const struct SpmmArtifact& artifact) const;
  nlohmann::json json(const struct SpmmArtifact& artifact) const;
};

struct SpmmArtifact {
  GpuTarget target;
  SpmmPlan plan;
  EmittedKernel kernel;
  CudaCompileResult compiled;
  ResourceUsage usage;
  std::optional<rt::Bundle> bundle;  // with request.bundle
  SpmmReport report;
};

// The emitter a request takes without --emit: PTX for fp32, CUDA C++ for f16 / bf16.
KernelLanguage emitter_default(const SpmmProblem& problem);

// Estimated seconds of emitting and compiling `plan` in `language` on this machine's cores.
struct CompileEstimate {
  double emit = 0, compile = 0;
};
CompileEstimate estimate_spmm_compile(const SpmmPlan& plan, KernelLanguage language);
// Estimated seconds of planning A (linear in its nonzeros: the inspection, and the census of
// compressed plans).
double estimate_spmm_plan(const CsrMatrix& a);
// Estimated seconds of packing a bundle of `bytes` (the bundle step: its sections copied and
// checked) and of writing one (write_bundle_file: serialized, checksummed, written, renamed).
double estimate_bundle_pack(std::int64_t bytes);
double estimate_bundle_write(std::int64_t bytes);
// The bytes a bundle's sections hold.
std::int64_t bundle_section_bytes(const rt::Bundle& bundle);
// write_bundle (sparsecc/bundle/write_bundle.hpp) as a step: with a sink, progress lines where the
// estimate passes a second.
void write_bundle_file(const std::string& path, const rt::Bundle& bundle, const ProgressSink& progress);

// plan_spmm -> check_plan -> emit -> compile -> (bundle) for `a` on `target`. Throws UsageError for
// options the planner refuses or a refused long compile, std::runtime_error when the planner's plan
// fails check_plan, CompileError when NVRTC / nvJitLink fail. request.problem and request.options
// give the plan; the rest of the request the later steps.
SpmmArtifact compile_spmm(const CsrMatrix& a, const SpmmRequest& request, const GpuTarget& target);
// The same from a plan made already (a tuner's candidate): emit -> compile -> (bundle). `steps` are
// the costs of the steps before (the plan's), carried into the report.
SpmmArtifact compile_spmm_plan(SpmmPlan plan, const CsrMatrix& a, const SpmmRequest& request,
                               const GpuTarget& target, std::vector<StepCost> steps = {});

struct HinesRequest {
  std::int32_t rhs = 1;
  std::string dtype = "f64";
  HinesOptions options;
  bool compile = true;  // false: plan only (no schedule, code or bundle)
  ProgressSink progress;
};

struct HinesArtifact {
  GpuTarget target;
  HinesPlan plan;
  std::optional<CompiledHines> compiled;  // with request.compile
  std::optional<rt::Bundle> bundle;       // with request.compile
  std::vector<StepCost> steps;
  std::string plan_text() const;     // the planner's summary line
  std::string compile_text() const;  // the bundle's summary line (empty without compile)
  nlohmann::json json() const;
};

// plan_hines -> check_hines_plan -> schedule -> emit -> compile -> bundle for `system` on `target`.
// Throws std::runtime_error when the planner's plan fails check_hines_plan.
HinesArtifact compile_hines(const HinesSystem& system, const HinesRequest& request, const GpuTarget& target);
// The same from a plan made already (a tuner's candidate): schedule -> emit -> compile -> bundle.
HinesArtifact compile_hines_plan(HinesPlan plan, const HinesSystem& system, const GpuTarget& target,
                                 const ProgressSink& progress = {}, std::vector<StepCost> steps = {});

}  // namespace sparsecc::pipeline
