// The planner of CPU SpMM plans (sparsecc/plan/spmm_cpu_plan.hpp). Evidence for its constants:
// docs/design/cpu-backend.md.
#pragma once

#include <cstdint>
#include <optional>

#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/plan/spmm_cpu_plan.hpp"
#include "sparsecc/target/target.hpp"

namespace sparsecc {

struct SpmmCpuOptions {
  std::int32_t column_tile = 0;  // columns a row accumulates at once; 0: automatic
  std::int64_t panel_nnz = 0;    // nonzeros a panel holds about; 0: automatic
  std::optional<bool> rolled;    // rolled code (SpmmCpuPlan::rolled); unset: kCpuStraightLineFmas decides
};

namespace spmm_rules {
inline constexpr std::int32_t kCpuTileVectors = 4;     // accumulator vectors a row keeps (code per nonzero)
inline constexpr std::int64_t kCpuPanelsPerCore = 8;   // panels a core, for balance
inline constexpr std::int64_t kCpuMinPanelNnz = 1024;  // nonzeros a panel at least (call overhead)
// and at most: the size of one function, whose code generation grows faster than linearly in it.
// Evidence: docs/performance/2026-11-28-cpu-llvm.md#compile-time
inline constexpr std::int64_t kCpuMaxPanelNnz = 2048;
// Straight-line code up to this many vector fused multiply-adds (nonzeros x vectors of a column
// tile); rolled code above, whose compile time does not grow with A.
// Evidence: docs/performance/2026-11-28-cpu-llvm.md#compile-time
inline constexpr std::int64_t kCpuStraightLineFmas = 40000;
}  // namespace spmm_rules

// The planner's rules, for the tuner to place its candidates by: the nonzeros a panel holds about
// (nnz / (kCpuPanelsPerCore x cores), clamped to [kCpuMinPanelNnz, kCpuMaxPanelNnz]), and the vector
// fused multiply-adds straight-line code would hold at N in column tiles of `tile` (every nonzero once
// a vector of the full tile's width and of the rest's when the tile does not divide N).
std::int64_t cpu_panel_nnz_goal(const CsrMatrix& a, const CpuTarget& target);
std::int64_t cpu_straight_line_fmas(const CsrMatrix& a, std::int64_t n, std::int64_t tile,
                                    std::int64_t lanes);

// lanes the target's fp32 vector; column_tile N when N fits kCpuTileVectors vectors, else the
// columns of kCpuTileVectors vectors (the code is that many fused multiply-adds a nonzero, and the
// runner loops over the tiles); panels of consecutive rows with about
// panel_nnz nonzeros each (nnz / (kCpuPanelsPerCore * cores), clamped to [kCpuMinPanelNnz,
// kCpuMaxPanelNnz]), at least one row each; rolled code where straight-line code would hold more
// than kCpuStraightLineFmas vector fused multiply-adds. The dtype (f32, f16 or bf16) changes none of
// these: half plans keep fp32 lanes and accumulators. Throws UsageError for another dtype, a run-time
// N, a shape that is not A's, or a value of A that overflows the dtype.
SpmmCpuPlan plan_spmm_cpu(const CsrMatrix& a, const SpmmProblem& problem, const CpuTarget& target,
                          const SpmmCpuOptions& options = {});

}  // namespace sparsecc
