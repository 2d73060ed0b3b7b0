// Each decision of the SpMM planner (sparsecc/inspector/spmm_decisions.hpp) on small inputs: the
// rule alone, away from the rest of plan_spmm.
#include "sparsecc/inspector/spmm_decisions.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "sparsecc/common/error.hpp"
#include "sparsecc/target/target.hpp"
#include "test_support.hpp"

namespace sparsecc {
namespace {

using namespace spmm_rules;

// A rows x cols matrix whose row r holds row_nnz[r] nonzeros in its first columns.
CsrMatrix rows_of(std::int64_t cols, const std::vector<std::int64_t>& row_nnz) {
  CsrMatrix a;
  a.rows = static_cast<std::int64_t>(row_nnz.size());
  a.cols = cols;
  for (const std::int64_t n : row_nnz) {
    for (std::int64_t c = 0; c < n; ++c) {
      a.col_idx.push_back(static_cast<std::int32_t>(c));
      a.values.push_back(1.0);
    }
    a.row_ptr.push_back(static_cast<std::int64_t>(a.col_idx.size()));
  }
  return a;
}

SpmmInspection inspection(std::int64_t rows, std::int64_t cols, std::int64_t nnz) {
  SpmmInspection in;
  in.rows = rows;
  in.cols = cols;
  in.nnz = nnz;
  return in;
}

SpmmProblem problem(std::int64_t m, std::int64_t k, std::int64_t n, DType dtype = DType::f32,
                    SpmmNMode mode = SpmmNMode::fixed) {
  return {m, k, n, mode, false, false, dtype};
}

TEST(SpmmDecisions, InspectionCountsRows) {
  const SpmmInspection in = inspect_for_spmm(rows_of(8, {3, 0, 5, 0}));
  EXPECT_EQ(in.rows, 4);
  EXPECT_EQ(in.cols, 8);
  EXPECT_EQ(in.nnz, 8);
  EXPECT_EQ(in.max_row_nnz, 5);
  EXPECT_EQ(in.empty_rows, 2);
  EXPECT_DOUBLE_EQ(in.mean_row_nnz(), 2.0);
}

TEST(SpmmDecisions, FamilyRollsHeavyFp32LayersAtSmallN) {
  const SpmmInspection heavy = inspection(1000, 2048, kRolledNnz + 1000);  // 51 a row
  EXPECT_EQ(choose_family(heavy, problem(1000, 2048, 64), {}), SpmmFamily::rolled);
  EXPECT_EQ(choose_family(heavy, problem(1000, 2048, 65), {}),
            SpmmFamily::unrolled);  // N past a warp of pairs
  EXPECT_EQ(choose_family(heavy, problem(1000, 2048, 64, DType::f16), {}),
            SpmmFamily::unrolled);  // fp32 only
  // Light rows stay unrolled, whatever the total.
  EXPECT_EQ(choose_family(inspection(4000, 2048, kRolledNnz + 1000), problem(4000, 2048, 1), {}),
            SpmmFamily::unrolled);
  // At N <= 4 (fixed) the bar is kStepLaneNnz nonzeros.
  const SpmmInspection mid = inspection(400, 1024, kStepLaneNnz);
  EXPECT_EQ(choose_family(mid, problem(400, 1024, 4), {}), SpmmFamily::rolled);
  EXPECT_EQ(choose_family(mid, problem(400, 1024, 4, DType::f32, SpmmNMode::runtime), {}),
            SpmmFamily::unrolled);
  EXPECT_EQ(choose_family(mid, problem(400, 1024, 8), {}), SpmmFamily::unrolled);
  // Options: an unrolled feature keeps the automatic family unrolled; the value mode decides.
  SpmmOptions staged;
  staged.stage_min_entries = 2;
  EXPECT_EQ(choose_family(heavy, problem(1000, 2048, 64), staged), SpmmFamily::unrolled);
  SpmmOptions forced;
  forced.value_mode = SpmmValueMode::rolled;
  EXPECT_EQ(choose_family(inspection(4, 4, 1), problem(4, 4, 200), forced), SpmmFamily::rolled);
  EXPECT_THROW(choose_family(heavy, problem(1000, 2048, 64, DType::bf16), forced), UsageError);
}

TEST(SpmmDecisions, StepLanesGiveEveryLaneAColumn) {
  EXPECT_EQ(choose_step_lanes(problem(8, 8, 1), {}, SpmmFamily::rolled), 32);
  EXPECT_EQ(choose_step_lanes(problem(8, 8, 3), {}, SpmmFamily::rolled), 8);
  EXPECT_EQ(choose_step_lanes(problem(8, 8, 8), {}, SpmmFamily::rolled), 4);
  EXPECT_EQ(choose_step_lanes(problem(8, 8, 9), {}, SpmmFamily::rolled), 1);  // past kSpmmStepLaneColumns
  EXPECT_EQ(choose_step_lanes(problem(8, 8, 1, DType::f32, SpmmNMode::runtime), {}, SpmmFamily::rolled), 1);
  EXPECT_EQ(choose_step_lanes(problem(8, 8, 1), {}, SpmmFamily::unrolled), 1);
  SpmmOptions wide;
  wide.n_tile = 64;  // an n tile other than a warp keeps one step a warp
  EXPECT_EQ(choose_step_lanes(problem(8, 8, 1), wide, SpmmFamily::rolled), 1);
  SpmmOptions given;
  given.step_lanes = 4;
  EXPECT_EQ(choose_step_lanes(problem(8, 8, 100), given, SpmmFamily::rolled), 4);
  EXPECT_THROW(choose_step_lanes(problem(8, 8, 1), given, SpmmFamily::unrolled), UsageError);
  given.step_lanes = 3;
  EXPECT_THROW(choose_step_lanes(problem(8, 8, 1), given, SpmmFamily::rolled), UsageError);
}

TEST(SpmmDecisions, ColumnsAThread) {
  EXPECT_EQ(choose_cols_per_thread(problem(8, 8, 10), {}, SpmmFamily::unrolled, 1), 1);
  EXPECT_EQ(choose_cols_per_thread(problem(8, 8, 10), {}, SpmmFamily::rolled, 1), 2);
  EXPECT_EQ(choose_cols_per_thread(problem(8, 8, 1), {}, SpmmFamily::rolled, 32), 1);
  EXPECT_EQ(choose_cols_per_thread(problem(8, 8, 10, DType::f16), {}, SpmmFamily::unrolled, 1), 2);
  SpmmOptions pairs;
  pairs.cols_per_thread = 2;
  EXPECT_EQ(choose_cols_per_thread(problem(8, 8, 10), pairs, SpmmFamily::unrolled, 1), 2);
  EXPECT_THROW(choose_cols_per_thread(problem(8, 8, 11), pairs, SpmmFamily::unrolled, 1),
               UsageError);  // odd N
  EXPECT_THROW(choose_cols_per_thread(problem(8, 8, 1), pairs, SpmmFamily::rolled, 32), UsageError);
}

TEST(SpmmDecisions, EpilogueTakesTheProblemAndTheAccumulation) {
  SpmmProblem pr = problem(8, 8, 4, DType::bf16);
  pr.bias = true;
  SpmmOptions o;
  o.accumulate = DType::bf16;
  const SpmmEpilogue e = choose_epilogue(pr, o);
  EXPECT_TRUE(e.bias);
  EXPECT_FALSE(e.relu);
  EXPECT_EQ(e.accumulate, DType::bf16);
  EXPECT_EQ(e.output, DType::bf16);
  o.accumulate = DType::f16;  // neither f32 nor the dtype
  EXPECT_THROW(choose_epilogue(pr, o), UsageError);
}

TEST(SpmmDecisions, NTileRule) {
  EXPECT_EQ(auto_n_tile(1), 32);
  EXPECT_EQ(auto_n_tile(49), 64);
  EXPECT_EQ(auto_n_tile(65), 96);
  EXPECT_EQ(auto_n_tile(200), 128);
  EXPECT_EQ(auto_n_tile(1024), 128);
  EXPECT_EQ(auto_n_tile(1025), 64);
  EXPECT_EQ(choose_n_tile(problem(8, 8, 1), {}, 1, 32, false), 32);        // step lanes: one warp
  EXPECT_EQ(choose_n_tile(problem(8, 8, 40000), {}, 20000, 1, true), 32);  // wide fragment plans
  EXPECT_EQ(choose_n_tile(problem(8, 8, 40000), {}, 20000, 1, false), 64);
  SpmmOptions given;
  given.n_tile = 48;
  EXPECT_EQ(choose_n_tile(problem(8, 8, 4), given, 4, 1, false), 48);
  given.n_tile = -1;
  EXPECT_THROW(choose_n_tile(problem(8, 8, 4), given, 4, 1, false), UsageError);
}

TEST(SpmmDecisions, TallBlockRowsNeedWorkAndAGrid) {
  // 10M multiply-adds and ceil(M / 32) * tiles >= 100 blocks.
  EXPECT_TRUE(choose_tall(inspection(3200, 512, 100000), 100, 1));
  EXPECT_FALSE(choose_tall(inspection(3200, 512, 99999), 100, 1));
  EXPECT_FALSE(choose_tall(inspection(3168, 512, 100000), 100, 1));  // 99 tall blocks
  EXPECT_TRUE(choose_tall(inspection(3168, 512, 100000), 100, 2));
}

TEST(SpmmDecisions, RowsPerBlockKeepTheGridCovered) {
  EXPECT_EQ(auto_rows_per_block(1600, 1), 16);
  EXPECT_EQ(auto_rows_per_block(1584, 1), 8);  // 99 blocks of 16 rows
  EXPECT_EQ(auto_rows_per_block(200, 1), 2);
  EXPECT_EQ(auto_rows_per_block(50, 1), 1);
  EXPECT_EQ(auto_rows_per_block(100, 16), 16);
  EXPECT_EQ(auto_rows_per_block(4, 100), 4);  // at most M
  const GpuTarget& h100 = default_gpu_target();
  const SpmmInspection in = inspection(1600, 64, 3200);
  EXPECT_EQ(choose_rows_per_block(in, {}, {SpmmFamily::unrolled, 1, false, false, 1}, h100), 16);
  EXPECT_EQ(choose_rows_per_block(in, {}, {SpmmFamily::unrolled, 1, false, true, 1}, h100), kTallRows);
  EXPECT_EQ(choose_rows_per_block(in, {}, {SpmmFamily::rolled, 1, false, false, 1}, h100), 1);
  EXPECT_EQ(choose_rows_per_block(in, {}, {SpmmFamily::rolled, 32, false, false, 1}, h100), 2);
  EXPECT_EQ(
      choose_rows_per_block(inspection(999, 64, 3200), {}, {SpmmFamily::rolled, 32, false, false, 1}, h100),
      1);
  EXPECT_EQ(choose_rows_per_block(in, {}, {SpmmFamily::unrolled, 1, true, false, 1}, h100),
            kSpmmFragmentRows);
  SpmmOptions too_tall;
  too_tall.rows_per_block = kSpmmMaxAccumulators + 1;
  EXPECT_THROW(choose_rows_per_block(in, too_tall, {}, h100), UsageError);
  // The grid's y limit is the target's: a target of 10 block rows makes 1600 rows take 160 a block row,
  // more accumulators than a thread may hold.
  GpuTarget small = h100;
  small.max_grid_y = 50;
  EXPECT_EQ(choose_rows_per_block(in, {}, {SpmmFamily::rolled, 1, false, false, 1}, small), 32);
  small.max_grid_y = 10;
  EXPECT_THROW(choose_rows_per_block(in, {}, {SpmmFamily::rolled, 1, false, false, 1}, small), UsageError);
}

TEST(SpmmDecisions, NarrowTileWhereItBuysTallerBlockRows) {
  // 256 rows at N = 128: the 128 tile gives 1 column tile and 2 rows a block row; the 64 tile 2
  // tiles and 4 rows, which still hold 256 nonzeros at 64 a row.
  EXPECT_EQ(choose_narrow_tile(inspection(256, 512, 256 * 64), 128, 128), kNarrowTile);
  EXPECT_EQ(choose_narrow_tile(inspection(256, 512, 256 * 10), 128, 128), 128);       // too light for groups
  EXPECT_EQ(choose_narrow_tile(inspection(256, 512, kLargeNnz + 1), 128, 128), 128);  // large matrices
  EXPECT_EQ(choose_narrow_tile(inspection(256, 512, 256 * 64), 64, 64), 64);
}

TEST(SpmmDecisions, RowSplitBalancesUnevenPanels) {
  // Panels of 4 rows: 4 x 10 nonzeros, then 4 x 1: the heavy panel holds 60 % more than the mean.
  const CsrMatrix uneven = rows_of(16, {10, 10, 10, 10, 1, 1, 1, 1});
  EXPECT_NEAR(equal_panel_imbalance(uneven, 4), 40.0 * 2 / 44 - 1, 1e-12);
  EXPECT_FALSE(has_empty_panel(uneven, 4));
  EXPECT_EQ(choose_row_split(uneven, 4, 64, true, SpmmRowSplit::equal), SpmmRowSplit::balanced);
  EXPECT_EQ(choose_row_split(uneven, 4, 64, false, SpmmRowSplit::equal), SpmmRowSplit::equal);
  EXPECT_EQ(choose_row_split(uneven, 2, 64, true, SpmmRowSplit::equal), SpmmRowSplit::equal);  // Ny < 4
  EXPECT_EQ(choose_row_split(uneven, 4, kBalanceMaxColumns, true, SpmmRowSplit::equal), SpmmRowSplit::equal);
  const CsrMatrix empty_panel = rows_of(16, {10, 10, 10, 10, 0, 0, 0, 0});
  EXPECT_TRUE(has_empty_panel(empty_panel, 4));
  EXPECT_EQ(choose_row_split(empty_panel, 4, 64, true, SpmmRowSplit::equal), SpmmRowSplit::equal);
  const CsrMatrix even = rows_of(16, {3, 3, 3, 3, 3, 3, 3, 3});
  EXPECT_EQ(choose_row_split(even, 4, 64, true, SpmmRowSplit::equal), SpmmRowSplit::equal);
}

TEST(SpmmDecisions, RowBordersEqualAndBalanced) {
  const CsrMatrix a = rows_of(16, {10, 10, 10, 10, 1, 1, 1, 1});
  EXPECT_EQ(row_borders(a, 2, 4, 4, SpmmRowSplit::equal), (std::vector<std::int64_t>{0, 4, 8}));
  // Balanced, at most 8 rows a block row: the first block row ends where half the nonzeros are done.
  EXPECT_EQ(row_borders(a, 2, 4, 8, SpmmRowSplit::balanced), (std::vector<std::int64_t>{0, 3, 8}));
  EXPECT_EQ(row_borders(rows_of(4, {1, 1, 1}), 2, 2, 2, SpmmRowSplit::equal),
            (std::vector<std::int64_t>{0, 2, 3}));
}

TEST(SpmmDecisions, ClusteredRowsOnlyPastTheColumnBar) {
  const CsrMatrix a = test::random_csr(64, 128, 0.1, 3);
  EXPECT_FALSE(choose_clustered_rows(a, 16, kClusterMinColumns).has_value());
  // Rows 2i and 2i + 1 share nothing, rows i and i + 32 share everything: clustering halves the loads.
  CsrMatrix paired;
  paired.rows = 64;
  paired.cols = 64;
  for (std::int64_t r = 0; r < 64; ++r) {
    for (std::int32_t c = 0; c < 2; ++c) {
      paired.col_idx.push_back(static_cast<std::int32_t>(2 * (r % 32) + c));
      paired.values.push_back(1.0);
    }
    paired.row_ptr.push_back(static_cast<std::int64_t>(paired.col_idx.size()));
  }
  const auto order = choose_clustered_rows(paired, 2, kClusterMinColumns + 1);
  ASSERT_TRUE(order.has_value());
  EXPECT_EQ(order->size(), 64u);
}

TEST(SpmmDecisions, GroupsSplitHeavyBlockRows) {
  const GpuTarget& h100 = default_gpu_target();
  EXPECT_EQ(auto_groups(100 * 255, 100, 1, 16, 64, 1, h100), 1);  // 255 a block row
  EXPECT_EQ(auto_groups(100 * 256, 100, 1, 16, 64, 1, h100), 4);
  EXPECT_EQ(auto_groups(100 * 256, 100, 1, 16, 512, 1, h100), 2);  // at most 1024 threads
  // Above kLargeNnz: 256 threads a block, or 512 in a one-wave grid (at most sm_count blocks).
  EXPECT_EQ(auto_groups(200 * 1000, 200, 1, 16, 128, 1, h100), 2);
  EXPECT_EQ(auto_groups(132 * 1000, 132, 1, 16, 128, 1, h100), 4);
  GpuTarget a100 = gpu_target("sm_80");
  EXPECT_EQ(auto_groups(132 * 1000, 132, 1, 16, 128, 1, a100), a100.sm_count >= 132 ? 4 : 2);
  // The reduction buffer must fit the target's shared memory a block.
  EXPECT_TRUE(reduction_fits(4, 32, 128, 1, h100));  // 3 * 32 * 128 * 4 = 48 KiB
  EXPECT_FALSE(reduction_fits(4, 33, 128, 1, h100));
  // Block rows of 64 rows at an n tile of 128: 3 groups would need 64 KiB of reduction buffer.
  EXPECT_EQ(auto_groups(100 * 10000, 100, 1, 64, 128, 1, h100), 2);
}

TEST(SpmmDecisions, RolledGroupsAimForTheWarps) {
  const GpuTarget& h100 = default_gpu_target();
  // 1000 block rows of one column tile: 4 groups give 4000 warps, short of 4096: 8.
  EXPECT_EQ(rolled_groups(1000, 1, 32, 1, 1, 1000000, h100), 8);
  EXPECT_EQ(rolled_groups(2000, 1, 32, 1, 1, 1000000, h100), 4);
  EXPECT_EQ(rolled_groups(10, 1, 32, 1, 1, 1000000, h100), 16);
  // Step lanes: no more groups than leave every lane a step (g * lanes * blocks <= nnz).
  EXPECT_EQ(rolled_groups(10, 1, 32, 1, 32, 10 * 32 * 4, h100), 4);
  EXPECT_EQ(rolled_groups(10, 1, 32, 1, 32, 10 * 32 * 2, h100), 2);
}

TEST(SpmmDecisions, FragmentGroupsWhereTheGridIsShortOfWarps) {
  const GpuTarget& h100 = default_gpu_target();
  std::vector<std::vector<SpmmFragment>> long_rows(10, std::vector<SpmmFragment>(16));
  EXPECT_EQ(fragment_groups(long_rows, 64, 64, h100), 2);  // 20 warps
  std::vector<std::vector<SpmmFragment>> short_rows(10, std::vector<SpmmFragment>(15));
  EXPECT_EQ(fragment_groups(short_rows, 64, 64, h100), 1);
  // 8 warps an SM of the target: 1056 on an H100.
  std::vector<std::vector<SpmmFragment>> many(528, std::vector<SpmmFragment>(16));
  EXPECT_EQ(fragment_groups(many, 64, 64, h100), 1);  // 1056 warps
  GpuTarget more = h100;
  more.sm_count = 140;
  EXPECT_EQ(fragment_groups(many, 64, 64, more), 2);
}

TEST(SpmmDecisions, WideTilesInsteadOfGroups) {
  const GpuTarget& h100 = default_gpu_target();
  // 4 groups of 64 over 1024 columns, 200 block rows: a 256 tile keeps 800 blocks.
  EXPECT_EQ(choose_wide_tile(10000, 1024, 200, 16, 64, 4, 1, h100),
            (std::pair<std::int32_t, std::int32_t>{256, 1}));
  // 50 block rows: 256 gives 200 blocks.
  EXPECT_EQ(choose_wide_tile(10000, 1024, 50, 16, 64, 4, 1, h100),
            (std::pair<std::int32_t, std::int32_t>{256, 1}));
  // 40 block rows: 256 gives 160, 128 gives 320: the half-width tile with two groups.
  EXPECT_EQ(choose_wide_tile(10000, 1024, 40, 16, 64, 4, 1, h100),
            (std::pair<std::int32_t, std::int32_t>{128, 2}));
  // Above kLargeNnz, a one-wave grid more than half full (128 blocks of 256): the wide tile with the
  // one-wave groups.
  EXPECT_EQ(choose_wide_tile(100000, 256, 128, 16, 128, 2, 1, h100),
            (std::pair<std::int32_t, std::int32_t>{256, 2}));
  // Nothing wider fits: unchanged.
  EXPECT_EQ(choose_wide_tile(10000, 64, 10, 16, 64, 4, 1, h100),
            (std::pair<std::int32_t, std::int32_t>{64, 4}));
}

TEST(SpmmDecisions, BlockRowsBalanceGroupsAndMapRegroupedIndices) {
  const CsrMatrix a = rows_of(8, {4, 4});  // columns 0..3 in both rows
  const std::vector<SpmmGroup> g = block_groups(a, 0, 2, 2, {});
  ASSERT_EQ(g.size(), 2u);
  ASSERT_EQ(g[0].steps.size(), 2u);  // k 0 and 1: 4 of 8 nonzeros
  EXPECT_EQ(g[0].steps[0].entries.size(), 2u);
  EXPECT_EQ(g[1].steps.size(), 2u);
  const std::vector<char> covered{1, 0, 0, 0, 1, 0, 0, 0};  // k 0 taken by fragments
  EXPECT_EQ(block_groups(a, 0, 2, 1, covered)[0].steps.front().k, 1);
  const auto blocks = build_block_rows(a, {0, 1, 2}, 1, {}, {}, {7, 6, 5, 4, 3, 2, 1, 0});
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(blocks[1].row_begin, 1);
  EXPECT_EQ(blocks[0].groups[0].steps[0].entries[0].value_index, 7);
}

TEST(SpmmDecisions, EstimatesAndCaps) {
  const CsrMatrix a = test::random_csr(32, 64, 0.2, 5);
  SpmmPlan p = plan_spmm(a, test::problem_for(a, 16));
  ASSERT_EQ(p.family(), SpmmFamily::unrolled);
  EXPECT_EQ(estimate_registers(p), p.layout.rows_per_block + kSpmmRegisterOverhead);
  EXPECT_EQ(estimate_instructions(p), spmm_plan_loads(p) + spmm_plan_nnz(p));
  const GpuTarget& h100 = default_gpu_target();
  EXPECT_EQ(choose_max_registers(p, {}, h100), ceil_div(p.hints.estimated_registers + kLoadsInFlight, 8) * 8);
  GpuTarget few = h100;
  few.max_registers_per_thread = 40;
  EXPECT_EQ(choose_max_registers(p, {}, few), 40);
  SpmmOptions given;
  given.max_registers = p.hints.estimated_registers - 1;
  EXPECT_THROW(choose_max_registers(p, given, h100), UsageError);
  // A block of 1,024 threads launches only with at most 64 registers a thread: the cap takes it, and a
  // cap given above it is refused rather than made into a kernel that cannot launch.
  SpmmPlan wide = p;
  wide.layout.block_x = 1024;
  wide.hints.estimated_registers = 50;
  EXPECT_EQ(choose_max_registers(wide, {}, h100), 64);
  given.max_registers = 72;
  EXPECT_THROW(choose_max_registers(wide, given, h100), UsageError);
}

TEST(SpmmDecisions, ValueModeBakesWithinTheBudget) {
  const CsrMatrix a = test::random_csr(32, 64, 0.2, 5);
  SpmmPlan p = plan_spmm(a, test::problem_for(a, 16));
  SpmmOptions o;
  o.baked_instruction_budget = p.hints.estimated_instructions;
  EXPECT_EQ(choose_value_mode(p, o), SpmmValueMode::baked);
  o.baked_instruction_budget = p.hints.estimated_instructions - 1;
  EXPECT_EQ(choose_value_mode(p, o), SpmmValueMode::streamed);
  o.value_mode = SpmmValueMode::baked;
  EXPECT_EQ(choose_value_mode(p, o), SpmmValueMode::baked);
}

TEST(SpmmDecisions, ProgrammaticTriggersOnSmallFp32Kernels) {
  const CsrMatrix a = test::random_csr(32, 64, 0.2, 5);
  SpmmPlan p = plan_spmm(a, test::problem_for(a, 16));
  p.hints.estimated_instructions = kSpmmProgrammaticTriggerInstructions;
  EXPECT_EQ(choose_programmatic(p, {}), SpmmProgrammatic::trigger);
  p.hints.estimated_instructions = kSpmmProgrammaticTriggerInstructions + 1;
  EXPECT_EQ(choose_programmatic(p, {}), SpmmProgrammatic::wait);
  p.body = SpmmRolledBody{};  // rolled kernels always trigger
  EXPECT_EQ(choose_programmatic(p, {}), SpmmProgrammatic::trigger);
  SpmmPlan half = plan_spmm(a, {a.rows, a.cols, 16, SpmmNMode::fixed, false, false, DType::f16});
  EXPECT_EQ(choose_programmatic(half, {}), SpmmProgrammatic::wait);
  SpmmOptions trigger;
  trigger.programmatic = SpmmProgrammatic::trigger;
  EXPECT_THROW(choose_programmatic(half, trigger), UsageError);
  SpmmOptions off;
  off.programmatic = SpmmProgrammatic::off;
  EXPECT_EQ(choose_programmatic(p, off), SpmmProgrammatic::off);
}

TEST(SpmmDecisions, BlockletsForcedAndTensorCoreShapes) {
  EXPECT_TRUE(tensor_core_shape({16, 8}));
  EXPECT_TRUE(tensor_core_shape({8, 8}));
  EXPECT_FALSE(tensor_core_shape({4, 4}));
  const CsrMatrix a = test::random_csr(32, 32, 0.5, 7);
  SpmmOptions o;
  EXPECT_EQ(choose_blocklets(a, problem(32, 32, 16, DType::f16), o).max_blocks, 0);  // off
  set_blocklets(o, "16x16:0.25");
  const BlockletConfig cfg = choose_blocklets(a, problem(32, 32, 16, DType::f16), o);
  EXPECT_GT(cfg.max_blocks, 0);
  EXPECT_EQ(cfg.shape, (BlockShape{16, 16}));
  EXPECT_DOUBLE_EQ(cfg.fill_threshold, 0.25);
}

TEST(SpmmDecisions, PlanOnAnotherTargetReadsItsFigures) {
  // One SM fewer than the grid: the one-wave rule of the groups follows the target's SM count.
  const CsrMatrix a = test::random_csr(64, 256, 0.3, 11);
  const SpmmProblem pr = test::problem_for(a, 64);
  const SpmmPlan h100 = plan_spmm(a, pr, {}, default_gpu_target());
  EXPECT_EQ(to_json(h100), to_json(plan_spmm(a, pr)));  // the default target is sm_90
  GpuTarget tight = default_gpu_target();
  tight.shared_per_block = 0;  // no room for a reduction buffer: one group
  EXPECT_EQ(plan_spmm(a, pr, {}, tight).layout.groups, 1);
}

}  // namespace
}  // namespace sparsecc
