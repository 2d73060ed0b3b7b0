// The CPU side of sparsecc_llm_bench (bench/llm_suite.hpp): the pruned matrices (exact row counts for
// the random pattern, the magnitude pattern's sparsity and threshold, float32 values, independence
// from the thread count), the row sample and the sampled fp64 reference.
#include "bench/llm_suite.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <set>

#include "sparsecc/common/error.hpp"
#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/matrix/dense.hpp"
#include "sparsecc/reference/spmm.hpp"

namespace sparsecc::bench {
namespace {

TEST(LlmSuite, ShapesAndParsing) {
  ASSERT_EQ(llm_shapes().size(), 8u);
  EXPECT_EQ(llm_shapes().back().name(), "28672x8192");
  const LlmShape s = parse_llm_shape("4096x11008");
  EXPECT_EQ(s.m, 4096);
  EXPECT_EQ(s.k, 11008);
  EXPECT_THROW(parse_llm_shape("4096"), UsageError);
  EXPECT_THROW(parse_llm_shape("0x5"), UsageError);
  EXPECT_EQ(parse_llm_pattern("magnitude"), LlmPattern::magnitude);
  EXPECT_THROW(parse_llm_pattern("blocky"), UsageError);
}

TEST(LlmSuite, InverseNormal) {
  EXPECT_NEAR(inverse_normal_cdf(0.5), 0.0, 1e-9);
  EXPECT_NEAR(inverse_normal_cdf(0.975), 1.959963985, 1e-7);
  EXPECT_NEAR(inverse_normal_cdf(0.01), -2.326347874, 1e-7);
  EXPECT_NEAR(inverse_normal_cdf(1e-10), -6.361340902, 1e-6);
}

TEST(LlmSuite, RandomPatternKeepsExactRowCounts) {
  for (double s : {0.5, 0.7, 0.9, 0.95}) {
    const CsrMatrix a = make_llm_matrix(300, 1000, s, LlmPattern::random, 11, 3);
    validate(a);
    const auto keep = std::llround((1 - s) * 1000);
    for (std::int64_t r = 0; r < a.rows; ++r) ASSERT_EQ(a.row_nnz(r), keep) << "sparsity " << s;
    for (double v : a.values) {
      ASSERT_EQ(v, static_cast<double>(static_cast<float>(v)));
      ASSERT_GE(std::fabs(v), 0x1.0p-8);
    }
  }
}

TEST(LlmSuite, RandomPatternColumnsAreUniform) {
  const CsrMatrix a = make_llm_matrix(2000, 64, 0.5, LlmPattern::random, 5, 2);
  std::vector<int> hits(64, 0);
  for (std::int32_t c : a.col_idx) ++hits[static_cast<std::size_t>(c)];
  for (int h : hits) EXPECT_NEAR(h, 1000, 150);  // 2000 rows x 1/2 each
}

TEST(LlmSuite, MagnitudePatternSparsityAndThreshold) {
  const double s = 0.8;
  const CsrMatrix a = make_llm_matrix(400, 2000, s, LlmPattern::magnitude, 3, 4);
  validate(a);
  const double sparsity = 1.0 - static_cast<double>(a.nnz()) / (400.0 * 2000.0);
  EXPECT_NEAR(sparsity, s, 0.003);
  const double t = inverse_normal_cdf((1 + s) / 2);
  double sum = 0;
  for (double v : a.values) {
    ASSERT_GE(std::fabs(v), t * (1 - 1e-6));
    ASSERT_EQ(v, static_cast<double>(static_cast<float>(v)));
    sum += v;
  }
  EXPECT_NEAR(sum / static_cast<double>(a.nnz()), 0.0, 0.05);  // signs balanced
  std::set<std::int64_t> counts;
  for (std::int64_t r = 0; r < a.rows; ++r) counts.insert(a.row_nnz(r));
  EXPECT_GT(counts.size(), 5u);  // binomial per row, not fixed
}

TEST(LlmSuite, SameMatrixWhateverTheThreads) {
  for (LlmPattern p : {LlmPattern::random, LlmPattern::magnitude}) {
    const CsrMatrix a = make_llm_matrix(257, 300, 0.7, p, 9, 1);
    const CsrMatrix b = make_llm_matrix(257, 300, 0.7, p, 9, 7);
    EXPECT_EQ(a.row_ptr, b.row_ptr);
    EXPECT_EQ(a.col_idx, b.col_idx);
    EXPECT_EQ(a.values, b.values);
    const CsrMatrix c = make_llm_matrix(257, 300, 0.7, p, 10, 7);
    EXPECT_NE(a.col_idx, c.col_idx);
  }
  EXPECT_THROW(make_llm_matrix(4, 4, 1.0, LlmPattern::random, 1), UsageError);
}

TEST(LlmSuite, SampleRows) {
  EXPECT_EQ(sample_rows(10, 0).size(), 10u);
  EXPECT_EQ(sample_rows(10, 20).size(), 10u);
  const auto rows = sample_rows(28672, 256);
  ASSERT_EQ(rows.size(), 256u);
  EXPECT_EQ(rows.front(), 0);
  EXPECT_EQ(rows.back(), 28671);
  std::set<std::int64_t> mod16;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    ASSERT_LT(rows[i - 1], rows[i]);
    mod16.insert(rows[i] % 16);
  }
  EXPECT_GT(mod16.size(), 8u);  // not one position of every tile
}

TEST(LlmSuite, ReferenceRowsMatchTheFullProduct) {
  const CsrMatrix a = make_llm_matrix(50, 40, 0.6, LlmPattern::magnitude, 2, 2);
  DenseMatrix b(40, 3);
  for (std::size_t i = 0; i < b.data.size(); ++i) b.data[i] = std::sin(static_cast<double>(i));
  const DenseMatrix full = spmm(a, b);
  const std::vector<std::int64_t> rows = {0, 7, 49};
  const std::vector<double> part = reference_rows(a, b.data, 3, rows);
  ASSERT_EQ(part.size(), 9u);
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (int j = 0; j < 3; ++j)
      EXPECT_DOUBLE_EQ(part[i * 3 + j], full.data[static_cast<std::size_t>(rows[i] * 3 + j)]);
  EXPECT_EQ(pick_rows(full.data, 3, rows), part);
  std::vector<double> poisoned = full.data;
  poisoned[5 * 3 + 1] = NAN;  // an unsampled row
  EXPECT_TRUE(std::isnan(pick_rows(poisoned, 3, rows)[0]));
}

}  // namespace
}  // namespace sparsecc::bench

namespace sparsecc::bench {
namespace {

// Manual: the largest layer (117 M nonzeros); run with --gtest_also_run_disabled_tests.
TEST(LlmSuite, DISABLED_LargestLayerSpeed) {
  const auto t0 = std::chrono::steady_clock::now();
  const CsrMatrix a = make_llm_matrix(28672, 8192, 0.5, LlmPattern::random, 1);
  const double random_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(a.nnz(), 28672LL * 4096);
  const auto t1 = std::chrono::steady_clock::now();
  const CsrMatrix b = make_llm_matrix(28672, 8192, 0.5, LlmPattern::magnitude, 1);
  const double magnitude_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  std::printf("28672x8192 at 50 %%: random %.2f s, magnitude %.2f s (%lld nonzeros)\n", random_s, magnitude_s,
              static_cast<long long>(b.nnz()));
}

}  // namespace
}  // namespace sparsecc::bench
