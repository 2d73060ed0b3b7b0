// fp64 references (spmm, spmv, conv3x3) against dense linear algebra written out in the test.
#include <gtest/gtest.h>

#include <random>

#include "sparsecc/common/error.hpp"
#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/reference/conv.hpp"
#include "sparsecc/reference/spmm.hpp"
#include "test_support.hpp"

namespace sparsecc {
namespace {

std::vector<double> random_values(std::size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// A random sparse matrix; every third row is forced empty when empty_rows is set.
DenseMatrix random_sparse(std::int64_t rows, std::int64_t cols, double density, bool empty_rows,
                          std::mt19937& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  DenseMatrix d(rows, cols);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      if (!(empty_rows && r % 3 == 1) && u(rng) < density) d(r, c) = u(rng) * 2 - 1;
  return d;
}

// C = A B + bias, relu: the naive dense triple loop.
DenseMatrix dense_gemm(const DenseMatrix& a, const DenseMatrix& b, const std::vector<double>* bias,
                       bool relu) {
  DenseMatrix c(a.rows, b.cols);
  for (std::int64_t i = 0; i < a.rows; ++i)
    for (std::int64_t j = 0; j < b.cols; ++j) {
      double s = 0;
      for (std::int64_t k = 0; k < a.cols; ++k) s += a(i, k) * b(k, j);
      if (bias) s += (*bias)[i];
      c(i, j) = relu && s < 0 ? 0.0 : s;
    }
  return c;
}

struct Case {
  std::int64_t m, k, n;
};

TEST(Reference, SpmmMatchesDenseGemm) {
  std::mt19937 rng(11);
  const Case cases[] = {{0, 0, 0}, {0, 5, 3}, {4, 0, 3},   {3, 4, 0},
                        {1, 1, 1}, {7, 5, 1}, {13, 17, 9}, {32, 48, 20}};
  for (const auto& [m, k, n] : cases) {
    for (const bool empty_rows : {false, true}) {
      for (const bool use_bias : {false, true}) {
        for (const bool relu : {false, true}) {
          SCOPED_TRACE(testing::Message()
                       << m << "x" << k << "x" << n << " bias " << use_bias << " relu " << relu);
          const DenseMatrix ad = random_sparse(m, k, 0.3, empty_rows, rng);
          DenseMatrix b(k, n);
          b.data = random_values(b.data.size(), rng);
          const std::vector<double> bias = random_values(m, rng);
          const DenseMatrix want = dense_gemm(ad, b, use_bias ? &bias : nullptr, relu);
          const DenseMatrix got = spmm(csr_from_dense(ad), b, use_bias ? &bias : nullptr, relu);
          ASSERT_EQ(got.rows, m);
          ASSERT_EQ(got.cols, n);
          EXPECT_LE(test::max_abs_diff(got.data, want.data), 1e-12);
          if (relu) {
            for (const double v : got.data) EXPECT_GE(v, 0.0);
          }
        }
      }
    }
  }
}

TEST(Reference, SpmmIsExactOnSmallIntegers) {
  DenseMatrix a(2, 3);
  a.data = {1, 0, 2, 0, 0, 0};
  DenseMatrix b(3, 2);
  b.data = {1, 2, 3, 4, 5, 6};
  const std::vector<double> bias = {-20, 1};
  EXPECT_EQ(spmm(csr_from_dense(a), b).data, (std::vector<double>{11, 14, 0, 0}));
  EXPECT_EQ(spmm(csr_from_dense(a), b, &bias).data, (std::vector<double>{-9, -6, 1, 1}));
  EXPECT_EQ(spmm(csr_from_dense(a), b, &bias, true).data, (std::vector<double>{0, 0, 1, 1}));
}

TEST(Reference, SpmmShapeErrors) {
  const CsrMatrix a = csr_from_dense(DenseMatrix(2, 3, 1.0));
  EXPECT_THROW(spmm(a, DenseMatrix(2, 4)), UsageError);
  const std::vector<double> bias(3);
  EXPECT_THROW(spmm(a, DenseMatrix(3, 4), &bias), UsageError);
  DenseMatrix bad(3, 4);
  bad.data.pop_back();
  EXPECT_THROW(spmm(a, bad), UsageError);
  CsrMatrix broken = a;
  broken.col_idx[0] = 7;
  EXPECT_THROW(spmm(broken, DenseMatrix(3, 4)), UsageError);
}

TEST(Reference, SpmvMatchesDense) {
  std::mt19937 rng(12);
  for (const auto& [m, k] :
       std::vector<std::pair<int, int>>{{0, 0}, {0, 4}, {4, 0}, {1, 1}, {9, 14}, {40, 3}}) {
    const DenseMatrix ad = random_sparse(m, k, 0.4, true, rng);
    const std::vector<double> x = random_values(k, rng);
    std::vector<double> want(m, 0.0);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < k; ++j) want[i] += ad(i, j) * x[j];
    EXPECT_LE(test::max_abs_diff(spmv(csr_from_dense(ad), x), want), 1e-12);
  }
  EXPECT_THROW(spmv(csr_from_dense(DenseMatrix(2, 3, 1.0)), std::vector<double>(2)), UsageError);
}

// Convolution as the test builds it independently: explicit im2col (rows c*9 + ky*3 + kx, columns
// the output pixels of one image) followed by a dense GEMM with the dense filter.
std::vector<double> im2col_conv(const DenseMatrix& w, const std::vector<double>& in, const Conv3x3Shape& s,
                                const std::vector<double>* bias, bool relu) {
  const std::int64_t oh = (s.height + 2 * s.pad - 3) / s.stride + 1,
                     ow = (s.width + 2 * s.pad - 3) / s.stride + 1;
  std::vector<double> out;
  for (std::int64_t n = 0; n < s.batch; ++n) {
    DenseMatrix cols(s.in_channels * 9, oh * ow);
    for (std::int64_t c = 0; c < s.in_channels; ++c)
      for (std::int64_t ky = 0; ky < 3; ++ky)
        for (std::int64_t kx = 0; kx < 3; ++kx)
          for (std::int64_t y = 0; y < oh; ++y)
            for (std::int64_t x = 0; x < ow; ++x) {
              const std::int64_t iy = y * s.stride + ky - s.pad, ix = x * s.stride + kx - s.pad;
              const bool inside = iy >= 0 && iy < s.height && ix >= 0 && ix < s.width;
              cols(c * 9 + ky * 3 + kx, y * ow + x) =
                  inside ? in[((n * s.in_channels + c) * s.height + iy) * s.width + ix] : 0.0;
            }
    const DenseMatrix o = dense_gemm(w, cols, bias, relu);
    out.insert(out.end(), o.data.begin(), o.data.end());
  }
  return out;
}

TEST(Reference, Conv3x3MatchesIm2colGemm) {
  std::mt19937 rng(13);
  const Conv3x3Shape shapes[] = {{1, 1, 3, 3, 1, 0, 1}, {1, 1, 1, 1, 1, 1, 1}, {2, 3, 7, 6, 4, 0, 1},
                                 {2, 3, 7, 6, 4, 1, 1}, {2, 3, 7, 6, 4, 0, 2}, {3, 2, 8, 9, 5, 1, 2},
                                 {1, 4, 5, 5, 6, 1, 3}, {0, 2, 4, 4, 3, 1, 1}, {1, 0, 4, 4, 3, 1, 1},
                                 {1, 2, 4, 4, 0, 1, 1}};
  for (const Conv3x3Shape& s : shapes) {
    for (const bool use_bias : {false, true}) {
      for (const bool relu : {false, true}) {
        SCOPED_TRACE(testing::Message() << "N" << s.batch << " C" << s.in_channels << " H" << s.height << " W"
                                        << s.width << " K" << s.out_channels << " pad " << s.pad << " stride "
                                        << s.stride << " bias " << use_bias << " relu " << relu);
        const DenseMatrix w = random_sparse(s.out_channels, s.in_channels * 9, 0.35, true, rng);
        const std::vector<double> in = random_values(s.batch * s.in_channels * s.height * s.width, rng);
        const std::vector<double> bias = random_values(s.out_channels, rng);
        const auto* b = use_bias ? &bias : nullptr;
        const std::vector<double> got = conv3x3(csr_from_dense(w), in, s, b, relu);
        ASSERT_EQ(got.size(),
                  static_cast<std::size_t>(s.batch * s.out_channels * s.out_height() * s.out_width()));
        EXPECT_LE(test::max_abs_diff(got, im2col_conv(w, in, s, b, relu)), 1e-12);
      }
    }
  }
}

TEST(Reference, Conv3x3OutputSize) {
  const Conv3x3Shape s{1, 1, 56, 56, 1, 1, 2};
  EXPECT_EQ(s.out_height(), 28);
  EXPECT_EQ((Conv3x3Shape{1, 1, 56, 56, 1, 1, 1}.out_width()), 56);
  EXPECT_EQ((Conv3x3Shape{1, 1, 56, 56, 1, 0, 1}.out_width()), 54);
}

TEST(Reference, Conv3x3UsageErrors) {
  const CsrMatrix w = csr_from_dense(DenseMatrix(2, 9, 1.0));
  const std::vector<double> in(16);
  EXPECT_NO_THROW(conv3x3(w, in, {1, 1, 4, 4, 2, 0, 1}));
  EXPECT_THROW(conv3x3(w, in, {1, 2, 4, 4, 2, 0, 1}), UsageError);  // W columns != in_channels * 9
  EXPECT_THROW(conv3x3(w, in, {1, 1, 4, 4, 3, 0, 1}), UsageError);  // W rows != out_channels
  EXPECT_THROW(conv3x3(w, in, {1, 1, 4, 5, 2, 0, 1}), UsageError);  // input size
  EXPECT_THROW(conv3x3(w, in, {1, 1, 4, 4, 2, -1, 1}), UsageError);
  EXPECT_THROW(conv3x3(w, in, {1, 1, 4, 4, 2, 0, 0}), UsageError);
  EXPECT_THROW(conv3x3(w, std::vector<double>(4), {1, 1, 2, 2, 2, 0, 1}), UsageError);  // smaller than 3x3
  const std::vector<double> bias(3);
  EXPECT_THROW(conv3x3(w, in, {1, 1, 4, 4, 2, 0, 1}, &bias), UsageError);
}

}  // namespace
}  // namespace sparsecc
