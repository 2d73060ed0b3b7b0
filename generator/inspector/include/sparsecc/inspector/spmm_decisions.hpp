// The SpMM planner as named decisions. plan_spmm (spmm_inspector.hpp) inspects A once
// (inspect_for_spmm) and then takes these decisions in order, each a function of the inspection (or
// A itself where a rule needs its structure), the problem, the options and the target:
//
//   choose_family          unrolled or rolled (the value mode's coarse half)
//   choose_step_lanes      rolled plans: lanes of a warp that take different steps
//   choose_cols_per_thread 1 or 2 columns of C a thread
//   choose_accumulate      the epilogue's accumulation type
//   choose_blocklets       tensor-core tiles of A (half plans); fragments_of turns them into fragments
//   choose_n_tile          threads a group (then choose_tall / choose_narrow_tile refine it)
//   choose_rows_per_block  the rows of an equal panel (Ny)
//   choose_clustered_rows  tall plans over many column tiles regroup their rows
//   choose_row_split       equal or nnz-balanced panels
//   row_borders            the block rows' borders
//   choose_groups          thread groups splitting K (then choose_wide_tile trades groups for columns)
//   build_block_rows       the steps of every block row, split over the groups
//   choose_stage_slots     staged steps (fp32 unrolled plans, when asked for)
//   estimate_registers     accumulators and overhead; choose_max_registers caps the assembler
//   estimate_instructions  B loads + FMAs (+ fragment work)
//   choose_value_mode      baked or streamed values (unrolled plans)
//   choose_programmatic    programmatic dependent launch: off, wait or trigger
//
// The constants are the rules' thresholds; what they were measured on is in
// docs/design/spmm-plan-evidence.md (one section a rule, linked from each).
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "sparsecc/inspector/blocklets.hpp"
#include "sparsecc/inspector/spmm_inspector.hpp"
#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/plan/spmm_plan.hpp"
#include "sparsecc/target/target.hpp"

namespace sparsecc::spmm_rules {

// ---- Thresholds of the rules ----
inline constexpr std::int64_t kGridTarget = 100;           // blocks a grid should reach
inline constexpr std::int64_t kTallRows = 32;              // rows of a tall block row
inline constexpr std::int64_t kTallWork = 10'000'000;      // nnz x N of a tall plan
inline constexpr std::int64_t kClusterMinColumns = 1024;   // N above which tall plans may cluster
inline constexpr double kClusterLoads = 0.9;               // clustered loads / equal loads to cluster
inline constexpr std::int32_t kNarrowTile = 64;            // the narrow n tile
inline constexpr std::int64_t kGroupNnz = 256;             // nonzeros a block row needs for groups
inline constexpr std::int64_t kLargeNnz = 40000;           // large matrices (fewer threads a block)
inline constexpr std::int32_t kWideTile = 256;             // the widest n tile
inline constexpr std::int64_t kWideGrid = 200;             // blocks a wide-tile grid must keep
inline constexpr double kBalanceImbalance = 0.35;          // heaviest / mean panel - 1 to balance
inline constexpr std::int64_t kBalanceMinRows = 4;         // Ny a balanced split needs
inline constexpr std::int64_t kBalanceMaxColumns = 4096;   // N below which panels may be balanced
inline constexpr std::int64_t kRolledNnz = 50000;          // nonzeros of an automatic rolled plan
inline constexpr std::int64_t kRolledRowNnz = 48;          // mean nonzeros a row, likewise
inline constexpr std::int64_t kRolledColumns = 64;         // N at most, likewise
inline constexpr std::int64_t kRolledWarps = 4096;         // warps the rolled groups aim for
inline constexpr std::int64_t kStepLaneNnz = 20000;        // nonzeros of a rolled plan at N <= 4
inline constexpr std::int64_t kStepLaneRolledColumns = 4;  // N at most of that rule
inline constexpr std::int64_t kStepLaneTwoRows = 1000;     // rows from which step lanes take 2 a block row
inline constexpr std::int64_t kFragmentOneWarpColumns = 32768;  // N above which fragment blocks are a warp
inline constexpr std::int64_t kFragmentSplitWarpsPerSm = 8;     // warps an SM below which fragments split
inline constexpr std::int64_t kFragmentSplitMin = 16;           // fragments a block row to split
inline constexpr std::int64_t kLoadsInFlight = 16;  // registers of the automatic cap beyond the estimate
// Fragment plans hold the warp's 32-float tile, a fragment's operand words and its B loads (up to 32
// 16-bit values for m16n8k16) beside the unrolled path's accumulators.
inline constexpr std::int64_t kFragmentLoadsInFlight = 48;

// ---- The inspection ----
// What the rules read of A beyond its shape, computed once.
struct SpmmInspection {
  std::int64_t rows = 0, cols = 0, nnz = 0;
  std::int64_t max_row_nnz = 0;  // the most nonzeros of one row
  std::int64_t empty_rows = 0;   // rows without a nonzero
  // Mean nonzeros a row (0 without rows).
  double mean_row_nnz() const { return rows ? static_cast<double>(nnz) / static_cast<double>(rows) : 0.0; }
};
SpmmInspection inspect_for_spmm(const CsrMatrix& a);

// ---- Family and body ----
// Whether the automatic value mode rolls: fp32 layers of at least kRolledNnz nonzeros and
// kRolledRowNnz a row at N <= kRolledColumns, or of kStepLaneNnz at a fixed N <= kStepLaneRolledColumns.
// Evidence: docs/design/spmm-plan-evidence.md#rolled-plans, #step-lanes
bool auto_rolled(const SpmmInspection& in, const SpmmProblem& problem);
// Convolution problems (SpmmProblem::conv) of more than kSpmmConvTapPointers taps (the 7x7 stem) with
// more than this many nonzeros roll: their unrolled kernel compiles through CUDA C++ (the PTX emitter
// takes kernels of up to kSpmmConvTapPointers taps), whose time grows with the nonzeros (20,000 take
// about 20 s on 2 cores). Evidence: docs/performance/2026-11-27-compile-cost.md
inline constexpr std::int64_t kConvUnrolledNnz = 20000;
// The options a convolution plan is made with: the rolled family where auto_rolled holds or above
// kConvUnrolledNnz as said (groups of whole warps, no step lanes), else unrolled with one column a
// thread; the value mode, tiling and register cap as asked. Throws UsageError for what a convolution
// executor does not do (f16 / bf16, blocklets, staged steps, step lanes, two columns a thread, the
// compressed family) or a problem whose shape is not its geometry's.
SpmmOptions conv_options(const SpmmInspection& in, const SpmmProblem& problem, SpmmOptions options);

// The options' family (value mode rolled), or the automatic one: rolled where auto_rolled holds and
// nothing asked for an unrolled feature (blocklets, clustered rows, staged steps). Throws UsageError
// for a rolled plan the executor cannot run (f16 / bf16, blocklets).
SpmmFamily choose_family(const SpmmInspection& in, const SpmmProblem& problem, const SpmmOptions& options);
// Rolled plans at a fixed N <= kSpmmStepLaneColumns whose n tile is automatic or 32 and columns a
// thread automatic take spmm_step_lanes_for(N); the options' step lanes otherwise; 1 for unrolled
// plans. Throws UsageError for step lanes that are no power of two in 1..32, or need a rolled plan or
// an n tile of 32. Evidence: docs/design/spmm-plan-evidence.md#step-lanes
std::int32_t choose_step_lanes(const SpmmProblem& problem, const SpmmOptions& options, SpmmFamily family);
// 1 for fp32 unrolled and step-lane plans, else 2; the options may ask for 2 on fp32 unrolled plans at
// a fixed even N (throws UsageError otherwise).
std::int32_t choose_cols_per_thread(const SpmmProblem& problem, const SpmmOptions& options, SpmmFamily family,
                                    std::int32_t step_lanes);
// The epilogue: the problem's bias, ReLU and dtype, and the options' accumulation (f32 or the dtype;
// throws UsageError otherwise).
SpmmEpilogue choose_epilogue(const SpmmProblem& problem, const SpmmOptions& options);

// ---- The compressed family (f16 / bf16 on tensor cores, sparsecc/plan/spmm_compressed.hpp) ----
// Evidence for every threshold: docs/design/spmm-plan-evidence.md#compressed-plans
inline constexpr std::int64_t kCompressedMinNnz = 100000;       // nonzeros of an automatic compressed plan
inline constexpr std::int64_t kCompressedColumns = 64;          // N at most, likewise
inline constexpr std::int64_t kCompressedBlocksPerSm = 12;      // blocks an SM the splits aim for
inline constexpr std::int64_t kCompressedShapeBlocksPerSm = 4;  // blocks an SM the tallest shape must give
inline constexpr std::int64_t kCompressedSharedBlocks = 2;      // blocks an SM the stages leave room for
inline constexpr std::int64_t kCompressedChunk = 128;           // columns of A a chunk, where it fits
inline constexpr std::int32_t kCompressedStages = 2;            // chunks in shared memory at once
inline constexpr std::int32_t kCompressedBitmapWeight = 100;    // format choice: bytes a bitmap sub-tile
inline constexpr std::int32_t kCompressedPositionWeight = 3;    // bytes a scattered nonzero
inline constexpr double kCompressedScatterDensity = 0.35;       // the scatter layout at most this dense
inline constexpr std::int32_t kCompressedScatterWarps = 4;      // warps of a scatter block
// Scatter blocks, tallest first, each with its chunk_k and the most splits it takes; the planner takes
// the first whose row blocks, with those splits, give kCompressedScatterBlocksPerSm blocks an SM and,
// past the portable cluster of 8, leave each split kCompressedWideSplitChunks chunks (the last one
// otherwise).
struct CompressedScatterShape {
  std::int32_t warps, strips, chunk_k, splits;
};
inline constexpr CompressedScatterShape kCompressedScatterShapes[] = {
    {4, 4, 64, 8}, {4, 2, 64, 8}, {4, 2, 64, 16}, {4, 1, 128, 8}};
inline constexpr double kCompressedScatterBlocksPerSm = 2.5;
inline constexpr std::int64_t kCompressedWideSplitChunks = 10;
// Scatter plans keep the rounds of 32 entries a warp's list takes on average over the chunks that
// hold any, at most this many (more hold registers and load padding in the shorter lists).
inline constexpr std::int32_t kCompressedKeptRounds = 4;
// Vector plans: blocks of 16 rows and this many warps, one row a warp, while A's rows fit one wave of the
// SMs' warp slots; half as many warps (two rows a warp) past that.
inline constexpr std::int32_t kCompressedVectorWarps = 16;
// A fixed N up to this many columns takes the vector layout automatically (K permitting); past it the
// tensor-core layouts (the tuner's space still holds the vector layout up to rt::kVectorMaxN).
inline constexpr std::int64_t kCompressedVectorMaxN = 4;
// Whether the automatic value mode is compressed: f16 / bf16 layers of at least kCompressedMinNnz
// nonzeros at N <= kCompressedColumns, planned without forced blocklets or tiling.
bool auto_compressed(const SpmmInspection& in, const SpmmProblem& problem, const SpmmOptions& options);
// The compressed plan: the scatter layout (unless the options name a layout or record formats) for A
// at most kCompressedScatterDensity dense, in the first of kCompressedScatterShapes (with its chunk_k and
// splits) that gives kCompressedScatterBlocksPerSm blocks an SM, keeping the rounds its lists take
// (at most kCompressedKeptRounds), else records;
// n_tile = N rounded up to 8 (at most 64); record blocks of 8 warps x 2 strips (256
// rows), else 4 x 2, else 4 x 1: the tallest that still gives kCompressedShapeBlocksPerSm blocks an SM
// with 8 splits; the piece census (spmm_piece_census) with the options' formats and weights;
// kCompressedStages stages; chunk_k kCompressedChunk, else 64, the largest whose stages leave room for
// kCompressedSharedBlocks blocks on an SM (else the largest that fits a block's opt-in shared memory);
// splits the fewest that give kCompressedBlocksPerSm blocks an SM, at most 8, the chunks and the rows
// (1 without clusters); each
// row block's chunks split where the segments' bytes (plus half the bytes of B's rows a chunk stages)
// reach equal shares. Throws UsageError for options out of
// range, a dtype other than f16 / bf16, or a matrix whose densest chunk does not fit shared memory.
SpmmPlan plan_compressed(const CsrMatrix& a, const SpmmProblem& problem, const SpmmOptions& options,
                         const GpuTarget& target);

// ---- Tensor-core fragments ----
// Whether tensor cores take tiles of this shape (16x8, 16x16, 8x8).
bool tensor_core_shape(BlockShape s);
// The blocklet configuration of `o` for `a` (max_blocks 0: none): forced takes the options' shape;
// auto the cheapest tensor-core candidate of propose_blocklets that saves 5 % over the all-residual
// estimate.
BlockletConfig choose_blocklets(const CsrMatrix& a, const SpmmProblem& problem, const SpmmOptions& o);
// The tiles of `d` as fragments of 16-row block rows (one list a block row), marking the nonzeros they
// take in `covered`. 8-row tiles at rows 0 and 8 of a block row at the same k share one fragment.
std::vector<std::vector<SpmmFragment>> fragments_of(const CsrMatrix& a, const BlockletDecomposition& d,
                                                    std::int32_t fk, std::vector<char>& covered);

// ---- Tiling ----
// The rule's n tile for `thread_columns` threads' worth of columns: 64 above 1024, else rounded up
// to a warp, at most 64 (N <= 64) or 128. Evidence: docs/design/spmm-plan-evidence.md#narrow-n-tile
std::int32_t auto_n_tile(std::int64_t thread_columns);
// The options' n tile, 32 for step lanes and for fragment plans above kFragmentOneWarpColumns
// columns, else auto_n_tile. Evidence: docs/design/spmm-plan-evidence.md#fragment-tiling
std::int32_t choose_n_tile(const SpmmProblem& problem, const SpmmOptions& options,
                           std::int64_t thread_columns, std::int32_t step_lanes, bool fragments);
// Whether kTallRows rows a block row pay: nnz x N >= kTallWork and the tall grid (tiles column tiles)
// still has kGridTarget blocks. Evidence: docs/design/spmm-plan-evidence.md#tall-block-rows
bool choose_tall(const SpmmInspection& in, std::int64_t n, std::int64_t tiles);
// The most of 16, 8, 4, 2, 1 rows that still gives a grid of kGridTarget blocks over `tiles` column
// tiles, at most M. Evidence: docs/design/spmm-plan-evidence.md#rows-per-block
std::int64_t auto_rows_per_block(std::int64_t m, std::int64_t tiles);
// kNarrowTile instead of `n_tile` for a light fp32 unrolled plan (at most kLargeNnz nonzeros) where
// the narrow tile's extra column tiles give taller block rows that still hold kGroupNnz nonzeros;
// else n_tile. Evidence: docs/design/spmm-plan-evidence.md#narrow-n-tile
std::int32_t choose_narrow_tile(const SpmmInspection& in, std::int64_t thread_columns, std::int32_t n_tile);
// What the rows-per-block rule needs to know of the plan so far.
struct SpmmRowsContext {
  SpmmFamily family = SpmmFamily::unrolled;
  std::int32_t step_lanes = 1;
  bool fragments = false;
  bool tall = false;
  std::int64_t tiles = 1;  // column tiles of the n tile chosen
};
// Ny, the rows of an equal panel: 16 for fragment plans, the options', or the rule (rolled: 1, or 2
// for step lanes over kStepLaneTwoRows rows or more; tall: kTallRows; else auto_rows_per_block), at
// least the rows that keep the block rows within the target's grid. Throws UsageError for Ny outside
// 1..kSpmmMaxAccumulators or more block rows than the grid takes.
// Evidence: docs/design/spmm-plan-evidence.md#step-lane-block-rows
std::int64_t choose_rows_per_block(const SpmmInspection& in, const SpmmOptions& options,
                                   const SpmmRowsContext& c, const GpuTarget& target);
// Tall plans at N > kClusterMinColumns without a row split asked for: the clustered order of A's rows
// (cluster_rows) where its panels of ny rows load at most kClusterLoads of the equal panels' rows of
// B; else empty. Evidence: docs/design/spmm-plan-evidence.md#clustered-rows
std::optional<std::vector<std::int64_t>> choose_clustered_rows(const CsrMatrix& a, std::int64_t ny,
                                                               std::int64_t n);
// The heaviest equal panel of ny rows over the mean panel, minus 1 (0 for an empty matrix).
double equal_panel_imbalance(const CsrMatrix& a, std::int64_t ny);
// Whether an equal panel of ny rows holds no nonzero.
bool has_empty_panel(const CsrMatrix& a, std::int64_t ny);
// Balanced where an fp32 unrolled plan (no fragments, not clustered, no split asked for) at
// N < kBalanceMaxColumns with ny >= kBalanceMinRows has uneven equal panels (imbalance at least
// kBalanceImbalance) none of which is empty; else `current`.
// Evidence: docs/design/spmm-plan-evidence.md#balanced-row-split
SpmmRowSplit choose_row_split(const CsrMatrix& a, std::int64_t ny, std::int64_t n, bool eligible,
                              SpmmRowSplit current);
// Row borders of `blocks` block rows: equal panels of `ny` rows, or nnz-balanced panels of at most
// `cap` rows each.
std::vector<std::int64_t> row_borders(const CsrMatrix& a, std::int64_t blocks, std::int64_t ny,
                                      std::int64_t cap, SpmmRowSplit split);

// ---- Groups ----
// Whether g groups keep the reduction buffer of the tallest block row within the target's shared
// memory a block.
bool reduction_fits(std::int64_t g, std::int64_t tallest, std::int64_t n_tile, std::int64_t cols_per_thread,
                    const GpuTarget& target);
// Unrolled plans: 4 when a block row holds kGroupNnz nonzeros on average, else 1; fewer while the
// block passes 1024 threads (256 above kLargeNnz nonzeros, 512 in a one-wave grid: at most
// target.sm_count blocks) or the reduction buffer the target's shared memory.
// Evidence: docs/design/spmm-plan-evidence.md#groups
std::int32_t auto_groups(std::int64_t nnz, std::int64_t blocks, std::int64_t tiles, std::int64_t tallest,
                         std::int32_t n_tile, std::int32_t cols_per_thread, const GpuTarget& target);
// Rolled plans: the power of two (4..16) that brings the grid to about kRolledWarps warps, fewer
// where the block or its reduction buffer would not fit, and for step lanes no more than leave every
// lane a step. Evidence: docs/design/spmm-plan-evidence.md#rolled-plans, #step-lane-groups
std::int32_t rolled_groups(std::int64_t blocks, std::int64_t tiles, std::int32_t n_tile, std::int64_t tallest,
                           std::int32_t step_lanes, std::int64_t nnz, const GpuTarget& target);
// Fragment plans: 2 where the grid has fewer than kFragmentSplitWarpsPerSm warps an SM of the target
// and block rows average kFragmentSplitMin fragments, else 1.
// Evidence: docs/design/spmm-plan-evidence.md#fragment-tiling
std::int32_t fragment_groups(const std::vector<std::vector<SpmmFragment>>& fragments,
                             std::int64_t thread_columns, std::int32_t n_tile, const GpuTarget& target);
// Unrolled fp32 plans with automatic n tile and groups and groups > 1: trades groups for a wider n tile
// (up to kWideTile) where that grid keeps kWideGrid blocks, or is one wave more than half full above
// kLargeNnz nonzeros (with auto_groups' groups), or else a half-width tile keeps kWideGrid blocks.
// Returns {n_tile, groups}. Evidence: docs/design/spmm-plan-evidence.md#wide-tiles
std::pair<std::int32_t, std::int32_t> choose_wide_tile(std::int64_t nnz, std::int64_t thread_columns,
                                                       std::int64_t blocks, std::int64_t tallest,
                                                       std::int32_t n_tile, std::int32_t groups,
                                                       std::int32_t cols_per_thread, const GpuTarget& target);

// ---- Block rows, staging, estimates ----
// The steps of block row [begin, end) of `rows` split over `groups` groups with balanced nonzeros;
// nonzeros marked in `covered` (taken by fragments) are left out.
std::vector<SpmmGroup> block_groups(const CsrMatrix& rows, std::int64_t begin, std::int64_t end,
                                    std::int32_t groups, const std::vector<char>& covered);
// Every block row of `borders` (fragment lists moved in from `fragments` where given), with value
// indices mapped back through `source_index` when the rows were regrouped.
std::vector<SpmmBlockRow> build_block_rows(const CsrMatrix& rows, const std::vector<std::int64_t>& borders,
                                           std::int32_t groups, const std::vector<char>& covered,
                                           std::vector<std::vector<SpmmFragment>> fragments,
                                           const std::vector<std::int64_t>& source_index);
// Staged steps: the slots a group takes for steps of at least `min_entries` nonzeros (the most dense
// steps of a group, what fits the target's shared memory beside the reduction buffer, at most
// kSpmmMaxStageSlots); 0 when none.
std::int32_t choose_stage_slots(const SpmmPlan& plan, std::int32_t min_entries, const GpuTarget& target);
// Registers a thread needs: one float accumulator a row, two for fp32-accumulating half plans, fp32
// pairs and rolled plans without step lanes, plus kSpmmRegisterOverhead and 36 for fragment plans.
std::int32_t estimate_registers(const SpmmPlan& plan);
// The assembler's register cap: the options', or the estimate plus the loads in flight (rounded up to
// 8), at most the target's registers a thread. Throws UsageError for a cap outside
// estimate..target.max_registers_per_thread.
std::int32_t choose_max_registers(const SpmmPlan& plan, const SpmmOptions& options, const GpuTarget& target);
// B loads + FMAs (two an entry with fp32 pairs); a fragment takes its operand load and, for each of
// the warp's 8 column groups, fragment_k / 2 B loads, their packing and one mma.
std::int64_t estimate_instructions(const SpmmPlan& plan);
// Unrolled plans: the options' value mode, or baked where the estimated instructions are within
// baked_instruction_budget (or no nonzero is left to the unrolled path), else streamed.
SpmmValueMode choose_value_mode(const SpmmPlan& plan, const SpmmOptions& options);
// The options' mode, or the rule: every plan waits; fp32 plans that are rolled or of at most
// kSpmmProgrammaticTriggerInstructions also trigger. Throws UsageError for a half plan asked to
// trigger. Evidence: docs/design/spmm-plan-evidence.md#programmatic-trigger
SpmmProgrammatic choose_programmatic(const SpmmPlan& plan, const SpmmOptions& options);

}  // namespace sparsecc::spmm_rules
