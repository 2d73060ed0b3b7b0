// SpMM plans (inspector, invariants, JSON) and the CPU interpreter against the fp64 reference.
#include "sparsecc/plan/spmm_plan.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <tuple>

#include "sparsecc/bundle/spmm_bundle.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/inspector/spmm_inspector.hpp"
#include "sparsecc/io/load.hpp"
#include "sparsecc/matrix/prune.hpp"
#include "sparsecc/plan/spmm_interpreter.hpp"
#include "sparsecc/reference/spmm.hpp"
#include "sparsecc/target/target.hpp"
#include "test_support.hpp"

namespace sparsecc {
namespace {

using test::interp_error;
using test::problem_for;

constexpr double kTolerance = 1e-5;  // rel L2 of the float32 kernel against the fp64 reference

// A random m x k matrix of the given density; every third row empty when empty_rows is set.
CsrMatrix random_csr(std::int64_t m, std::int64_t k, double density, std::uint64_t seed,
                     bool empty_rows = false) {
  return test::random_csr(m, k, density, seed, empty_rows ? 3 : 0, 1);
}

struct Shape {
  std::int64_t m, k, n;
  double density;
  bool empty_rows;
};

const Shape kShapes[] = {{1, 1, 1, 1.0, false},     {5, 7, 1, 0.5, true},       {37, 50, 49, 0.1, true},
                         {64, 64, 100, 0.2, false}, {13, 200, 33, 0.05, false}, {30, 9, 3, 0.0, false}};

TEST(SpmmPlan, InvariantsHoldAcrossShapesAndOptions) {
  std::uint64_t seed = 1;
  for (const Shape& s : kShapes) {
    const CsrMatrix a = random_csr(s.m, s.k, s.density, seed++, s.empty_rows);
    for (std::int32_t ny : {0, 1, 3, 8})
      for (std::int32_t gy : {0, 1, 3})
        for (auto split : {SpmmRowSplit::equal, SpmmRowSplit::balanced}) {
          SpmmOptions o;
          o.rows_per_block = ny;
          o.groups = gy;
          o.row_split = split;
          o.value_mode = gy == 3 ? SpmmValueMode::streamed : SpmmValueMode::baked;
          const SpmmPlan p = plan_spmm(a, problem_for(a, s.n), o);
          const auto errors = check_plan(p, a);
          EXPECT_TRUE(errors.empty())
              << s.m << "x" << s.k << " ny " << ny << " gy " << gy << ": " << errors.front();
          EXPECT_EQ(spmm_plan_nnz(p), a.nnz());
        }
  }
}

TEST(SpmmPlan, DefaultsFollowTheDocumentedRule) {
  const CsrMatrix a = random_csr(64, 256, 0.1, 3);
  const SpmmPlan p = plan_spmm(a, problem_for(a, 49));
  EXPECT_EQ(p.layout.rows_per_block, 1);  // no taller block row keeps 100 blocks
  EXPECT_EQ(p.layout.n_tile, 64);
  EXPECT_EQ(p.block_rows(), 64);
  EXPECT_EQ(p.column_tiles(49), 1);
  EXPECT_EQ(p.layout.groups, 1);  // ~25 nonzeros per block row
  EXPECT_EQ(p.value_mode(), SpmmValueMode::baked);
  EXPECT_EQ(p.hints.estimated_registers, 1 + kSpmmRegisterOverhead);
  EXPECT_EQ(p.hints.max_registers, 48);  // the estimate and 16 for loads in flight, rounded up to 8
  EXPECT_EQ(p.hints.estimated_instructions, spmm_plan_loads(p) + a.nnz());
  EXPECT_EQ(p.hints.assembler_opt_level, 3);
  SpmmOptions level;
  level.assembler_opt_level = 1;
  EXPECT_EQ(plan_spmm(a, problem_for(a, 49), level).hints.assembler_opt_level, 1);
  const SpmmPlan tall = plan_spmm(a, problem_for(a, 3136));  // 49 column tiles of 64
  EXPECT_EQ(tall.layout.n_tile, 64);
  EXPECT_EQ(tall.layout.rows_per_block, 16);  // 4 block rows x 49 tiles: 196 blocks
  // N = 196: tiles of 128 leave one row per block row (64 x 2 blocks); tiles of 64 would give 4
  // column tiles and block rows of 2 (32 x 4 blocks), but of ~51 nonzeros, too few for groups: 128.
  EXPECT_EQ(plan_spmm(a, problem_for(a, 196)).layout.n_tile, 128);
  // The same shape with ~410 nonzeros a block row of 2 takes the narrow tile (and 4 groups).
  const CsrMatrix heavy = random_csr(64, 2048, 0.1, 3);
  const SpmmPlan narrow = plan_spmm(heavy, problem_for(heavy, 196));
  EXPECT_EQ(narrow.layout.n_tile, 64);
  EXPECT_EQ(narrow.layout.rows_per_block, 2);
  EXPECT_EQ(narrow.layout.groups, 4);
  // Where 128 already gives 16 rows a block row, it stays (more tiles would only double the grid),
  // and so it does above kLargeNnz nonzeros.
  const CsrMatrix tall_a = random_csr(2048, 64, 0.1, 3);
  const SpmmPlan kept = plan_spmm(tall_a, problem_for(tall_a, 196));
  EXPECT_EQ(kept.layout.n_tile, 128);
  EXPECT_EQ(kept.layout.rows_per_block, 16);
  const CsrMatrix large = random_csr(256, 2048, 0.1, 3);  // ~52k nonzeros
  EXPECT_EQ(plan_spmm(large, problem_for(large, 196)).layout.n_tile, 128);
  EXPECT_EQ(plan_spmm(a, problem_for(a, 1)).layout.n_tile, 32);

  // Tall block rows: 32 rows where nnz x N reaches 10M multiply-adds and the 32-row grid keeps 100
  // blocks. The 2048 x 512 Transformer layer at N = 256 (27M) takes 64 block rows of 32 x 2 tiles of
  // 128 columns x 4 groups (one wave of 512-thread blocks); the 512 x 2048 one would have only 32
  // blocks, so it keeps 8 rows and its one-wave T128/G4. The light 64 x 256 layer above (5M at N =
  // 3136) keeps 16 rows, and takes 32 at N = 50176 (2 block rows x 784 tiles).
  const CsrMatrix ffn1 = random_csr(2048, 512, 0.1, 5);
  const SpmmPlan tall_ffn = plan_spmm(ffn1, problem_for(ffn1, 256));
  EXPECT_EQ(tall_ffn.layout.rows_per_block, 32);
  EXPECT_EQ(tall_ffn.layout.n_tile, 128);
  EXPECT_EQ(tall_ffn.layout.groups, 4);
  EXPECT_EQ(tall_ffn.column_tiles(256) * tall_ffn.block_rows(), 128);
  const CsrMatrix ffn2 = random_csr(512, 2048, 0.1, 5);
  const SpmmPlan kept_g4 = plan_spmm(ffn2, problem_for(ffn2, 256));
  EXPECT_EQ(kept_g4.layout.rows_per_block, 8);
  EXPECT_EQ(kept_g4.layout.n_tile, 128);
  EXPECT_EQ(kept_g4.layout.groups, 4);
  const SpmmPlan batch16 = plan_spmm(a, problem_for(a, 50176));
  EXPECT_EQ(batch16.layout.rows_per_block, 32);
  EXPECT_EQ(batch16.block_rows(), 2);
  // Half-wide tiles: 128 x 512 at N = 12544 (SparseRT p03 at batch 16) would take 4 block rows x 196
  // tiles of 64 columns x 4 groups; 256 columns leave 196 blocks, below 200, so 128 columns x 2
  // groups (392 blocks). 256 x 1024 at N = 3136 (p05): 104 blocks at 256 columns, 200 at 128.
  for (const auto& [m, k, n] : {std::tuple{128, 512, 12544}, std::tuple{256, 1024, 3136}}) {
    const CsrMatrix layer = random_csr(m, k, 0.1, 6);
    const SpmmPlan half = plan_spmm(layer, problem_for(layer, n));
    EXPECT_EQ(half.layout.rows_per_block, 32) << m << "x" << k;
    EXPECT_EQ(half.layout.n_tile, 128) << m << "x" << k;
    EXPECT_EQ(half.layout.groups, 2) << m << "x" << k;
  }
  SpmmOptions sixteen;
  sixteen.rows_per_block = 16;  // asked-for rows are honored
  EXPECT_EQ(plan_spmm(a, problem_for(a, 50176), sixteen).layout.rows_per_block, 16);
  SpmmOptions pairs;
  pairs.cols_per_thread = 2;  // two columns a thread double the accumulators: 16 rows
  EXPECT_EQ(plan_spmm(a, problem_for(a, 50176), pairs).layout.rows_per_block, 16);
  // Above kLargeNnz, below the tall work, a wide tile whose grid is one wave more than half full:
  // 2048 x 512 with ~47k nonzeros at N = 200 (9.4M) takes 128 blocks of 224 columns x 2 groups (448
  // threads) instead of 256 blocks of 128 x 2.
  const CsrMatrix ffn_light = random_csr(2048, 512, 0.045, 5);
  const SpmmPlan one_wave = plan_spmm(ffn_light, problem_for(ffn_light, 200));
  EXPECT_EQ(one_wave.layout.rows_per_block, 16);
  EXPECT_EQ(one_wave.layout.n_tile, 224);
  EXPECT_EQ(one_wave.layout.groups, 2);
  EXPECT_EQ(one_wave.column_tiles(200) * one_wave.block_rows(), 128);
  const CsrMatrix small_ffn = random_csr(2048, 512, 0.03, 5);  // ~31k nonzeros: not large
  EXPECT_EQ(plan_spmm(small_ffn, problem_for(small_ffn, 256)).layout.n_tile, 128);

  const CsrMatrix wide = random_csr(16, 4096, 0.1, 4);  // 16 block rows of ~400 nonzeros
  const SpmmPlan g = plan_spmm(wide, problem_for(wide, 49));
  EXPECT_EQ(g.layout.groups, 4);
  EXPECT_EQ(g.layout.block_x, 256);
  EXPECT_EQ(g.layout.shared_bytes, 3 * 1 * 64 * 4);

  SpmmOptions small_budget;
  small_budget.baked_instruction_budget = 10;
  const SpmmPlan s = plan_spmm(a, problem_for(a, 49), small_budget);
  EXPECT_EQ(s.value_mode(), SpmmValueMode::streamed);
  EXPECT_EQ(static_cast<std::int64_t>(s.packed_order().size()), a.nnz());
}

// Rows 0..63 hold `heavy` nonzeros, the rest `light` (columns spread over k).
CsrMatrix uneven_csr(std::int64_t m, std::int64_t k, std::int64_t heavy, std::int64_t light) {
  CsrMatrix a;
  a.rows = m;
  a.cols = k;
  for (std::int64_t r = 0; r < m; ++r) {
    const std::int64_t count = r < 64 ? heavy : light;
    for (std::int64_t j = 0; j < count; ++j) {
      a.col_idx.push_back(static_cast<std::int32_t>((j * k / count + r) % k));
      a.values.push_back(0.5 + 0.01 * static_cast<double>((r + j) % 17));
    }
    std::sort(a.col_idx.end() - count, a.col_idx.end());
    a.row_ptr.push_back(a.nnz());
  }
  return a;
}

// The automatic row split: balanced where the equal panels of an fp32 unrolled plan are uneven (the
// heaviest 35 % above the mean or more, block rows of 4 rows or more, N below 4096), equal
// otherwise, and what the options say when they say it.
TEST(SpmmPlan, UnevenPanelsAreBalancedByDefault) {
  const CsrMatrix skewed = uneven_csr(512, 512, 200, 30);  // 16-row panels: 3200 nonzeros against 480
  const SpmmPlan p = plan_spmm(skewed, problem_for(skewed, 256));
  EXPECT_EQ(p.layout.row_split, SpmmRowSplit::balanced);
  EXPECT_EQ(p.block_rows(), 32);
  EXPECT_NEAR(interp_error(p, skewed, 256, 7), 0.0, kTolerance);
  std::int64_t heaviest = 0;
  for (const SpmmBlockRow& b : p.layout.blocks)
    heaviest = std::max(heaviest, skewed.row_ptr[b.row_end] - skewed.row_ptr[b.row_begin]);
  EXPECT_LT(heaviest, 3200);
  SpmmOptions equal;
  equal.row_split = SpmmRowSplit::equal;
  EXPECT_EQ(plan_spmm(skewed, problem_for(skewed, 256), equal).layout.row_split, SpmmRowSplit::equal);
  // Batch-16 widths are not balanced (there the tall plan clusters these rows instead).
  EXPECT_NE(plan_spmm(skewed, problem_for(skewed, 4096)).layout.row_split, SpmmRowSplit::balanced);
  const CsrMatrix even = uneven_csr(512, 512, 40, 40);
  EXPECT_EQ(plan_spmm(even, problem_for(even, 256)).layout.row_split, SpmmRowSplit::equal);
  // Block rows of fewer than 4 rows (96 rows at N = 49 take one row each) and rolled plans stay equal.
  const CsrMatrix rows = uneven_csr(96, 512, 200, 30);
  const SpmmPlan single = plan_spmm(rows, problem_for(rows, 49));
  ASSERT_LT(single.layout.rows_per_block, 4);
  EXPECT_EQ(single.layout.row_split, SpmmRowSplit::equal);
  SpmmOptions rolled;
  rolled.value_mode = SpmmValueMode::rolled;
  EXPECT_EQ(plan_spmm(skewed, problem_for(skewed, 49), rolled).layout.row_split, SpmmRowSplit::equal);
  // The automatic groups fit the reduction buffer to the tallest block row of the balanced split
  // (up to twice the 32 rows asked for), not to the rows asked for.
  SpmmOptions tall;
  tall.rows_per_block = 32;
  const SpmmPlan t = plan_spmm(skewed, problem_for(skewed, 256), tall);
  EXPECT_EQ(t.layout.row_split, SpmmRowSplit::balanced);
  EXPECT_GT(t.layout.rows_per_block, 32);
  EXPECT_GT(t.layout.groups, 1);
  EXPECT_LE(t.layout.shared_bytes, default_gpu_target().shared_per_block);
  EXPECT_TRUE(check_plan(t, skewed).empty());
  EXPECT_NEAR(interp_error(t, skewed, 256, 8), 0.0, kTolerance);
}

// Even rows take their columns from the first half of K, odd rows from the second: equal panels of
// consecutive rows touch both halves, clustered panels one.
CsrMatrix interleaved_csr(std::int64_t m, std::int64_t k, std::int64_t per_row) {
  CsrMatrix a;
  a.rows = m;
  a.cols = k;
  for (std::int64_t r = 0; r < m; ++r) {
    const std::int64_t base = r % 2 ? k / 2 : 0;
    for (std::int64_t j = 0; j < per_row; ++j) {
      a.col_idx.push_back(static_cast<std::int32_t>(base + (j * 7 + r * 3) % (k / 2)));
      a.values.push_back(0.25 + 0.01 * static_cast<double>((r + j) % 23));
    }
    std::sort(a.col_idx.end() - per_row, a.col_idx.end());
    a.col_idx.erase(std::unique(a.col_idx.end() - per_row, a.col_idx.end()), a.col_idx.end());
    a.values.resize(a.col_idx.size());
    a.row_ptr.push_back(a.nnz());
  }
  return a;
}

// The automatic clustered rows: tall plans at N above 1024 cluster their rows where the clustered
// panels load at most 90 % of the equal panels' rows of B; not at N <= 1024, not where clustering
// saves little, not when the split is asked for.
TEST(SpmmPlan, TallWidePlansClusterRowsWhereThatCutsLoads) {
  const CsrMatrix a = interleaved_csr(512, 512, 40);
  const SpmmPlan p = plan_spmm(a, problem_for(a, 4096));
  EXPECT_EQ(p.layout.panel_rows, 32);
  ASSERT_EQ(p.layout.row_split, SpmmRowSplit::clustered);
  EXPECT_EQ(static_cast<std::int64_t>(p.layout.row_order.size()), a.rows);
  EXPECT_TRUE(check_plan(p, a).empty());
  EXPECT_EQ(spmm_plan_nnz(p), a.nnz());
  EXPECT_NEAR(interp_error(p, a, 4096, 21), 0.0, kTolerance);
  SpmmOptions equal;
  equal.row_split = SpmmRowSplit::equal;
  const SpmmPlan e = plan_spmm(a, problem_for(a, 4096), equal);
  EXPECT_EQ(e.layout.row_split, SpmmRowSplit::equal);
  EXPECT_LE(static_cast<double>(spmm_plan_loads(p)), 0.9 * static_cast<double>(spmm_plan_loads(e)));
  // N = 1024: still tall (20k nonzeros x 1024), one column tile too few for the rule.
  const SpmmPlan narrow = plan_spmm(a, problem_for(a, 1024));
  EXPECT_EQ(narrow.layout.panel_rows, 32);
  EXPECT_NE(narrow.layout.row_split, SpmmRowSplit::clustered);
  EXPECT_TRUE(narrow.layout.row_order.empty());
  // Uniform random rows: 32-row panels touch nearly every column either way.
  const CsrMatrix uniform = random_csr(512, 512, 0.1, 9);
  const SpmmPlan u = plan_spmm(uniform, problem_for(uniform, 4096));
  EXPECT_EQ(u.layout.panel_rows, 32);
  EXPECT_EQ(u.layout.row_split, SpmmRowSplit::equal);
  // Light kernels (16-row plans) are not clustered either.
  const CsrMatrix light = interleaved_csr(64, 512, 8);
  const SpmmPlan l = plan_spmm(light, problem_for(light, 4096));
  EXPECT_LT(l.layout.panel_rows, 32);
  EXPECT_NE(l.layout.row_split, SpmmRowSplit::clustered);
}

// Any combination of plan options either plans (a plan that passes check_plan and, in fp32,
// computes the product) or is refused with a UsageError; nothing else escapes, on random and skewed
// matrices. Automatic groups always fit their reduction buffer in shared memory (a balanced split's
// block rows may be twice as tall as asked; rolled and half plans keep two columns a thread). A
// bundle's metadata re-plans to the same block rows, groups and steps (what `verify` interprets).
// Programmatic launches (SpmmPlan::programmatic): every plan waits for its predecessor; fp32 plans
// rolled or unrolled of at most kSpmmProgrammaticTriggerInstructions also let the next grid launch
// early (programmatic_trigger), half plans never. SpmmOptions::programmatic overrides the rule, but a
// half plan refuses the trigger. check_plan refuses a half plan that triggers and a trigger without
// the wait; the plan's JSON carries both (absent: not programmatic; a trigger absent: as plans had it
// before the key, with the wait).
TEST(SpmmPlan, ProgrammaticRule) {
  const CsrMatrix a = random_csr(192, 192, 0.1, 6);
  const SpmmPlan small = plan_spmm(a, {a.rows, a.cols, 196, SpmmNMode::fixed, false, false, DType::f32});
  EXPECT_LE(small.hints.estimated_instructions, kSpmmProgrammaticTriggerInstructions);
  EXPECT_TRUE(small.hints.programmatic);
  EXPECT_TRUE(small.hints.programmatic_trigger);
  const SpmmProblem small_problem{a.rows, a.cols, 196, SpmmNMode::fixed, false, false, DType::f32};
  for (const auto& [mode, waits, triggers] :
       {std::tuple{SpmmProgrammatic::off, false, false}, std::tuple{SpmmProgrammatic::wait, true, false},
        std::tuple{SpmmProgrammatic::trigger, true, true}}) {
    SpmmOptions o;
    o.programmatic = mode;
    const SpmmPlan forced = plan_spmm(a, small_problem, o);
    EXPECT_EQ(forced.hints.programmatic, waits);
    EXPECT_EQ(forced.hints.programmatic_trigger, triggers);
    EXPECT_TRUE(check_plan(forced, a).empty());
    const SpmmPlan read = plan_from_json(to_json(forced));
    EXPECT_EQ(read.hints.programmatic, waits);
    EXPECT_EQ(read.hints.programmatic_trigger, triggers);
  }
  EXPECT_EQ(parse_programmatic("auto", "--programmatic"), std::nullopt);
  EXPECT_EQ(parse_programmatic("wait", "--programmatic"), SpmmProgrammatic::wait);
  EXPECT_THROW(parse_programmatic("early", "--programmatic"), UsageError);
  SpmmPlan trigger_alone = small;
  trigger_alone.hints.programmatic = false;
  trigger_alone.hints.programmatic_trigger = true;
  EXPECT_FALSE(check_plan(trigger_alone, a).empty());
  const CsrMatrix big = random_csr(2048, 512, 0.1, 5);  // ~105k nonzeros
  const SpmmPlan unrolled =
      plan_spmm(big, {big.rows, big.cols, 256, SpmmNMode::fixed, false, false, DType::f32});
  EXPECT_GT(unrolled.hints.estimated_instructions, kSpmmProgrammaticTriggerInstructions);
  EXPECT_TRUE(unrolled.hints.programmatic);
  EXPECT_FALSE(unrolled.hints.programmatic_trigger);
  SpmmOptions forced_trigger, forced_wait;
  forced_trigger.programmatic = SpmmProgrammatic::trigger;
  forced_wait.programmatic = SpmmProgrammatic::wait;
  EXPECT_TRUE(plan_spmm(big, unrolled.problem, forced_trigger).hints.programmatic_trigger);
  const SpmmPlan rolled =
      plan_spmm(big, {big.rows, big.cols, 49, SpmmNMode::fixed, false, false, DType::f32});
  ASSERT_EQ(rolled.value_mode(), SpmmValueMode::rolled);
  EXPECT_TRUE(rolled.hints.programmatic);
  EXPECT_TRUE(rolled.hints.programmatic_trigger);
  SpmmPlan half = plan_spmm(a, {a.rows, a.cols, 196, SpmmNMode::fixed, false, false, DType::f16});
  EXPECT_TRUE(half.hints.programmatic);
  EXPECT_FALSE(half.hints.programmatic_trigger);
  EXPECT_TRUE(check_plan(half, a).empty());
  EXPECT_TRUE(plan_spmm(a, half.problem, forced_wait).hints.programmatic);
  EXPECT_THROW(plan_spmm(a, half.problem, forced_trigger), UsageError);
  half.hints.programmatic_trigger = true;
  EXPECT_FALSE(check_plan(half, a).empty());
  EXPECT_TRUE(plan_from_json(to_json(small)).hints.programmatic_trigger);
  EXPECT_FALSE(plan_from_json(to_json(unrolled)).hints.programmatic_trigger);
  nlohmann::json old_plan = to_json(small);
  old_plan["hints"].erase("programmatic_trigger");
  EXPECT_TRUE(plan_from_json(old_plan).hints.programmatic_trigger);
  old_plan["hints"].erase("programmatic");
  EXPECT_FALSE(plan_from_json(old_plan).hints.programmatic);
  EXPECT_FALSE(plan_from_json(old_plan).hints.programmatic_trigger);
}

TEST(SpmmPlan, RandomOptionsPlanOrRefuseClearly) {
  std::mt19937_64 rng(2026);
  const auto pick = [&](std::initializer_list<std::int32_t> v) {
    return *(v.begin() + static_cast<std::ptrdiff_t>(rng() % v.size()));
  };
  const CsrMatrix mats[] = {random_csr(1, 1, 1.0, 11), random_csr(37, 50, 0.1, 12, true),
                            random_csr(130, 70, 0.3, 13), uneven_csr(200, 96, 60, 3),
                            random_csr(40, 9, 0.0, 14)};
  int planned = 0, refused = 0;
  for (int trial = 0; trial < 1500; ++trial) {
    const CsrMatrix& a = mats[rng() % std::size(mats)];
    SpmmOptions o;
    o.rows_per_block = pick({0, 0, 1, 2, 5, 16, 32, 64, 65});
    o.n_tile = pick({0, 0, 1, 32, 33, 256, 1024, 2048});
    o.groups = pick({0, 0, 1, 2, 3, 8, 16});
    if (rng() % 3 == 0) o.row_split = rng() % 2 ? SpmmRowSplit::equal : SpmmRowSplit::balanced;
    if (rng() % 3 == 0)
      o.value_mode = pick({0, 1, 2}) == 0 ? SpmmValueMode::baked
                     : rng() % 2          ? SpmmValueMode::streamed
                                          : SpmmValueMode::rolled;
    if (rng() % 4 == 0) o.max_registers = pick({0, 16, 64, 255, 256});
    if (rng() % 3 == 0) o.cols_per_thread = pick({1, 2, 2, 3});
    const std::int64_t n = pick({1, 2, 49, 64, 65, 300});
    SpmmProblem problem = problem_for(a, n, rng() % 2 != 0, rng() % 2 != 0,
                                      rng() % 3 == 0 ? SpmmNMode::runtime : SpmmNMode::fixed);
    if (rng() % 4 == 0) problem.dtype = DType::f16;
    SpmmPlan p;
    try {
      p = plan_spmm(a, problem, o);
    } catch (const UsageError& e) {
      EXPECT_FALSE(o.groups == 0 && std::string(e.what()).find("shared memory") != std::string::npos)
          << "trial " << trial << ": automatic groups refused: " << e.what();
      ++refused;
      continue;
    }
    ++planned;
    const auto errors = check_plan(p, a);
    ASSERT_TRUE(errors.empty()) << "trial " << trial << ": " << errors.front();
    EXPECT_LE(p.layout.shared_bytes, default_gpu_target().shared_per_block) << "trial " << trial;
    rt::Bundle b;
    b.metadata = spmm_bundle_metadata(p, a, gpu_target("sm_90"));
    b.plan = to_json(p).dump();
    const SpmmPlan again = spmm_bundle_plan(b, a);
    EXPECT_EQ(to_json(again).at("blocks"), to_json(p).at("blocks")) << "trial " << trial;
    if (problem.dtype == DType::f32) {
      EXPECT_NEAR(interp_error(p, a, n, static_cast<std::uint64_t>(trial)), 0.0, kTolerance)
          << "trial " << trial;
    }
  }
  EXPECT_GT(planned, 500);
  EXPECT_GT(refused, 100);
}

TEST(SpmmPlan, RejectsBadConfigurations) {
  const CsrMatrix a = random_csr(100, 20, 0.3, 5);
  SpmmOptions o;
  o.rows_per_block = kSpmmMaxAccumulators + 1;
  EXPECT_THROW(plan_spmm(a, problem_for(a, 8), o), UsageError);
  o = {};
  o.n_tile = 512;
  o.groups = 3;
  EXPECT_THROW(plan_spmm(a, problem_for(a, 8), o), UsageError);
  o = {};
  o.assembler_opt_level = 4;
  EXPECT_THROW(plan_spmm(a, problem_for(a, 8), o), UsageError);
  EXPECT_THROW(plan_spmm(a, {100, 21, 8}, {}), UsageError);
  EXPECT_THROW(plan_spmm(a, {100, 20, 0}, {}), UsageError);
}

TEST(SpmmPlan, GroupsStayWithinTheBalanceBound) {
  const CsrMatrix a = random_csr(8, 3000, 0.2, 6);
  SpmmOptions o;
  o.rows_per_block = 8;
  o.groups = 5;
  const SpmmPlan p = plan_spmm(a, problem_for(a, 64), o);
  ASSERT_TRUE(check_plan(p, a).empty());
  const std::int64_t target = (a.nnz() + 4) / 5;
  for (const auto& g : p.layout.blocks[0].groups) {
    std::int64_t nnz = 0;
    for (const auto& s : g.steps) nnz += static_cast<std::int64_t>(s.entries.size());
    EXPECT_LE(nnz, target + 7);  // at most one column (8 rows) past the target
    EXPECT_GE(nnz, target - 8);
  }
}

TEST(SpmmPlan, BalancedSplitEvensBlockRowNonzeros) {
  // Dense first rows, sparse tail: equal panels are very uneven.
  DenseMatrix d(64, 64);
  for (std::int64_t r = 0; r < 64; ++r)
    for (std::int64_t c = 0; c < (r < 8 ? 64 : 4); ++c) d(r, c) = 1.0 + static_cast<double>(r);
  const CsrMatrix a = csr_from_dense(d, DType::f32);
  const auto max_block_nnz = [&](const SpmmPlan& p) {
    std::int64_t most = 0;
    for (const auto& b : p.layout.blocks)
      most = std::max(most, a.row_ptr[b.row_end] - a.row_ptr[b.row_begin]);
    return most;
  };
  SpmmOptions o;
  o.rows_per_block = 4;
  o.row_split = SpmmRowSplit::equal;  // the automatic split would balance these panels
  const SpmmPlan equal = plan_spmm(a, problem_for(a, 32), o);
  o.row_split = SpmmRowSplit::balanced;
  const SpmmPlan balanced = plan_spmm(a, problem_for(a, 32), o);
  EXPECT_TRUE(check_plan(balanced, a).empty());
  EXPECT_EQ(balanced.block_rows(), equal.block_rows());
  EXPECT_LE(balanced.layout.rows_per_block, 8);
  EXPECT_LT(max_block_nnz(balanced), max_block_nnz(equal));
}

TEST(SpmmPlan, CheckPlanFindsBrokenPlans) {
  const CsrMatrix a = random_csr(12, 30, 0.3, 7);
  const SpmmPlan good = plan_spmm(a, problem_for(a, 16));
  ASSERT_TRUE(check_plan(good, a).empty());
  SpmmPlan p = good;
  p.layout.blocks[0].groups[0].steps[0].entries.pop_back();
  EXPECT_FALSE(check_plan(p, a).empty());
  p = good;
  p.layout.blocks[1].groups[0].steps.push_back(p.layout.blocks[1].groups[0].steps.back());
  EXPECT_FALSE(check_plan(p, a).empty());
  p = good;
  p.layout.blocks[0].row_end += 1;
  EXPECT_FALSE(check_plan(p, a).empty());
  p = good;
  p.layout.shared_bytes = 4;
  EXPECT_FALSE(check_plan(p, a).empty());
  p = good;
  p.hints.assembler_opt_level = -1;
  EXPECT_FALSE(check_plan(p, a).empty());
  SpmmOptions o;
  o.value_mode = SpmmValueMode::streamed;
  p = plan_spmm(a, problem_for(a, 16), o);
  std::swap(p.unrolled()->packed_order[0], p.unrolled()->packed_order[1]);
  EXPECT_FALSE(check_plan(p, a).empty());
}

TEST(SpmmPlan, JsonRoundTrip) {
  const CsrMatrix a = random_csr(21, 40, 0.2, 8, true);
  SpmmOptions o;
  o.groups = 2;
  o.value_mode = SpmmValueMode::streamed;
  o.row_split = SpmmRowSplit::balanced;
  const SpmmPlan p = plan_spmm(a, problem_for(a, 49, true, true, SpmmNMode::runtime), o);
  const nlohmann::json j = to_json(p);
  const SpmmPlan q = plan_from_json(nlohmann::json::parse(j.dump()));
  EXPECT_EQ(to_json(q), j);
  EXPECT_TRUE(check_plan(q, a).empty());
  EXPECT_EQ(j["problem"]["n_mode"], "runtime");
  EXPECT_EQ(j["layout"]["block_rows"], p.block_rows());
  nlohmann::json bad = j;
  bad["body"]["value_mode"] = "sometimes";
  EXPECT_THROW(plan_from_json(bad), UsageError);
  bad = j;
  bad.erase("blocks");
  EXPECT_THROW(plan_from_json(bad), UsageError);
}

TEST(SpmmInterp, HandMatrixIsExact) {
  DenseMatrix d(4, 6);
  d(0, 0) = 10, d(0, 1) = 20, d(1, 1) = 30, d(1, 3) = 40, d(2, 2) = 50, d(2, 3) = 60, d(2, 4) = 70,
       d(3, 5) = 80;
  const CsrMatrix a = csr_from_dense(d);
  DenseMatrix x(6, 1);
  for (int i = 0; i < 6; ++i) x(i, 0) = i + 1;
  for (std::int32_t ny : {1, 2, 4}) {
    SpmmOptions o;
    o.rows_per_block = ny;
    const SpmmPlan p = plan_spmm(a, problem_for(a, 1), o);
    const DenseMatrix y = interpret_spmm(p, spmm_kernel_values(p, a), x);
    EXPECT_EQ(y.data, (std::vector<double>{50, 220, 740, 480}));
  }
}

TEST(SpmmInterp, MatchesReferenceOnRandomMatrices) {
  std::uint64_t seed = 100;
  for (const Shape& s : kShapes)
    for (int variant = 0; variant < 6; ++variant) {
      const CsrMatrix a = random_csr(s.m, s.k, s.density, seed++, s.empty_rows);
      SpmmOptions o;
      o.rows_per_block = 1 + variant % 5;
      o.groups = 1 + variant % 3;
      o.n_tile = variant % 2 ? 32 : 0;
      o.value_mode = variant % 2 ? SpmmValueMode::streamed : SpmmValueMode::baked;
      o.row_split = variant % 4 == 3 ? SpmmRowSplit::balanced : SpmmRowSplit::equal;
      const auto mode = variant >= 3 ? SpmmNMode::runtime : SpmmNMode::fixed;
      const SpmmPlan p = plan_spmm(a, problem_for(a, s.n, variant % 3 == 1, variant % 2 == 0, mode), o);
      ASSERT_TRUE(check_plan(p, a).empty());
      const std::int64_t n = mode == SpmmNMode::runtime ? s.n + 5 : s.n;  // runtime N differs from the hint
      EXPECT_LE(interp_error(p, a, n, seed), kTolerance) << s.m << "x" << s.k << " variant " << variant;
    }
}

TEST(SpmmInterp, RejectsMismatchedInputs) {
  const CsrMatrix a = random_csr(8, 8, 0.5, 9);
  const SpmmPlan p = plan_spmm(a, problem_for(a, 4, true));
  const std::vector<double> bias(8, 1.0);
  EXPECT_THROW(interpret_spmm(p, spmm_kernel_values(p, a), random_dense(8, 5, 1), &bias), UsageError);
  EXPECT_THROW(interpret_spmm(p, spmm_kernel_values(p, a), random_dense(7, 4, 1), &bias), UsageError);
  EXPECT_THROW(interpret_spmm(p, spmm_kernel_values(p, a), random_dense(8, 4, 1), nullptr), UsageError);
}

TEST(SpmmInterp, RealDlmcLayers) {
  SPARSECC_DATA_OR_SKIP(dir, "dlmc/rn50/magnitude_pruning/0.9");
  const char* layers[] = {"bottleneck_1_block_group1_2_1", "bottleneck_3_block_group2_1_1",
                          "bottleneck_2_block_group2_3_1"};
  for (const char* layer : layers) {
    const CsrMatrix a = load_matrix((dir / (std::string(layer) + ".smtx.gz")).string());
    for (int variant = 0; variant < 2; ++variant) {
      SpmmOptions o;
      o.groups = variant ? 2 : 0;
      o.value_mode = variant ? SpmmValueMode::streamed : SpmmValueMode::baked;
      const SpmmPlan p = plan_spmm(a, problem_for(a, 49, variant == 1, true), o);
      ASSERT_TRUE(check_plan(p, a).empty()) << layer;
      EXPECT_LE(interp_error(p, a, 49, 11), kTolerance) << layer;
    }
  }
}

TEST(SpmmInterp, RealMobileNetLayers) {
  SPARSECC_DATA_OR_SKIP(file, "sparsert/mobilenet_v1_sparse90.npz");
  for (int layer : {0, 6, 11}) {
    const CsrMatrix a = load_matrix(file.string() + ":contraction_1x1_" + std::to_string(layer));
    const SpmmPlan p = plan_spmm(a, problem_for(a, 49, true, true, SpmmNMode::runtime));
    ASSERT_TRUE(check_plan(p, a).empty()) << layer;
    EXPECT_LE(interp_error(p, a, 49, 12), kTolerance) << layer;
  }
}

// The published end-to-end case (test::load_mobilenet_layer0): `result` is not layer 0 of `input_image`
// under any epilogue, it is layer 0 (no bias, no ReLU) of the image through 3x3 depthwise filters; with
// those filters recovered, the fp64 reference and the automatic plan's interpreter in every value mode
// reproduce it from the image.
TEST(SpmmInterp, MobileNetLayer0ReproducesThePublishedResult) {
  SPARSECC_DATA_OR_SKIP(file, "sparsert/mobilenet_v1_sparse90.npz");
  const test::PublishedLayer l = test::load_mobilenet_layer0(file);
  for (int e = 0; e < 4; ++e) {
    const bool bias = e & 1, relu = e & 2;
    const double err = test::max_rel_error(spmm(l.a, l.image, bias ? &l.bias : nullptr, relu), l.result);
    std::printf("[ published ] image itself, bias %d, ReLU %d: %.3g\n", bias, relu, err);
    EXPECT_GT(err, 0.5);
  }
  const double fp64 = test::max_rel_error(spmm(l.a, l.input), l.result);
  std::printf("[ published ] fp64 reference, filtered image: %.3g\n", fp64);
  EXPECT_LE(fp64, 1e-6);
  for (const SpmmValueMode mode : {SpmmValueMode::baked, SpmmValueMode::streamed, SpmmValueMode::rolled}) {
    SpmmOptions o;
    o.value_mode = mode;
    const SpmmPlan p = plan_spmm(l.a, problem_for(l.a, l.input.cols), o);
    ASSERT_TRUE(check_plan(p, l.a).empty());
    const double err = test::max_rel_error(interpret_spmm(p, spmm_kernel_values(p, l.a), l.input), l.result);
    std::printf("[ published ] interpreter, %s: %.3g\n", to_string(mode), err);
    EXPECT_LE(err, 1e-5);
  }
}

}  // namespace
}  // namespace sparsecc
