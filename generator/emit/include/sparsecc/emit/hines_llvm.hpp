// The LLVM emitter of CPU Hines plans (sparsecc/plan/hines_cpu_plan.hpp): textual LLVM IR (LLVM 14,
// typed pointers), straight-line code with each shape's tree baked in. A group's arrays are vectors
// of its width (<W x double> or <W x float>, scalars at width 1) at constant offsets from the group's
// base; the arithmetic is the plan's (forward: reciprocal pivot, fused factor and forward
// elimination; backward substitution), operation for operation, so the code matches
// interpret_hines_cpu bit for bit. With R > 1 a node's R right-hand sides of W lanes are R vectors
// of consecutive values, and the node's coefficients are shuffled to their lanes.
//
// A shape and width's code is cut into part functions of at most kCpuHinesPartNodes nodes (forward
// parts, then backward parts; values cross a part's boundary through the workspace and x) and basic
// blocks of kCpuHinesBlockNodes nodes: the code generator's time grows faster than linearly in a
// function and a block. Every function is external (hidden visibility), so modules link by name.
//
// Entry point, for the runner (T double for f64 plans, float for f32):
//   void {prefix}_solve(i64 item, const T* d, const T* u, const T* l, const T* b, T* x, T* work)
// solves group `item` (0 <= item < groups; others do nothing). d, u, l: rows values; b, x: rows x R
// row-major; all in the plan's row order; x may equal b; work: workspace_elements() values, each item
// using only its own rows' part; d, u, l and b are never written, and must not overlap x or work.
// Items are independent. The entry calls {prefix}_shape{s}_w{W}(d, u, l, b, x, work) with the
// pointers at the group's first row.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sparsecc/plan/hines_cpu_plan.hpp"

namespace sparsecc {

inline constexpr const char* kCpuHinesPrefix = "sparsecc_cpu_hines";
inline constexpr std::int64_t kCpuHinesPartNodes = 1024;
inline constexpr std::int64_t kCpuHinesBlockNodes = 256;

// Throws UsageError for a plan check_hines_cpu_plan refuses, or a prefix that is not an identifier.
std::string emit_hines_llvm_ir(const HinesCpuPlan& plan, const std::string& prefix = kCpuHinesPrefix);
// The same code as at most `modules` IR modules (at least one), compiled apart and linked by name:
// consecutive functions of about equal size a module, the last module also holding the entry.
std::vector<std::string> emit_hines_llvm_modules(const HinesCpuPlan& plan, const std::string& prefix,
                                                 std::int64_t modules);

}  // namespace sparsecc
