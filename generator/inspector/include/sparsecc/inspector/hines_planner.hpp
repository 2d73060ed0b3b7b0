// The Hines planner: junction selection (minimal: the branch points; fine: also every K-th row of
// each branch counted from its leaf end) and the recursion depth, giving a HinesPlan for one forest.
//
// Depth rule: decompose while some cell of the current matrix has more rows than the base threshold
// and a level still shrinks the matrix; what remains (the base) is solved serially on the GPU by one
// thread per cell, inside the step (no host round trip). The published rule (notes section 3.6,
// N <= 5245 / R + 40, 3500 for R = 1) was fitted for a CPU base behind PCIe on a K40c; with the base
// on the GPU a serial row costs about as much as a level's barrier, so the default threshold is
// small (hines_base_threshold). `depth` overrides the rule.
//
// Execution rule: levels whose largest cell has more than block_rows rows run as grid-wide kernels,
// the rest in the per-cell block kernel; block_threads covers the first block level's largest cell
// (a multiple of 32, at most 1024, 512 for R > 1), and at most 512 when there are many cells.
// Evidence: docs/design/evidence.md#hines-block-threads
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sparsecc/neuron/hines.hpp"
#include "sparsecc/plan/hines_plan.hpp"
#include "sparsecc/target/target.hpp"

namespace sparsecc {

struct HinesOptions {
  HinesDecomposition decomposition = HinesDecomposition::fine;
  // K of the fine decomposition (2 .. 1024) on levels the block kernel runs; 0: hines_k_rule(R).
  std::int32_t k = 0;
  // K of the levels whose largest cell exceeds block_rows (grid kernels under the execution rule): long
  // chains there cost one parallel pass and shrink the domain 8x instead of 3x (2 .. 1024; 0: the
  // block levels' K).
  // Forests of fewer than 64 cells with a cell above block_rows take it on every level.
  std::int32_t k_large = 8;
  std::int32_t depth = -1;          // decomposition levels; -1: the threshold rule
  std::int32_t base_rows = 0;       // per-cell threshold of the rule; 0: hines_base_threshold(R)
  std::int32_t block_rows = 12288;  // largest cell the block kernel takes on
  std::int32_t grid_levels = -1;    // -1: the execution rule
  std::int32_t block_threads = 0;   // 0: the execution rule
  std::int32_t threads_per_block =
      128;  // blocks of the grid kernels (128: 10 % faster than 256 on a 10^5-row cell)
  // Code mode (see HinesCode): "auto" unrolls the bases when they fit in shared memory, there are at most
  // kHinesMaxBaseFunctions distinct base structures and their code stays within code_budget estimated
  // instructions; "unrolled" insists (UsageError where the bases do not fit in shared memory).
  std::string code = "auto";
  std::int64_t code_budget = 16384;
  // Bytes of dynamic shared memory the block kernel may keep its levels' workspace in (see
  // HinesPlan::shared_workspace_limit); -1: the execution rule (hines_shared_workspace_rule), 0: none.
  std::int64_t shared_workspace = -1;
  std::string kernel_name = "sparsecc_hines";
};

inline constexpr std::int32_t kHinesMaxDepth = 32;
inline constexpr std::int32_t kHinesMaxBaseFunctions = 64;

// The default K of the block kernel's levels for R right-hand sides: 6 for R = 1 (a level fewer,
// chains of 5 rows that one register pass eliminates, more of the per-cell workspace in shared
// memory), else 3, where no K wins throughout. `sparsecc tune` searches K for a given forest, R and
// precision. Evidence: docs/design/evidence.md#hines-k-rule
std::int32_t hines_k_rule(std::int32_t rhs);
// The default per-cell base threshold for R right-hand sides on the GPU: max(8, 64 / R).
std::int32_t hines_base_threshold(std::int32_t rhs);
// The published (K40c, CPU base) threshold: 3500 for R = 1, floor(5245 / R + 40) above.
std::int32_t hines_published_base_threshold(std::int32_t rhs);

// The execution rule's shared workspace for a block kernel of `block_threads` threads whose bases
// stage `base_shared_bytes` in static shared memory on `target`: the shared memory a block may opt in
// to (227 KiB on sm_90, 163 KiB on sm_80) divided among the blocks an SM holds at 64 registers a
// thread (by the target's threads, registers and blocks per SM: 2 of 512 threads on sm_90), less the
// static part and the system's share of each block (1 KiB).
std::int64_t hines_shared_workspace_rule(std::int32_t block_threads, std::int64_t base_shared_bytes,
                                         const GpuTarget& target = default_gpu_target());

// Ascending junction rows of one level's forest `parent` (post-order).
std::vector<std::int32_t> select_junctions(const std::vector<std::int32_t>& parent,
                                           HinesDecomposition decomposition, std::int32_t k);

// Throws UsageError for an invalid structure (see validate_hines), rhs < 1, a dtype other than f64 or
// f32, K outside 2..1024 (or 0) with fine decomposition, or depth outside -1..kHinesMaxDepth.
// `target` sets the shared workspace rule's figures (the rest of the plan does not depend on it).
HinesPlan plan_hines(const HinesSystem& system, std::int32_t rhs, const std::string& dtype,
                     const HinesOptions& options = {}, const GpuTarget& target = default_gpu_target());

}  // namespace sparsecc
