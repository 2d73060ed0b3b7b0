// Rolled SpMM plans: the automatic rule, the step table, the interpreter against the fp64 reference
// and against the unrolled plan of the same tiling, the CUDA C++ emitter (NVRTC, no spills), and the
// bundle and runtime checks of the table.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <functional>
#include <tuple>

#include "sparsecc/bundle/spmm_bundle.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/compile/nvrtc.hpp"
#include "sparsecc/compile/resource_usage.hpp"
#include "sparsecc/emit/spmm_cuda.hpp"
#include "sparsecc/emit/spmm_ptx.hpp"
#include "sparsecc/inspector/spmm_inspector.hpp"
#include "sparsecc/io/load.hpp"
#include "sparsecc/matrix/prune.hpp"
#include "sparsecc/plan/spmm_interpreter.hpp"
#include "sparsecc/reference/spmm.hpp"
#include "sparsecc/runtime/bundle.hpp"
#include "test_support.hpp"

namespace sparsecc {
namespace {

using test::count;

// Random matrices with every fifth row (from row 3) empty.
CsrMatrix random_sparse(std::int64_t m, std::int64_t k, double density, std::uint64_t seed) {
  return test::random_csr(m, k, density, seed, 5, 3);
}

// One step a warp at a time (step_lanes 1) unless `lanes` says otherwise (0: the rule's).
SpmmOptions rolled_options(std::int32_t rows, std::int32_t groups, std::int32_t n_tile,
                           std::int32_t lanes = 1) {
  SpmmOptions o;
  o.value_mode = SpmmValueMode::rolled;
  o.rows_per_block = rows;
  o.groups = groups;
  o.n_tile = n_tile;
  o.step_lanes = lanes;
  return o;
}

std::vector<double> bias_for(std::int64_t m) {
  std::vector<double> bias(static_cast<std::size_t>(m));
  for (std::size_t i = 0; i < bias.size(); ++i) bias[i] = 0.125 * static_cast<double>(i % 9) - 0.5;
  return bias;
}

TEST(SpmmRolled, AutomaticRuleTakesLargeLayersAtSmallN) {
  const CsrMatrix wide = random_sparse(64, 2048, 0.1, 1);  // about 205 nonzeros a row
  const CsrMatrix big = random_sparse(640, 2048, 0.1, 2);  // 100k+ nonzeros, 4 rows in 5 filled
  ASSERT_GE(big.nnz(), 100000);
  const SpmmPlan p = plan_spmm(big, {big.rows, big.cols, 49, SpmmNMode::fixed, false, false, DType::f32});
  EXPECT_EQ(p.value_mode(), SpmmValueMode::rolled);
  EXPECT_EQ(p.layout.cols_per_thread, 2);
  EXPECT_EQ(p.layout.rows_per_block, 1);
  EXPECT_EQ(p.layout.n_tile, 32);
  EXPECT_EQ(p.layout.groups, 8);  // 640 block rows x 8 groups: about 4096 warps
  EXPECT_EQ(p.block_columns(), 64);
  EXPECT_TRUE(check_plan(p, big).empty());
  // 52k nonzeros at about 51 a row: rolled, 4 groups for 1024 block rows; at about 26 a row, or
  // too few nonzeros, too wide an N, half precision: unrolled.
  const CsrMatrix tall = random_sparse(1024, 512, 0.125, 3),
                  taller = random_sparse(2048, 512, 0.0625, 4);  // 4 rows in 5 filled
  ASSERT_GE(tall.nnz(), 50000);
  ASSERT_GE(taller.nnz(), 50000);
  const SpmmPlan t = plan_spmm(tall, {tall.rows, tall.cols, 49, SpmmNMode::fixed, false, false, DType::f32});
  EXPECT_EQ(t.value_mode(), SpmmValueMode::rolled);
  EXPECT_EQ(t.layout.groups, 4);
  EXPECT_NE(plan_spmm(taller, {taller.rows, taller.cols, 49, SpmmNMode::fixed, false, false, DType::f32})
                .value_mode(),
            SpmmValueMode::rolled);
  EXPECT_NE(
      plan_spmm(wide, {wide.rows, wide.cols, 49, SpmmNMode::fixed, false, false, DType::f32}).value_mode(),
      SpmmValueMode::rolled);
  EXPECT_NE(plan_spmm(big, {big.rows, big.cols, 65, SpmmNMode::fixed, false, false, DType::f32}).value_mode(),
            SpmmValueMode::rolled);
  EXPECT_NE(plan_spmm(big, {big.rows, big.cols, 49, SpmmNMode::fixed, false, false, DType::f16}).value_mode(),
            SpmmValueMode::rolled);
  // Rolled plans refuse what their kernel cannot do.
  SpmmOptions balanced = rolled_options(2, 2, 32);
  balanced.row_split = SpmmRowSplit::balanced;
  EXPECT_THROW(
      plan_spmm(wide, {wide.rows, wide.cols, 49, SpmmNMode::fixed, false, false, DType::f32}, balanced),
      UsageError);
  EXPECT_THROW(plan_spmm(wide, {wide.rows, wide.cols, 49, SpmmNMode::fixed, false, false, DType::bf16},
                         rolled_options(1, 2, 32)),
               UsageError);
}

TEST(SpmmRolled, StepLanesAtSmallN) {
  // 4 rows in 5 filled: about 80 nonzeros a row on average.
  const CsrMatrix a = random_sparse(700, 1000, 0.1, 31);      // 56k nonzeros
  const CsrMatrix mid = random_sparse(400, 1000, 0.1, 32);    // 32k
  const CsrMatrix small = random_sparse(300, 700, 0.05, 33);  // 8.4k
  ASSERT_GE(a.nnz(), 50000);
  ASSERT_GE(mid.nnz(), 20000);
  ASSERT_LT(mid.nnz(), 50000);
  const auto plan_of = [](const CsrMatrix& m, std::int64_t n, SpmmNMode mode = SpmmNMode::fixed,
                          DType dtype = DType::f32, const SpmmOptions& o = {}) {
    return plan_spmm(m, {m.rows, m.cols, n, mode, false, false, dtype}, o);
  };
  const auto plan = [&](std::int64_t n, SpmmNMode mode = SpmmNMode::fixed, DType dtype = DType::f32,
                        const SpmmOptions& o = {}) { return plan_of(a, n, mode, dtype, o); };
  // A rolled plan at a fixed N of at most 8: 32 / N' slots of N' column lanes.
  for (const auto& [n, lanes] : {std::pair{1, 32}, {2, 16}, {3, 8}, {4, 8}, {5, 4}, {8, 4}}) {
    SCOPED_TRACE(fmt::format("N {}", n));
    const SpmmPlan p = plan(n);
    EXPECT_EQ(p.value_mode(), SpmmValueMode::rolled);
    EXPECT_EQ(p.step_lanes(), lanes);
    EXPECT_EQ(p.layout.cols_per_thread, 1);
    EXPECT_EQ(p.layout.n_tile, 32);
    EXPECT_EQ(p.block_columns(), 32 / lanes);
    EXPECT_EQ(p.column_tiles(n), 1);
    // Every lane has a step on average: 700 block rows of 80 steps, 32 / 16 / 8 ... slots.
    EXPECT_LE(std::int64_t{p.layout.groups} * lanes * p.block_rows(), a.nnz());
    EXPECT_TRUE(check_plan(p, a).empty()) << check_plan(p, a).front();
    EXPECT_EQ(plan_from_json(to_json(p)).step_lanes(), lanes);
  }
  EXPECT_EQ(plan(1).layout.rows_per_block, 1);
  EXPECT_EQ(plan(1).layout.groups, 2);  // 80 steps a block row over 32 lanes: 2 groups, not the rule's 8
  // From 1000 rows of A, two rows a block row.
  const CsrMatrix tall = random_sparse(1000, 800, 0.1, 35);  // 64k nonzeros
  const SpmmPlan two = plan_of(tall, 2);
  EXPECT_EQ(two.step_lanes(), 16);
  EXPECT_EQ(two.layout.rows_per_block, 2);
  EXPECT_EQ(two.block_rows(), 500);
  EXPECT_EQ(plan_of(tall, 9).value_mode(), SpmmValueMode::rolled);
  EXPECT_EQ(plan_of(tall, 9).layout.rows_per_block, 1);  // one step a warp: one row
  EXPECT_EQ(plan(8).layout.groups, 8);                   // 4 slots: the rule's groups (about 4096 warps)
  // From 20k nonzeros at N <= 4, from 50k above; unrolled below, and on short rows.
  EXPECT_EQ(plan_of(mid, 4).value_mode(), SpmmValueMode::rolled);
  EXPECT_NE(plan_of(mid, 5).value_mode(), SpmmValueMode::rolled);
  EXPECT_NE(plan_of(small, 1).value_mode(), SpmmValueMode::rolled);
  EXPECT_EQ(plan_of(small, 1).step_lanes(), 1);
  const CsrMatrix short_rows = random_sparse(2000, 200, 0.1, 34);  // 16 a row on average
  ASSERT_GE(short_rows.nnz(), 20000);
  EXPECT_NE(plan_of(short_rows, 1).value_mode(), SpmmValueMode::rolled);
  // Wider N, runtime N and half precision keep their plans.
  EXPECT_EQ(plan(9).step_lanes(), 1);
  EXPECT_EQ(plan(9).value_mode(), SpmmValueMode::rolled);  // the one-step-a-warp layout up to N = 64
  EXPECT_EQ(plan(1, SpmmNMode::runtime).step_lanes(), 1);
  EXPECT_EQ(plan(1, SpmmNMode::fixed, DType::f16).step_lanes(), 1);
  // Forced: any power of two of a rolled plan, also at a wider N (more column tiles).
  SpmmOptions forced;
  forced.value_mode = SpmmValueMode::rolled;
  forced.step_lanes = 4;
  const SpmmPlan wide = plan(49, SpmmNMode::runtime, DType::f32, forced);
  EXPECT_EQ(wide.step_lanes(), 4);
  EXPECT_EQ(wide.column_tiles(49), 7);
  EXPECT_TRUE(check_plan(wide, a).empty());
  forced.step_lanes = 1;
  EXPECT_EQ(plan(1, SpmmNMode::fixed, DType::f32, forced).layout.cols_per_thread,
            2);  // the one-step-a-warp layout
  // Refused: step lanes of an unrolled plan, with another n tile, or not a power of two; a plan that
  // claims them without a rolled kernel.
  SpmmOptions bad;
  bad.step_lanes = 4;
  bad.value_mode = SpmmValueMode::baked;
  EXPECT_THROW(plan(1, SpmmNMode::fixed, DType::f32, bad), UsageError);
  bad.value_mode = SpmmValueMode::rolled;
  bad.n_tile = 64;
  EXPECT_THROW(plan(1, SpmmNMode::fixed, DType::f32, bad), UsageError);
  bad.n_tile = 0;
  bad.step_lanes = 3;
  EXPECT_THROW(plan(1, SpmmNMode::fixed, DType::f32, bad), UsageError);
  bad.step_lanes = 8;
  bad.cols_per_thread = 2;
  EXPECT_THROW(plan(1, SpmmNMode::fixed, DType::f32, bad), UsageError);
  SpmmPlan claims = plan(65);
  ASSERT_NE(claims.value_mode(), SpmmValueMode::rolled);
  claims.body = SpmmRolledBody{2};  // step lanes over an unrolled layout
  EXPECT_FALSE(check_plan(claims, a).empty());
  SpmmPlan odd = plan(1);
  odd.rolled()->step_lanes = 12;
  EXPECT_FALSE(check_plan(odd, a).empty());
}

// The warp-wide kernel forms a step's B address from a 32-bit row pitch in bytes: N below 2^30.
TEST(SpmmRolled, PlanRefusesAnNWhosePitchOverflows32Bits) {
  const CsrMatrix a = random_sparse(64, 256, 0.2, 9);
  SpmmPlan p = plan_spmm(a, {a.rows, a.cols, 49, SpmmNMode::runtime, false, false, DType::f32},
                         rolled_options(1, 4, 32));
  ASSERT_TRUE(check_plan(p, a).empty());
  auto mentions_pitch = [&](std::int64_t n) {
    p.problem.n = n;
    for (const std::string& e : check_plan(p, a))
      if (e.find("2^30") != std::string::npos) return true;
    return false;
  };
  EXPECT_FALSE(mentions_pitch((std::int64_t{1} << 30) - 1));
  EXPECT_TRUE(mentions_pitch(std::int64_t{1} << 30));
}

TEST(SpmmRolled, TableLayout) {
  // 3 x 4: row 0 = [1 0 2 0], row 1 = [0 0 3 0], row 2 = [0 4 0 0]; block rows of 2 rows, 1 group.
  DenseMatrix d(3, 4);
  d(0, 0) = 1, d(0, 2) = 2, d(1, 2) = 3, d(2, 1) = 4;
  const CsrMatrix a = csr_from_dense(d, DType::f32);
  const SpmmPlan p =
      plan_spmm(a, {3, 4, 5, SpmmNMode::fixed, false, false, DType::f32}, rolled_options(2, 1, 32));
  ASSERT_TRUE(check_plan(p, a).empty());
  EXPECT_EQ(spmm_rolled_record_words(p), 4);
  EXPECT_EQ(spmm_rolled_header_words(p), 4);  // 2 block rows x 1 group + 1, padded
  const std::vector<float> t = spmm_rolled_table(p, a);
  const auto word = [&](std::size_t i) { return std::bit_cast<std::int32_t>(t.at(i)); };
  ASSERT_EQ(t.size(), 4u + 3u * 4u);  // steps k 0 and k 2 of block row 0, k 1 of block row 1
  EXPECT_EQ(word(0), 0);
  EXPECT_EQ(word(1), 2);
  EXPECT_EQ(word(2), 3);
  EXPECT_EQ(word(4), 0);
  EXPECT_EQ(t[5], 1.0f);
  EXPECT_EQ(t[6], 0.0f);
  EXPECT_EQ(word(8), 2);
  EXPECT_EQ(t[9], 2.0f);
  EXPECT_EQ(t[10], 3.0f);
  EXPECT_EQ(word(12), 1);
  EXPECT_EQ(t[13], 4.0f);
  EXPECT_EQ(t[14], 0.0f);  // the block row's second row does not exist
  EXPECT_EQ(spmm_kernel_values(p, a), t);
}

// Every rolled tiling matches the fp64 reference, and the unrolled plan of the same tiling bit for bit
// (up to the sign of zeros): the zeros a rolled step adds change nothing else.
TEST(SpmmRolled, InterpreterMatchesReferenceAndUnrolledPlans) {
  struct Case {
    std::int64_t m, k, n;
    double density;
    std::int32_t rows, groups, n_tile;
    bool bias, relu;
    SpmmNMode mode;
  };
  const Case cases[] = {{37, 64, 49, 0.15, 1, 1, 32, false, false, SpmmNMode::fixed},
                        {37, 64, 1, 0.15, 2, 3, 32, true, true, SpmmNMode::fixed},
                        {64, 300, 65, 0.1, 3, 8, 32, true, false, SpmmNMode::runtime},
                        {100, 128, 130, 0.2, 4, 2, 64, false, true, SpmmNMode::fixed},
                        {9, 5, 7, 0.0, 1, 4, 32, true, false, SpmmNMode::fixed},
                        {1, 1, 1, 1.0, 1, 1, 32, false, false, SpmmNMode::fixed},
                        {50, 90, 40, 0.3, 2, 2, 16, true, true, SpmmNMode::runtime}};
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("{}x{} N {} R{} G{} T{}", c.m, c.k, c.n, c.rows, c.groups, c.n_tile));
    const CsrMatrix a = random_sparse(c.m, c.k, c.density, static_cast<std::uint64_t>(c.m * 7 + c.n));
    const SpmmProblem problem{c.m, c.k, c.n, c.mode, c.bias, c.relu, DType::f32};
    const SpmmPlan p = plan_spmm(a, problem, rolled_options(c.rows, c.groups, c.n_tile));
    ASSERT_TRUE(check_plan(p, a).empty()) << check_plan(p, a).front();
    const DenseMatrix b = random_dense(c.k, c.n, 11);
    const std::vector<double> bias = bias_for(c.m);
    const DenseMatrix got = interpret_spmm(p, spmm_kernel_values(p, a), b, c.bias ? &bias : nullptr);
    const DenseMatrix want = spmm(a, b, c.bias ? &bias : nullptr, c.relu);
    for (double v : got.data) ASSERT_FALSE(std::isnan(v));
    EXPECT_LE(test::rel_l2_error(got.data, want.data), 1e-6);
    SpmmOptions unrolled = rolled_options(c.rows, c.groups, c.n_tile);
    unrolled.value_mode = SpmmValueMode::baked;
    unrolled.row_split = SpmmRowSplit::equal;  // the rolled plan's panels (the rule might balance them)
    const SpmmPlan u = plan_spmm(a, problem, unrolled);
    const DenseMatrix same = interpret_spmm(u, spmm_kernel_values(u, a), b, c.bias ? &bias : nullptr);
    EXPECT_EQ(same.data, got.data);  // -0.0 == 0.0
  }
}

// Step-lane plans against the fp64 reference, and the order the kernel adds in: each slot runs its
// steps in turn from zero, then the slots are added pairwise. A plan with one step a slot at most and
// one group adds exactly the products in that tree.
TEST(SpmmRolled, StepLaneInterpreterMatchesReference) {
  struct Case {
    std::int64_t m, k, n;
    double density;
    std::int32_t rows, groups, lanes;
    bool bias, relu;
    SpmmNMode mode;
  };
  const Case cases[] = {{37, 640, 1, 0.2, 1, 0, 0, false, false, SpmmNMode::fixed},
                        {64, 300, 3, 0.1, 2, 3, 0, true, true, SpmmNMode::fixed},
                        {50, 90, 16, 0.3, 1, 2, 2, true, false, SpmmNMode::fixed},
                        {70, 500, 49, 0.12, 3, 4, 8, false, true, SpmmNMode::runtime},
                        {9, 5, 2, 0.0, 1, 4, 0, true, false, SpmmNMode::fixed},
                        {1, 1, 1, 1.0, 1, 1, 0, false, false, SpmmNMode::fixed},
                        {33, 2000, 5, 0.25, 1, 1, 32, false, false, SpmmNMode::fixed}};
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("{}x{} N {} R{} G{} L{}", c.m, c.k, c.n, c.rows, c.groups, c.lanes));
    const CsrMatrix a = random_sparse(c.m, c.k, c.density, static_cast<std::uint64_t>(c.m * 5 + c.n));
    SpmmOptions o;
    o.value_mode = SpmmValueMode::rolled;
    o.rows_per_block = c.rows;
    o.groups = c.groups;
    o.step_lanes = c.lanes;
    const SpmmPlan p = plan_spmm(a, {c.m, c.k, c.n, c.mode, c.bias, c.relu, DType::f32}, o);
    ASSERT_TRUE(check_plan(p, a).empty()) << check_plan(p, a).front();
    ASSERT_GT(p.step_lanes(), 1);
    const DenseMatrix b = random_dense(c.k, c.n, 17);
    const std::vector<double> bias = bias_for(c.m);
    const DenseMatrix got = interpret_spmm(p, spmm_kernel_values(p, a), b, c.bias ? &bias : nullptr);
    for (double v : got.data) ASSERT_FALSE(std::isnan(v));
    EXPECT_LE(test::rel_l2_error(got.data, spmm(a, b, c.bias ? &bias : nullptr, c.relu).data), 1e-6);
  }
  // One row of four nonzeros, one group, 32 lanes: slots 0..3 hold one product each, and the tree
  // adds (p0 + p1) + (p2 + p3), which differs from the running sum for these values.
  DenseMatrix d(1, 4);
  d(0, 0) = 1.0, d(0, 1) = 1.0, d(0, 2) = 1.0, d(0, 3) = 1.0;
  const CsrMatrix a = csr_from_dense(d, DType::f32);
  SpmmOptions one_group;
  one_group.value_mode = SpmmValueMode::rolled;
  one_group.groups = 1;
  const SpmmPlan p = plan_spmm(a, {1, 4, 1, SpmmNMode::fixed, false, false, DType::f32}, one_group);
  ASSERT_EQ(p.step_lanes(), 32);
  DenseMatrix b(4, 1);
  b(0, 0) = 1.0, b(1, 0) = 0x1p-24, b(2, 0) = 0x1p-24, b(3, 0) = 0x1p-24;
  const float tree = (1.0f + 0x1p-24f) + (0x1p-24f + 0x1p-24f),
              running = ((1.0f + 0x1p-24f) + 0x1p-24f) + 0x1p-24f;
  ASSERT_NE(tree, running);
  EXPECT_EQ(interpret_spmm(p, spmm_kernel_values(p, a), b)(0, 0), tree);
}

TEST(SpmmRolled, InterpreterRejectsMalformedTables) {
  const CsrMatrix a = random_sparse(20, 30, 0.3, 5);
  const SpmmPlan p =
      plan_spmm(a, {20, 30, 8, SpmmNMode::fixed, false, false, DType::f32}, rolled_options(2, 2, 32));
  const DenseMatrix b = random_dense(30, 8, 3);
  std::vector<float> t = spmm_kernel_values(p, a);
  EXPECT_THROW(interpret_spmm(p, std::vector<float>(t.begin(), t.begin() + 2), b), UsageError);
  std::vector<float> bad_k = t;
  bad_k[static_cast<std::size_t>(spmm_rolled_header_words(p))] = std::bit_cast<float>(std::int32_t{30});
  EXPECT_THROW(interpret_spmm(p, bad_k, b), UsageError);
  std::vector<float> short_records = t;
  short_records.resize(short_records.size() - 4);
  EXPECT_THROW(interpret_spmm(p, short_records, b), std::out_of_range);
}

TEST(SpmmRolled, EmitsCudaThatCompilesWithoutSpills) {
  const CsrMatrix a = random_sparse(70, 500, 0.12, 9);
  // Warp-wide groups (their warps share records by shuffles) and half-warp groups (each thread
  // loads its records).
  // Step lanes at N = 1 (one 8-byte record load a step) and N = 5 with 3 rows a record.
  for (const auto& [rows, groups, mode, n_tile, n] :
       {std::tuple{1, 8, SpmmNMode::fixed, 32, 49}, std::tuple{4, 2, SpmmNMode::runtime, 32, 49},
        std::tuple{2, 2, SpmmNMode::runtime, 16, 49}, std::tuple{1, 4, SpmmNMode::fixed, 0, 1},
        std::tuple{3, 2, SpmmNMode::fixed, 0, 5}}) {
    const SpmmPlan p = plan_spmm(a, {70, 500, n, mode, true, true, DType::f32},
                                 rolled_options(rows, groups, n_tile, n_tile ? 1 : 0));
    EXPECT_EQ(p.step_lanes() > 1, n_tile == 0);
    const EmittedKernel e = emit_spmm_cuda(p, a);
    EXPECT_EQ(e.source, emit_spmm_cuda(p, a).source);  // deterministic
    EXPECT_EQ(e.packed_values, spmm_rolled_table(p, a));
    EXPECT_NE(e.source.find("constexpr int G = " + std::to_string(groups) + ";"), std::string::npos);
    EXPECT_NE(e.source.find(fmt::format("constexpr int L = {};", p.step_lanes())), std::string::npos);
    // The code does not carry the matrix: no weight literal, whatever the values.
    EXPECT_EQ(e.source.find("0x1."), std::string::npos);
    // Programmatic: the wait, and the early launch of the next grid only with the trigger.
    ASSERT_TRUE(p.hints.programmatic);
    EXPECT_EQ(count(e.source, "if (true) sparsecc_wait_for_predecessor();"), 1u);
    SpmmPlan wait_only = p;
    wait_only.hints.programmatic_trigger = false;
    const std::string wait_text = emit_spmm_cuda(wait_only, a).source;
    EXPECT_EQ(count(wait_text, "if (true) sparsecc_wait_for_predecessor();"), 1u);
    // (Both layouts' epilogues carry the trigger; the kernel takes one.)
    EXPECT_EQ(count(wait_text, "if (false) sparsecc_launch_dependents();"), 2u);
    EXPECT_EQ(count(e.source, p.hints.programmatic_trigger ? "if (true) sparsecc_launch_dependents();"
                                                           : "if (false) sparsecc_launch_dependents();"),
              2u);
    // Asked for PTX, the dispatcher still writes CUDA C++; the PTX emitter itself refuses.
    EXPECT_EQ(emit_spmm(p, a, KernelLanguage::ptx).language, KernelLanguage::cuda);
    EXPECT_THROW(emit_spmm_ptx(p, a), UsageError);
    CudaCompileOptions options;
    options.extra.push_back(kPtxasVerbose);
    const CudaCompileResult r = compile_cuda(e.source, e.kernel_name + ".cu", options);
    const ResourceUsage u = parse_ptxas_log(r.log);
    ASSERT_TRUE(u.found) << r.log;
    EXPECT_EQ(u.stack_frame_bytes, 0);
    EXPECT_EQ(u.spill_store_bytes + u.spill_load_bytes, 0);
    EXPECT_LE(u.registers, p.hints.max_registers);
  }
}

TEST(SpmmRolled, BundleRoundTripsAndTheRuntimeChecksTheTable) {
  const CsrMatrix a = random_sparse(40, 90, 0.2, 13);
  const SpmmPlan p =
      plan_spmm(a, {40, 90, 49, SpmmNMode::fixed, false, true, DType::f32}, rolled_options(2, 4, 32));
  rt::Bundle b;
  b.metadata = spmm_bundle_metadata(p, a, gpu_target("sm_90"));
  EXPECT_EQ(b.metadata.values_mode, "rolled");
  EXPECT_EQ(b.metadata.n_tile, 64);  // columns a block covers
  b.ptx = "// not compiled in this test\n";
  b.values = spmm_rolled_table(p, a);
  b.plan = to_json(p).dump();
  const std::vector<unsigned char> bytes = rt::bundle_bytes(b, "r.sccb");
  EXPECT_EQ(rt::parse_bundle(bytes, "r.sccb"), b);
  // The same plan comes back from the bundle.
  const SpmmPlan again = spmm_bundle_plan(rt::parse_bundle(bytes, "r.sccb"), a);
  EXPECT_EQ(to_json(again), to_json(p));

  const auto rejects = [&](const std::function<void(rt::Bundle&)>& spoil, const std::string& part) {
    rt::Bundle bad = b;
    spoil(bad);
    try {
      rt::validate_bundle(bad, "r.sccb");
      ADD_FAILURE() << "accepted a bundle that should fail with: " << part;
    } catch (const rt::BundleError& e) {
      EXPECT_NE(std::string(e.what()).find("r.sccb"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what() << "\n  lacks: " << part;
    }
  };
  const std::size_t header = static_cast<std::size_t>(spmm_rolled_header_words(p));
  rejects([](rt::Bundle& x) { x.values[1] = std::bit_cast<float>(std::int32_t{-1}); }, "out of order");
  rejects([&](rt::Bundle& x) { x.values[header] = std::bit_cast<float>(std::int32_t{90}); }, "has k 90");
  rejects([](rt::Bundle& x) { x.values.resize(x.values.size() - 4); }, "records of 4");
  rejects([](rt::Bundle& x) { x.values.resize(2); }, "fewer than the step table's header");
  rejects([](rt::Bundle& x) { x.values.clear(); }, "values");
  rejects([](rt::Bundle& x) { x.metadata.plan_summary.erase("groups"); }, "plan_summary.groups");

  // Step lanes: the metadata's columns a block covers, and the same plan from the bundle.
  SpmmOptions rolled;
  rolled.value_mode = SpmmValueMode::rolled;
  const SpmmPlan lanes = plan_spmm(a, {40, 90, 3, SpmmNMode::fixed, false, true, DType::f32}, rolled);
  ASSERT_EQ(lanes.step_lanes(), 8);
  const rt::BundleMetadata md = spmm_bundle_metadata(lanes, a, gpu_target("sm_90"));
  EXPECT_EQ(md.n_tile, 4);
  EXPECT_EQ(md.plan_summary.at("step_lanes"), 8);
  rt::Bundle with_lanes;
  with_lanes.metadata = md;
  with_lanes.plan = to_json(lanes).dump();
  EXPECT_EQ(to_json(spmm_bundle_plan(with_lanes, a)), to_json(lanes));
}

TEST(SpmmRolled, RealDlmcLayerMatchesReference) {
  SPARSECC_DATA_OR_SKIP(file, "dlmc/rn50/magnitude_pruning/0.9/bottleneck_1_block_group4_1_1.smtx.gz");
  const CsrMatrix a = load_matrix(file.string());  // 512 x 2048, 104,857 nonzeros
  const SpmmPlan p = plan_spmm(a, {a.rows, a.cols, 49, SpmmNMode::fixed, true, true, DType::f32});
  ASSERT_EQ(p.value_mode(), SpmmValueMode::rolled);
  const DenseMatrix b = random_dense(a.cols, 49, 21);
  const std::vector<double> bias = bias_for(a.rows);
  const DenseMatrix got = interpret_spmm(p, spmm_kernel_values(p, a), b, &bias);
  EXPECT_LE(test::rel_l2_error(got.data, spmm(a, b, &bias, true).data), 1e-6);
}

}  // namespace
}  // namespace sparsecc
