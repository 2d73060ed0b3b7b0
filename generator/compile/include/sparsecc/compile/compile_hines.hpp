// The Hines executor's route through the pipeline after planning: schedule (plan/hines_schedule),
// emit (emit/hines_cuda), compile (NVRTC). The bundle stage packs the result (bundle/hines_bundle).
#pragma once

#include <string>

#include "sparsecc/compile/nvrtc.hpp"
#include "sparsecc/emit/hines_cuda.hpp"
#include "sparsecc/plan/hines_plan.hpp"
#include "sparsecc/plan/hines_schedule.hpp"

namespace sparsecc {

struct CompiledHines {
  HinesSchedule schedule;
  EmittedHines emitted;
  CudaCompileResult code;  // cubin for options.arch and the PTX
};

// Throws UsageError for an invalid plan, CompileError when NVRTC rejects the module.
CompiledHines compile_hines(const HinesPlan& plan, const CudaCompileOptions& options = {});

}  // namespace sparsecc
