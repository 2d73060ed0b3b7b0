// The planner of CPU Hines plans (sparsecc/plan/hines_cpu_plan.hpp): cells of one shape solved side
// by side, one a SIMD lane.
#pragma once

#include <cstdint>

#include "sparsecc/common/dtype.hpp"
#include "sparsecc/neuron/hines.hpp"
#include "sparsecc/plan/hines_cpu_plan.hpp"
#include "sparsecc/target/target.hpp"

namespace sparsecc {

// Cells of identical shape (the same parent structure relative to the cell's first row) form a
// shape, numbered in the order of their first cell; each shape's cells, in order, fill groups of the
// target's lanes of `dtype` (vector_bits / 64 for f64, / 32 for f32), and the cells left over form
// groups of width 1. The full groups of every shape come first (each then starts at a multiple of
// the lanes), then the width-1 groups. Throws UsageError for a dtype other than f64 or f32, rhs < 1,
// or a system that is not a valid post-order forest.
HinesCpuPlan plan_hines_cpu(const HinesSystem& system, const CpuTarget& target, DType dtype,
                            std::int32_t rhs);

}  // namespace sparsecc
