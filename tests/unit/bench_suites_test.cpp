// The bench problem suites: SparseRT Table 1 and DLMC at 90 % over the real data (counts, shapes,
// N, loadable matrices at the stated sparsity), and clear errors for missing or malformed files.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <set>
#include <tuple>

#include "bench/suites.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/inspector/spmm_inspector.hpp"
#include "sparsecc/io/smtx.hpp"
#include "sparsecc/plan/spmm_plan.hpp"
#include "test_support.hpp"

namespace sparsecc::bench {
namespace {

using Shape = std::tuple<std::int64_t, std::int64_t, std::int64_t>;

// SparseRT Table 1, problems 1-20 (M, K, N at batch 1).
const std::vector<Shape> kTable1 = {{64, 256, 3136},  {256, 64, 3136},  {128, 512, 784}, {512, 128, 784},
                                    {256, 1024, 196}, {1024, 256, 196}, {512, 2048, 49}, {2048, 512, 49},
                                    {2048, 512, 256}, {512, 2048, 256}, {512, 512, 256}, {64, 32, 12544},
                                    {128, 64, 3136},  {128, 128, 3136}, {256, 128, 784}, {256, 256, 784},
                                    {512, 256, 196},  {512, 512, 196},  {1024, 512, 49}, {1024, 1024, 49}};

double sparsity_of(const CsrMatrix& a) {
  return 1.0 - static_cast<double>(a.nnz()) / static_cast<double>(a.rows * a.cols);
}

TEST(BenchSuites, SparsertTable1AtBothSparsities) {
  SPARSECC_DATA_OR_SKIP(dlmc, "dlmc");
  SPARSECC_DATA_OR_SKIP(weights, "sparsert/mobilenet_v1_sparse90.npz");
  const std::filesystem::path data = dlmc.parent_path();
  for (double s : {0.9, 0.95}) {
    SCOPED_TRACE(s);
    auto suite = sparsert_suite(data, s, 1);
    ASSERT_EQ(suite.size(), 20u);
    std::set<std::string> names;
    for (std::size_t i = 0; i < suite.size(); ++i) {
      const BenchProblem& p = suite[i];
      SCOPED_TRACE(p.name);
      EXPECT_EQ(Shape(p.M, p.K, p.N), kTable1[i]);
      EXPECT_TRUE(names.insert(p.name).second);
      EXPECT_FALSE(p.values.empty());
      EXPECT_EQ(p.network, i < 8 ? "rn50" : i < 11 ? "transformer" : "mobilenet");
      CsrMatrix a = load_problem_matrix(p);
      EXPECT_EQ(a.rows, p.M);
      EXPECT_EQ(a.cols, p.K);
      EXPECT_NEAR(sparsity_of(a), s, 0.01);
      if (i >= 11 && s == 0.95) {  // MobileNet pruned further: exactly round(5 % of M·K) kept
        EXPECT_GT(p.prune_to, 0);
        EXPECT_EQ(a.nnz(), std::llround(0.05 * static_cast<double>(p.M * p.K)));
      }
    }
    EXPECT_TRUE(suite[19].matrix.empty());  // the 1024x1024 layer is synthetic
    EXPECT_NE(suite[19].values.find("synthetic"), std::string::npos);
    EXPECT_EQ(suite[18].count, 1);
    EXPECT_EQ(suite[10].count, 72);
  }
}

TEST(BenchSuites, SparsertBatchMultipliesN) {
  SPARSECC_DATA_OR_SKIP(dlmc, "dlmc");
  SPARSECC_DATA_OR_SKIP(weights, "sparsert/mobilenet_v1_sparse90.npz");
  const std::filesystem::path data = dlmc.parent_path();
  auto suite = sparsert_suite(data, 0.9, 16);
  ASSERT_EQ(suite.size(), 20u);
  for (std::size_t i = 0; i < suite.size(); ++i) EXPECT_EQ(suite[i].N, std::get<2>(kTable1[i]) * 16);
  EXPECT_EQ(suite[0].name, "p01_rn50_64x256x50176");
}

TEST(BenchSuites, DlmcEveryMatrixAt90) {
  SPARSECC_DATA_OR_SKIP(dlmc, "dlmc");
  const std::filesystem::path data = dlmc.parent_path();
  auto suite = dlmc_suite(data);
  ASSERT_EQ(suite.size(), 54u + 96u);
  int rn50 = 0, transformer = 0;
  std::set<std::string> names;
  for (const BenchProblem& p : suite) {
    EXPECT_TRUE(names.insert(p.name).second) << p.name;
    EXPECT_EQ(p.name.substr(0, p.name.find('/')), p.network);
    EXPECT_EQ(p.count, 1);
    if (p.name.starts_with("rn50/")) {
      ++rn50;
      EXPECT_TRUE(p.N == 1 || p.N == 49 || p.N == 196 || p.N == 784 || p.N == 3136 || p.N == 12544) << p.name;
    } else {
      ++transformer;
      EXPECT_EQ(p.N, 256);
      EXPECT_TRUE(Shape(p.M, p.K, 0) == Shape(512, 512, 0) || Shape(p.M, p.K, 0) == Shape(2048, 512, 0) ||
                  Shape(p.M, p.K, 0) == Shape(512, 2048, 0))
          << p.name;
    }
  }
  EXPECT_EQ(rn50, 54);
  EXPECT_EQ(transformer, 96);
  auto find = [&](const std::string& name) {
    for (const BenchProblem& p : suite)
      if (p.name == name) return p;
    ADD_FAILURE() << "no problem " << name;
    return BenchProblem{};
  };
  BenchProblem conv = find("rn50/initial_conv");
  EXPECT_EQ(Shape(conv.M, conv.K, conv.N), Shape(64, 147, 12544));
  BenchProblem fc = find("rn50/final_dense");
  EXPECT_EQ(Shape(fc.M, fc.K, fc.N), Shape(1000, 2048, 1));
  CsrMatrix a = load_problem_matrix(fc);
  EXPECT_NEAR(sparsity_of(a), 0.9, 0.01);
}

// The data-movement bound's bytes: B's rows that A uses (not all K), A's weights, all of C.
TEST(BenchSuites, TrafficBytesCountTheUsedRowsOfB) {
  CsrMatrix a;
  a.rows = 3;
  a.cols = 10;
  a.row_ptr = {0, 2, 2, 5};
  a.col_idx = {1, 7, 1, 4, 7};  // columns 1, 4 and 7: three rows of B
  a.values = {1, 2, 3, 4, 5};
  const TrafficBytes t = traffic_bytes(a, 6);
  EXPECT_EQ(t.read, (3u * 6u + 5u) * 4u);
  EXPECT_EQ(t.write, 3u * 6u * 4u);
  CsrMatrix empty;
  empty.rows = 4;
  empty.cols = 4;
  empty.row_ptr = {0, 0, 0, 0, 0};
  EXPECT_EQ(traffic_bytes(empty, 8).read, 0u);
  EXPECT_EQ(traffic_bytes(empty, 8).write, 4u * 8u * 4u);
}

TEST(BenchSuites, PlanTrafficCountsEveryLoadOfB) {
  // 4 loads of a row of B (24 bytes at N = 6), a 100-byte representation fetched by 2 column tiles.
  const PlanTraffic t = plan_traffic(3, 10, 6, 4, 100, 2);
  EXPECT_EQ(t.read, 4u * 6u * 4u + 200u);
  EXPECT_EQ(t.unique_read, t.read);  // fewer bytes than B and the representation once: all distinct
  EXPECT_EQ(t.write, 3u * 6u * 4u);
  // One row a block row: every nonzero loads its row of B, and B's 10 rows are all there is to
  // read more than once.
  const CsrMatrix a = test::random_csr(40, 10, 0.5, 3);
  SpmmProblem p;
  p.m = a.rows, p.k = a.cols, p.n = 6;
  SpmmOptions o;
  o.rows_per_block = 1;
  o.row_split = SpmmRowSplit::equal;
  o.value_mode = SpmmValueMode::rolled;
  const SpmmPlan plan = plan_spmm(a, p, o);
  const PlanTraffic r = plan_traffic(a.rows, a.cols, 6, spmm_plan_loads(plan), 64, plan.column_tiles(6));
  EXPECT_EQ(spmm_plan_loads(plan), a.nnz());
  EXPECT_EQ(r.read, static_cast<std::size_t>(a.nnz()) * 6u * 4u +
                        64u * static_cast<std::size_t>(plan.column_tiles(6)));
  EXPECT_EQ(r.unique_read, 10u * 6u * 4u + 64u);
}

TEST(BenchSuites, MissingFilesAreNamed) {
  test::TempDir dir;
  test::expect_input_error([&] { sparsert_suite(dir.path(), 0.9, 1); },
                           {"bottleneck_1_block_group1_1_1.smtx.gz", "not found"});
  test::expect_input_error([&] { dlmc_suite(dir.path()); }, {"rn50_batchsizes.txt", "not found"});
  BenchProblem p;
  p.name = "x";
  p.matrix = dir.file("absent.smtx.gz");
  p.M = p.K = p.N = 1;
  EXPECT_THROW(load_problem_matrix(p), InputError);
}

TEST(BenchSuites, RejectsBadArgumentsAndMalformedBatchSizes) {
  test::TempDir dir;
  EXPECT_THROW(sparsert_suite(dir.path(), 0.8, 1), UsageError);
  EXPECT_THROW(sparsert_suite(dir.path(), 0.9, 0), UsageError);

  std::filesystem::path rn50 = dir.path() / "dlmc/rn50/magnitude_pruning/0.9";
  std::filesystem::create_directories(rn50);
  std::filesystem::create_directories(dir.path() / "dlmc/transformer/magnitude_pruning/0.9");
  CsrMatrix a;
  a.rows = 2;
  a.cols = 3;
  a.row_ptr = {0, 1, 2};
  a.col_idx = {0, 2};
  a.values = {1.0, 1.0};
  write_smtx((rn50 / "layer_a.smtx.gz").string(), a);
  const std::string sizes = dir.file("dlmc/rn50_batchsizes.txt");
  test::write_text(sizes, "layer_a,3136\nlayer_b,twelve\n");
  test::expect_input_error([&] { dlmc_suite(dir.path()); }, {"rn50_batchsizes.txt:2", "layer_name,N"});
  test::write_text(sizes, "layer_b,49\n");
  test::expect_input_error([&] { dlmc_suite(dir.path()); }, {"no batch size for layer 'layer_a'"});
  test::write_text(sizes, "layer_a,49\n");
  test::expect_input_error([&] { dlmc_suite(dir.path()); }, {"transformer", "no .smtx files"});
}

}  // namespace
}  // namespace sparsecc::bench
