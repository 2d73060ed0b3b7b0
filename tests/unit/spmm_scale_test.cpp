// Degenerate and huge SpMM shapes: empty rows cost no code of their own (every emitter gives the block
// rows without nonzeros one shared piece of code), matrices without rows or columns are refused naming
// the file, every row count up to spmm_max_rows() plans within the grid (and more is refused with the
// limit), and an explicit rows per block that cannot fit is refused with the rows it needs.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "sparsecc/common/error.hpp"
#include "sparsecc/compile/compile_kernel.hpp"
#include "sparsecc/compile/resource_usage.hpp"
#include "sparsecc/emit/spmm_cuda.hpp"
#include "sparsecc/emit/spmm_ptx.hpp"
#include "sparsecc/inspector/row_clusters.hpp"
#include "sparsecc/inspector/spmm_inspector.hpp"
#include "sparsecc/neuron/compartments.hpp"
#include "sparsecc/neuron/forest.hpp"
#include "sparsecc/plan/spmm_interpreter.hpp"
#include "sparsecc/target/target.hpp"
#include "test_support.hpp"

namespace sparsecc {
namespace {

using test::problem_for;

// An m x k matrix whose only nonzeros sit in the rows listed (one each, at column row % k).
CsrMatrix sparse_rows(std::int64_t m, std::int64_t k, const std::vector<std::int64_t>& rows) {
  CsrMatrix a;
  a.rows = m;
  a.cols = k;
  a.row_ptr.assign(static_cast<std::size_t>(m) + 1, 0);
  for (const std::int64_t r : rows) a.row_ptr[static_cast<std::size_t>(r) + 1] = 1;
  for (std::int64_t r = 0; r < m; ++r)
    a.row_ptr[static_cast<std::size_t>(r) + 1] += a.row_ptr[static_cast<std::size_t>(r)];
  for (const std::int64_t r : rows) {
    a.col_idx.push_back(static_cast<std::int32_t>(r % k));
    a.values.push_back(1.5 + static_cast<double>(r % 7));
  }
  return a;
}

std::int64_t plain_empty_blocks(const SpmmPlan& p) {
  std::int64_t n = 0;
  for (std::size_t bi = 0; bi < p.layout.blocks.size(); ++bi) n += spmm_plain_empty_block(p, bi);
  return n;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// 131,072 rows and one nonzero: the automatic plan keeps equal panels (no balanced borders around
// empty panels), and the kernel text holds no code per empty row: the CUDA C++ of every value mode and
// dtype stays the size of a one-row kernel, the PTX adds a jump-table entry per block row.
TEST(SpmmScale, EmptyRowsTakeNoCodeOfTheirOwn) {
  const CsrMatrix a = sparse_rows(131072, 64, {77});
  const auto t0 = std::chrono::steady_clock::now();
  for (const bool bias : {false, true}) {
    const SpmmPlan p = plan_spmm(a, problem_for(a, 32, bias, true));
    EXPECT_EQ(p.layout.row_split, SpmmRowSplit::equal);
    EXPECT_TRUE(check_plan(p, a).empty());
    EXPECT_EQ(plain_empty_blocks(p), p.block_rows() - 1);
    const EmittedKernel ptx = emit_spmm_ptx(p, a);
    EXPECT_LT(ptx.source.size(), static_cast<std::size_t>(16 * p.block_rows() + 20000));
    const EmittedKernel cuda = emit_spmm_cuda(p, a);
    EXPECT_LT(cuda.source.size(), 20000u);
    EXPECT_EQ(test::count(cuda.source, "    default: {"), 1u);
  }
  for (const std::string dtype : {"f16", "bf16"}) {
    SpmmProblem pr = problem_for(a, 32, true, true);
    pr.dtype = *parse_dtype(dtype);
    const SpmmPlan p = plan_spmm(a, pr);
    EXPECT_LT(emit_spmm_cuda(p, a).source.size(), 40000u) << dtype;
  }
  for (const SpmmValueMode mode : {SpmmValueMode::streamed, SpmmValueMode::rolled}) {
    SpmmOptions o;
    o.value_mode = mode;
    const SpmmPlan p = plan_spmm(a, problem_for(a, 32, false, false, SpmmNMode::runtime), o);
    EXPECT_LT(emit_spmm(p, a, KernelLanguage::cuda).source.size(), 40000u) << to_string(mode);
  }
  EXPECT_LT(seconds_since(t0), 20.0);
}

// The shared code of the empty block rows assembles (PTX: inline and split layouts, fixed and runtime
// N, column pairs, several groups) and compiles (CUDA C++, fp32 and f16).
TEST(SpmmScale, EmptyBlockRowCodeAssembles) {
  const CsrMatrix a = sparse_rows(200, 48, {0, 1, 2, 3, 40, 41, 150, 199});
  const CsrMatrix wide = test::random_csr(300, 512, 0.2, 9, 3, 1);
  CsrMatrix split;  // rows 100..219 of `wide` emptied, around a split-layout kernel
  split.rows = wide.rows;
  split.cols = wide.cols;
  for (std::int64_t r = 0; r < wide.rows; ++r) {
    if (r < 100 || r >= 220)
      for (std::int64_t i = wide.row_ptr[r]; i < wide.row_ptr[r + 1]; ++i) {
        split.col_idx.push_back(wide.col_idx[i]);
        split.values.push_back(wide.values[i]);
      }
    split.row_ptr.push_back(split.nnz());
  }
  struct Case {
    const CsrMatrix* a;
    SpmmProblem problem;
    SpmmOptions options;
    const char* label;
  };
  SpmmOptions grouped;
  grouped.rows_per_block = 4;
  grouped.groups = 2;
  SpmmOptions pairs;
  pairs.cols_per_thread = 2;
  pairs.rows_per_block = 8;
  SpmmOptions streamed;
  streamed.value_mode = SpmmValueMode::streamed;
  streamed.rows_per_block = 8;
  const std::vector<Case> cases = {
      {&a, problem_for(a, 49, true, true), {}, "fixed"},
      {&a, problem_for(a, 49, true, true, SpmmNMode::runtime), grouped, "runtime grouped"},
      {&a, problem_for(a, 50, true, false), pairs, "pairs"},
      {&a, problem_for(a, 50, false, true, SpmmNMode::runtime), streamed, "runtime streamed"},
      {&split, problem_for(split, 196, true, true, SpmmNMode::runtime), grouped, "split layout"},
  };
  for (const Case& c : cases) {
    const SpmmPlan p = plan_spmm(*c.a, c.problem, c.options);
    ASSERT_GT(plain_empty_blocks(p), 0) << c.label;
    const EmittedKernel e = emit_spmm_ptx(p, *c.a);
    EXPECT_EQ(test::count(e.source, "$Lempty:"), 1u) << c.label;
    CudaCompileOptions options;
    options.extra.push_back(kPtxasVerbose);
    const CudaCompileResult r = compile_kernel(e, c.label, options);
    EXPECT_FALSE(r.cubin.empty()) << c.label;
  }
  // CUDA C++ (NVRTC is slow: one fp32 plan with bias, ReLU and groups, and one f16 plan).
  const SpmmPlan fp = plan_spmm(a, problem_for(a, 49, true, true), grouped);
  EXPECT_FALSE(compile_kernel(emit_spmm_cuda(fp, a), "fp32").cubin.empty());
  EXPECT_GT(
      emit_spmm_ptx(plan_spmm(split, problem_for(split, 196, true, true, SpmmNMode::runtime), grouped), split)
          .modules.size(),
      1u);
  SpmmProblem half = problem_for(a, 50, true, true);
  half.dtype = DType::f16;
  const SpmmPlan hp = plan_spmm(a, half, grouped);
  ASSERT_GT(plain_empty_blocks(hp), 0);
  EXPECT_FALSE(compile_kernel(emit_spmm_cuda(hp, a), "half").cubin.empty());
}

// Clustering orders only the rows with nonzeros (memory and time follow them, not M x K): a
// 131072 x 131072 matrix of four nonzeros clusters at once, its empty panels stay in place and take no
// code, and the plan matches the reference.
TEST(SpmmScale, ClusteredRowsKeepEmptyPanelsInPlace) {
  const CsrMatrix a = sparse_rows(131072, 131072, {5, 6, 70000, 131071});
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<std::int64_t> order = cluster_rows(a, 32);
  EXPECT_LT(seconds_since(t0), 5.0);
  ASSERT_EQ(order.size(), 131072u);
  std::vector<char> seen(order.size(), 0);
  for (const std::int64_t r : order) seen.at(static_cast<std::size_t>(r)) += 1;
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), 131072);
  EXPECT_EQ(order[0], 5);  // the panel slots of rows with nonzeros hold them, clustered
  EXPECT_EQ(order[1], 6);
  for (std::int64_t p = 32; p < 69984; ++p) ASSERT_EQ(order[static_cast<std::size_t>(p)], p);
  SpmmOptions o;
  o.row_split = SpmmRowSplit::clustered;
  o.rows_per_block = 32;
  const SpmmPlan p = plan_spmm(a, problem_for(a, 8, true, true), o);
  EXPECT_TRUE(check_plan(p, a).empty());
  EXPECT_GE(plain_empty_blocks(p), p.block_rows() - 3);
  EXPECT_LT(emit_spmm_cuda(p, a).source.size(), 40000u);
  EXPECT_LT(seconds_since(t0), 20.0);
  const CsrMatrix small = sparse_rows(300, 40, {1, 2, 3, 100, 101, 250, 299});
  o.rows_per_block = 8;
  EXPECT_LT(test::interp_error(plan_spmm(small, problem_for(small, 5, true, true), o), small, 5, 2), 1e-6);
}

// The interpreter runs a plan of mostly empty rows to the fp64 reference, bias and ReLU included.
TEST(SpmmScale, EmptyRowsInterpretToTheReference) {
  const CsrMatrix a = sparse_rows(4099, 40, {0, 17, 18, 2048, 4098});
  EXPECT_LT(test::interp_error(plan_spmm(a, problem_for(a, 9, true, true)), a, 9, 3), 1e-6);
  SpmmOptions o;
  o.value_mode = SpmmValueMode::rolled;
  EXPECT_LT(test::interp_error(plan_spmm(a, problem_for(a, 9, true, false), o), a, 9, 4), 1e-6);
}

// No rows or no columns: refused, naming the file and the rule (plan_spmm refuses it as a usage error).
TEST(SpmmScale, MatricesWithoutRowsOrColumnsAreRefused) {
  for (const auto& [m, k] : {std::pair<std::int64_t, std::int64_t>{0, 5}, {5, 0}, {0, 0}}) {
    const CsrMatrix a = sparse_rows(m, k, {});
    test::expect_input_error([&] { require_spmm_matrix(a, SourceLocation::in_file("empty.mtx")); },
                             {"empty.mtx", fmt::format("{}x{}", m, k), "at least one column", "4194240"});
    EXPECT_THROW(plan_spmm(a, {m, k, 4, SpmmNMode::fixed, false, false, DType::f32}), UsageError);
  }
  EXPECT_NO_THROW(require_spmm_matrix(sparse_rows(1, 1, {}), SourceLocation::in_file("one.mtx")));
}

// Every row count the grid can take plans automatically within it (rows per block grow to fit); one
// more row is refused with the limit; explicit rows per block that cannot fit are refused with the rows
// a block row needs, before any block row is built.
TEST(SpmmScale, TallMatricesFitTheGrid) {
  const CsrMatrix mega = sparse_rows(std::int64_t{1} << 20, 64, {0, 5, 1000000});
  for (const SpmmValueMode mode : {SpmmValueMode::baked, SpmmValueMode::rolled}) {
    SpmmOptions o;
    o.value_mode = mode;
    const SpmmPlan p = plan_spmm(mega, problem_for(mega, 16), o);
    EXPECT_LE(p.block_rows(), default_gpu_target().max_grid_y);
    EXPECT_TRUE(check_plan(p, mega).empty());
  }
  SpmmProblem half = problem_for(mega, 16);
  half.dtype = DType::f16;
  EXPECT_LE(plan_spmm(mega, half).block_rows(), default_gpu_target().max_grid_y);
  SpmmOptions eight;
  eight.rows_per_block = 8;
  try {
    plan_spmm(mega, problem_for(mega, 16), eight);
    ADD_FAILURE() << "8 rows per block at 2^20 rows planned";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("65535"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("at least 17 rows per block"), std::string::npos) << e.what();
  }
  const CsrMatrix largest = sparse_rows(spmm_max_rows(), 8, {0, spmm_max_rows() - 1});
  const auto t0 = std::chrono::steady_clock::now();
  const SpmmPlan p = plan_spmm(largest, problem_for(largest, 4));
  EXPECT_EQ(p.block_rows(), default_gpu_target().max_grid_y);
  EXPECT_EQ(p.layout.rows_per_block, kSpmmMaxAccumulators);
  EXPECT_TRUE(check_plan(p, largest).empty());
  EXPECT_LT(emit_spmm_cuda(p, largest).source.size(), 40000u);
  EXPECT_LT(seconds_since(t0), 30.0);
  const CsrMatrix over = sparse_rows(spmm_max_rows() + 1, 8, {0});
  test::expect_input_error([&] { require_spmm_matrix(over, SourceLocation::in_file("tall.mtx")); },
                           {"tall.mtx", "4194241x8", "4194240", "65535"});
  EXPECT_THROW(plan_spmm(over, problem_for(over, 4)), UsageError);
}

// Grids of more than kSpmmPtxJumpTableEntries block rows dispatch in chunks (one table per chunk with
// an explicit block row; the assembler fails on one table of every block row) and assemble.
// A tall matrix whose few nonzeros are spread over many block rows: unrolled code would grow with the
// rows of every block row that holds one, so the automatic fp32 plan rolls and other plans are refused.
TEST(SpmmScale, SpreadNonzerosRollInsteadOfUnrollingEveryRow) {
  std::vector<std::int64_t> rows;
  for (std::int64_t r = 0; r < (std::int64_t{1} << 20); r += 64) rows.push_back(r);
  const CsrMatrix spread = sparse_rows(std::int64_t{1} << 20, 64, rows);
  const auto t0 = std::chrono::steady_clock::now();
  const SpmmPlan automatic = plan_spmm(spread, problem_for(spread, 8));
  EXPECT_EQ(automatic.value_mode(), SpmmValueMode::rolled);
  EXPECT_TRUE(check_plan(automatic, spread).empty());
  EXPECT_LT(emit_spmm_cuda(automatic, spread).source.size(), 40000u);
  EXPECT_LT(seconds_since(t0), 30.0);
  SpmmOptions baked;
  baked.value_mode = SpmmValueMode::baked;
  SpmmProblem half = problem_for(spread, 8);
  half.dtype = DType::f16;
  for (const auto& [problem, options] :
       {std::pair{problem_for(spread, 8), baked}, std::pair{half, SpmmOptions{}}}) {
    try {
      plan_spmm(spread, problem, options);
      ADD_FAILURE() << problem.dtype << ": planned an unrolled executor of every spread row";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(fmt::format("more than the {}", kSpmmMaxRowsWithCode)),
                std::string::npos)
          << e.what();
    }
  }
  // At the limit the unrolled plan stays: a real layer's rows all have code.
  const CsrMatrix full = sparse_rows(kSpmmMaxRowsWithCode, 16, [] {
    std::vector<std::int64_t> all(kSpmmMaxRowsWithCode);
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::int64_t>(i);
    return all;
  }());
  const SpmmPlan unrolled = plan_spmm(full, problem_for(full, 8));
  EXPECT_NE(unrolled.value_mode(), SpmmValueMode::rolled);
  EXPECT_EQ(spmm_rows_with_code(unrolled), kSpmmMaxRowsWithCode);
}

TEST(SpmmScale, HugeGridsDispatchInChunksAndAssemble) {
  std::vector<std::int64_t> rows;
  for (std::int64_t r = 3; r < (std::int64_t{1} << 20); r += 17 * 4096 - 5) rows.push_back(r);
  for (const auto& [label, a] : {std::pair<const char*, CsrMatrix>{
                                     "three rows", sparse_rows(std::int64_t{1} << 20, 64, {0, 5, 1000000})},
                                 {"a row every chunk", sparse_rows(std::int64_t{1} << 20, 64, rows)}}) {
    const SpmmPlan p = plan_spmm(a, problem_for(a, 8, true, true));
    ASSERT_GT(p.block_rows(), static_cast<std::int64_t>(kSpmmPtxJumpTableEntries)) << label;
    const EmittedKernel e = emit_spmm_ptx(p, a);
    EXPECT_EQ(test::count(e.source, "$Lchunks: .branchtargets"), 1u) << label;
    EXPECT_FALSE(compile_kernel(e, label).cubin.empty()) << label;
  }
}

// Copies of a forest are counted against the compartment limit before any is built.
TEST(HinesScale, TooManyCellsFailBeforeBuildingCopies) {
  const std::string swc = ::testing::TempDir() + "scale_cell.swc";
  {
    std::FILE* f = std::fopen(swc.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("1 1 0 0 0 5 -1\n2 3 10 0 0 1 1\n3 3 20 0 0 1 2\n", f);
    std::fclose(f);
  }
  const auto t0 = std::chrono::steady_clock::now();
  try {
    load_hines_forest({swc}, 1 << 30, 1);
    ADD_FAILURE() << "2^30 copies were built";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(kMaxCompartments)), std::string::npos) << e.what();
  }
  EXPECT_LT(seconds_since(t0), 5.0);
  EXPECT_EQ(load_hines_forest({swc}, 4, 1).size(), 12);
}

}  // namespace
}  // namespace sparsecc
