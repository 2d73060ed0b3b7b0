// The Hines planner: junction selection (minimal: the branch points; fine: also every K-th row of
// each branch counted from its leaf end) and the recursion depth, giving a HinesPlan for one forest.
//
// Depth rule (notes section 3.6, the published threshold as the starting point): decompose while
// the current matrix has more rows than the base threshold, N <= 5245 / R + 40 for R > 1 and
// N <= 3500 for R = 1, and a level still shrinks it; what remains is solved serially by one thread
// block on the GPU (no host round trip). `depth` overrides the rule.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sparsecc/neuron/hines.hpp"
#include "sparsecc/plan/hines_plan.hpp"

namespace sparsecc {

struct HinesOptions {
  HinesDecomposition decomposition = HinesDecomposition::fine;
  std::int32_t k = 3;          // K of the fine decomposition (2 .. 1024); every level uses it
  std::int32_t depth = -1;     // decomposition levels; -1: the threshold rule
  std::int32_t base_rows = 0;  // threshold of the rule; 0: the published one for R
  std::int32_t threads_per_block = 256;
  std::int64_t unrolled_instruction_budget = 524288;  // above it the plan uses tables
  std::string kernel_name = "sparsecc_hines";
};

inline constexpr std::int32_t kHinesMaxDepth = 32;

// The published base threshold for R right-hand sides: 3500 for R = 1, floor(5245 / R + 40) above.
std::int32_t hines_base_threshold(std::int32_t rhs);

// Ascending junction rows of one level's forest `parent` (post-order).
std::vector<std::int32_t> select_junctions(const std::vector<std::int32_t>& parent,
                                           HinesDecomposition decomposition, std::int32_t k);

// Throws UsageError for an invalid structure (see validate_hines), rhs < 1, a dtype other than f64 or
// f32, K outside 2..1024 with fine decomposition, or depth outside -1..kHinesMaxDepth.
HinesPlan plan_hines(const HinesSystem& system, std::int32_t rhs, const std::string& dtype,
                     const HinesOptions& options = {});

}  // namespace sparsecc
