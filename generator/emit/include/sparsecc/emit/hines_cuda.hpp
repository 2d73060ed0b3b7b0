// The Hines emitter: renders templates/hines_edd.cu for one plan's schedule, with the arithmetic
// type, R, the block kernel's thread count and the level constants (first block level, block
// levels, segment stride, workspace offsets of every level) compiled in.
#pragma once

#include <string>
#include <vector>

#include "sparsecc/plan/hines_plan.hpp"
#include "sparsecc/plan/hines_schedule.hpp"

namespace sparsecc {

struct EmittedHines {
  std::string source;                // CUDA C++, one module
  std::vector<std::string> kernels;  // the entries the schedule launches
};

// Throws UsageError when the schedule does not belong to the plan (R, precision or depth differ).
EmittedHines emit_hines_cuda(const HinesPlan& plan, const HinesSchedule& schedule,
                             const std::string& template_dir = {});

}  // namespace sparsecc
