// CsrMatrix invariants, dense <-> CSR conversion, transpose, value synthesis and nnz statistics.
#include "sparsecc/matrix/csr.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "sparsecc/common/error.hpp"
#include "sparsecc/matrix/stats.hpp"

namespace sparsecc {
namespace {

DenseMatrix random_dense(std::int64_t rows, std::int64_t cols, double density, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  DenseMatrix d(rows, cols);
  for (auto& v : d.data) v = u(rng) < density ? u(rng) * 2.0 - 1.0 : 0.0;
  return d;
}

CsrMatrix small() {  // [[1 0 2] [0 0 0] [0 3 0]]
  CsrMatrix a;
  a.rows = 3;
  a.cols = 3;
  a.row_ptr = {0, 2, 2, 3};
  a.col_idx = {0, 2, 1};
  a.values = {1, 2, 3};
  return a;
}

void expect_usage_error(const CsrMatrix& a, const std::string& needle) {
  try {
    validate(a);
    ADD_FAILURE() << "no error, expected one mentioning " << needle;
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Csr, ValidateAcceptsGoodMatrices) {
  EXPECT_NO_THROW(validate(small()));
  EXPECT_NO_THROW(validate(CsrMatrix{}));
  CsrMatrix zero_by_k;
  zero_by_k.cols = 7;
  EXPECT_NO_THROW(validate(zero_by_k));
}

TEST(Csr, ValidateRejectsEachBrokenInvariant) {
  CsrMatrix a = small();
  a.rows = -1;
  expect_usage_error(a, "negative");
  a = small();
  a.row_ptr.pop_back();
  expect_usage_error(a, "row_ptr has 3 entries");
  a = small();
  a.values.pop_back();
  expect_usage_error(a, "2 values for 3");
  a = small();
  a.row_ptr = {1, 2, 2, 3};
  expect_usage_error(a, "row_ptr[0]");
  a = small();
  a.row_ptr = {0, 2, 1, 3};
  expect_usage_error(a, "decreases at row 1");
  a = small();
  a.row_ptr = {0, 2, 2, 2};
  expect_usage_error(a, "ends at 2");
  a = small();
  a.col_idx = {0, 3, 1};
  expect_usage_error(a, "column index 3");
  a = small();
  a.col_idx = {0, -1, 1};
  expect_usage_error(a, "column index -1");
  a = small();
  a.col_idx = {2, 0, 1};
  expect_usage_error(a, "not strictly increasing");
  a = small();
  a.col_idx = {1, 1, 1};
  expect_usage_error(a, "not strictly increasing");
}

TEST(Csr, DenseRoundTripOnRandomShapes) {
  const std::pair<int, int> shapes[] = {{0, 0}, {0, 5}, {5, 0}, {1, 1}, {7, 3}, {3, 17}, {40, 40}};
  std::uint32_t seed = 1;
  for (const auto& [r, c] : shapes) {
    for (const double density : {0.0, 0.1, 0.5, 1.0}) {
      const DenseMatrix d = random_dense(r, c, density, seed++);
      const CsrMatrix a = csr_from_dense(d, DType::f32);
      EXPECT_NO_THROW(validate(a));
      EXPECT_EQ(a.source_dtype, DType::f32);
      std::int64_t nonzero = 0;
      for (const double v : d.data) nonzero += v != 0.0;
      EXPECT_EQ(a.nnz(), nonzero);
      const DenseMatrix back = dense_from_csr(a);
      EXPECT_EQ(back.rows, r);
      EXPECT_EQ(back.cols, c);
      EXPECT_EQ(back.data, d.data);
    }
  }
}

TEST(Csr, FromDenseDropsZerosKeepsPositions) {
  DenseMatrix d(2, 3);
  d(0, 1) = -0.0;
  d(0, 2) = 5.5;
  d(1, 0) = 1e-300;
  const CsrMatrix a = csr_from_dense(d);
  EXPECT_EQ(a.row_ptr, (std::vector<std::int64_t>{0, 1, 2}));
  EXPECT_EQ(a.col_idx, (std::vector<std::int32_t>{2, 0}));
  EXPECT_EQ(a.values, (std::vector<double>{5.5, 1e-300}));
  DenseMatrix bad(2, 3);
  bad.data.pop_back();
  EXPECT_THROW(csr_from_dense(bad), UsageError);
}

TEST(Csr, TransposeMatchesDenseTranspose) {
  std::uint32_t seed = 100;
  for (const auto& [r, c] :
       std::vector<std::pair<int, int>>{{0, 0}, {0, 4}, {4, 0}, {1, 1}, {9, 5}, {13, 31}}) {
    const DenseMatrix d = random_dense(r, c, 0.3, seed++);
    const CsrMatrix t = transpose(csr_from_dense(d, DType::bf16));
    EXPECT_NO_THROW(validate(t));
    EXPECT_EQ(t.source_dtype, DType::bf16);
    const DenseMatrix dt = dense_from_csr(t);
    ASSERT_EQ(dt.rows, c);
    ASSERT_EQ(dt.cols, r);
    for (int i = 0; i < r; ++i)
      for (int j = 0; j < c; ++j) EXPECT_EQ(dt(j, i), d(i, j));
    const CsrMatrix tt = transpose(t);
    EXPECT_EQ(tt.row_ptr, csr_from_dense(d).row_ptr);
    EXPECT_EQ(tt.col_idx, csr_from_dense(d).col_idx);
  }
}

TEST(Csr, FillValuesUniformIsDeterministicFloat32AndNonzero) {
  CsrMatrix a = csr_from_dense(random_dense(50, 80, 0.5, 7));
  CsrMatrix b = a;
  fill_values_uniform(a, 42);
  fill_values_uniform(b, 42);
  EXPECT_EQ(a.values, b.values);
  fill_values_uniform(b, 43);
  EXPECT_NE(a.values, b.values);
  double lo = 1, hi = -1, sum = 0;
  for (const double v : a.values) {
    EXPECT_NE(v, 0.0);
    EXPECT_GE(v, -1.0);
    EXPECT_LT(v, 1.0);
    EXPECT_EQ(static_cast<double>(static_cast<float>(v)), v);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
  }
  EXPECT_LT(lo, -0.9);
  EXPECT_GT(hi, 0.9);
  EXPECT_LT(std::abs(sum / static_cast<double>(a.nnz())), 0.05);
  // Pinned: the generator is splitmix64, so these never change across platforms.
  CsrMatrix one;
  one.rows = 1;
  one.cols = 3;
  one.row_ptr = {0, 3};
  one.col_idx = {0, 1, 2};
  fill_values_uniform(one, 0);
  ASSERT_EQ(one.values.size(), 3u);
  // The first splitmix64 output for state 0 is 0xE220A8397B1DCDAF; its top 24 bits are 0xE220A8.
  EXPECT_EQ(one.values[0], (0xE220A8 - 8388608) / 8388608.0);
}

TEST(CsrStats, CountsAndMoments) {
  const CsrMatrix a = small();
  EXPECT_EQ(row_counts(a), (std::vector<std::int64_t>{2, 0, 1}));
  EXPECT_EQ(col_counts(a), (std::vector<std::int64_t>{1, 1, 1}));
  const MatrixStats s = matrix_stats(a);
  EXPECT_EQ(s.rows, 3);
  EXPECT_EQ(s.cols, 3);
  EXPECT_EQ(s.nnz, 3);
  EXPECT_DOUBLE_EQ(s.sparsity, 1.0 - 3.0 / 9.0);
  EXPECT_EQ(s.row.min, 0);
  EXPECT_EQ(s.row.max, 2);
  EXPECT_DOUBLE_EQ(s.row.mean, 1.0);
  EXPECT_DOUBLE_EQ(s.row.stddev, std::sqrt(2.0 / 3.0));
  EXPECT_EQ(s.row.empty, 1);
  EXPECT_EQ(s.col.min, 1);
  EXPECT_EQ(s.col.max, 1);
  EXPECT_DOUBLE_EQ(s.col.stddev, 0.0);
  EXPECT_EQ(s.col.empty, 0);
}

TEST(CsrStats, EmptyShapes) {
  const MatrixStats s = matrix_stats(CsrMatrix{});
  EXPECT_EQ(s.nnz, 0);
  EXPECT_EQ(s.sparsity, 0.0);
  EXPECT_EQ(s.row.empty, 0);
  CsrMatrix z;
  z.rows = 2;
  z.cols = 3;
  z.row_ptr = {0, 0, 0};
  const MatrixStats t = matrix_stats(z);
  EXPECT_EQ(t.sparsity, 1.0);
  EXPECT_EQ(t.row.empty, 2);
  EXPECT_EQ(t.col.empty, 3);
  EXPECT_EQ(t.row.max, 0);
}

}  // namespace
}  // namespace sparsecc
