// Host side of the half-precision baselines (bench/half_layouts.hpp): fp16/bf16 rounding to nearest
// even (ties, subnormals, overflow), the shared random B, and the CSR -> Blocked-ELL conversion
// (index layout, -1 padding, values, empty block rows, nnz preserved).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "bench/half_layouts.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/common/random.hpp"
#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/matrix/dense.hpp"

namespace sparsecc::bench {
namespace {

constexpr HalfPrecision kF16 = HalfPrecision::f16;
constexpr HalfPrecision kBf16 = HalfPrecision::bf16;

TEST(HalfLayouts, Names) {
  EXPECT_EQ(half_precision_name(kF16), "fp16");
  EXPECT_EQ(half_precision_name(kBf16), "bf16");
}

TEST(HalfLayouts, F16RoundsToNearestEven) {
  EXPECT_EQ(double_to_half_bits(1.0 / 3.0, kF16), 0x3555);
  EXPECT_EQ(half_bits_to_double(0x3555, kF16), 0.333251953125);
  EXPECT_EQ(double_to_half_bits(1.0, kF16), 0x3c00);
  EXPECT_EQ(double_to_half_bits(-2.0, kF16), 0xc000);
  // Ties between 1 and its neighbours go to the even mantissa.
  EXPECT_EQ(double_to_half_bits(1.0 + std::ldexp(1.0, -11), kF16), 0x3c00);
  EXPECT_EQ(double_to_half_bits(1.0 + 3 * std::ldexp(1.0, -11), kF16), 0x3c02);
  EXPECT_EQ(double_to_half_bits(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -30), kF16), 0x3c01);
  EXPECT_EQ(round_to_half(1.0 + 3 * std::ldexp(1.0, -11), kF16), 1.0 + std::ldexp(1.0, -9));
}

TEST(HalfLayouts, F16Overflow) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(double_to_half_bits(65504.0, kF16), 0x7bff);
  EXPECT_EQ(half_bits_to_double(0x7bff, kF16), 65504.0);
  EXPECT_EQ(double_to_half_bits(65519.0, kF16), 0x7bff);  // below the midpoint to 2^16
  EXPECT_EQ(double_to_half_bits(65520.0, kF16), 0x7c00);  // the midpoint ties to even: inf
  EXPECT_EQ(double_to_half_bits(-65520.0, kF16), 0xfc00);
  EXPECT_EQ(double_to_half_bits(1e10, kF16), 0x7c00);
  EXPECT_EQ(half_bits_to_double(0x7c00, kF16), inf);
  EXPECT_EQ(half_bits_to_double(0xfc00, kF16), -inf);
  EXPECT_TRUE(std::isnan(half_bits_to_double(double_to_half_bits(std::nan(""), kF16), kF16)));
}

TEST(HalfLayouts, F16Subnormals) {
  EXPECT_EQ(double_to_half_bits(std::ldexp(1.0, -24), kF16), 0x0001);
  EXPECT_EQ(half_bits_to_double(0x0001, kF16), std::ldexp(1.0, -24));
  EXPECT_EQ(double_to_half_bits(std::ldexp(1.0, -25), kF16), 0x0000);      // tie: to even (zero)
  EXPECT_EQ(double_to_half_bits(-std::ldexp(1.0, -25), kF16), 0x8000);     // signed zero
  EXPECT_EQ(double_to_half_bits(3 * std::ldexp(1.0, -25), kF16), 0x0002);  // tie 1.5 units: to 2
  EXPECT_EQ(double_to_half_bits(std::ldexp(1.0, -26), kF16), 0x0000);
  EXPECT_EQ(double_to_half_bits(std::ldexp(1.0, -14), kF16), 0x0400);     // the smallest normal
  EXPECT_EQ(double_to_half_bits(std::ldexp(1023.5, -24), kF16), 0x0400);  // rounds up into the normals
  EXPECT_EQ(half_bits_to_double(0x03ff, kF16), std::ldexp(1023.0, -24));
}

TEST(HalfLayouts, Bf16RoundsToNearestEven) {
  EXPECT_EQ(double_to_half_bits(1.0, kBf16), 0x3f80);
  EXPECT_EQ(double_to_half_bits(1.0 + std::ldexp(1.0, -8), kBf16), 0x3f80);  // tie: to even
  EXPECT_EQ(double_to_half_bits(1.0 + 3 * std::ldexp(1.0, -8), kBf16), 0x3f82);
  EXPECT_EQ(double_to_half_bits(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40), kBf16), 0x3f81);
  EXPECT_EQ(double_to_half_bits(1.0 / 3.0, kBf16), 0x3eab);
  EXPECT_EQ(half_bits_to_double(0x3eab, kBf16), 0.333984375);
  // Overflow: (2 - 2^-8) * 2^127 is the midpoint between the largest finite value and 2^128.
  EXPECT_EQ(double_to_half_bits(std::ldexp(2.0 - std::ldexp(1.0, -7), 127), kBf16), 0x7f7f);
  EXPECT_EQ(double_to_half_bits(std::ldexp(2.0 - std::ldexp(1.0, -8), 127), kBf16), 0x7f80);
  EXPECT_EQ(double_to_half_bits(-1e300, kBf16), 0xff80);
  // Subnormals: units of 2^-133.
  EXPECT_EQ(double_to_half_bits(std::ldexp(1.0, -133), kBf16), 0x0001);
  EXPECT_EQ(double_to_half_bits(std::ldexp(1.0, -134), kBf16), 0x0000);
  EXPECT_EQ(half_bits_to_double(0x0001, kBf16), std::ldexp(1.0, -133));
}

TEST(HalfLayouts, EveryFiniteBitPatternRoundTrips) {
  for (HalfPrecision p : {kF16, kBf16}) {
    for (std::uint32_t b = 0; b < 0x10000; ++b) {
      const auto bits = static_cast<std::uint16_t>(b);
      const double v = half_bits_to_double(bits, p);
      if (std::isnan(v)) continue;
      ASSERT_EQ(double_to_half_bits(v, p), bits) << half_precision_name(p) << " bits " << b;
    }
  }
}

TEST(HalfLayouts, OneArgumentFp16ConversionsStayVisible) {
  // The overloads in sparsecc::bench must not hide those of sparsecc/common/dtype.hpp.
  EXPECT_EQ(double_to_half_bits(1.0 / 3.0), 0x3555);
  EXPECT_EQ(half_bits_to_double(std::uint16_t{0x3555}), 0.333251953125);
}

TEST(HalfLayouts, RandomHalfMatrixIsTheRoundedSeededUniform) {
  for (HalfPrecision p : {kF16, kBf16}) {
    const auto bits = random_half_matrix(7, 13, p, 42);
    ASSERT_EQ(bits.size(), 91u);
    SplitMix64 rng(42);
    int nonzero = 0;
    for (std::uint16_t b : bits) {
      const double u = rng.uniform_pm1();
      EXPECT_EQ(b, double_to_half_bits(u, p));
      const double v = half_bits_to_double(b, p);
      EXPECT_GE(v, -1.0);
      EXPECT_LE(v, 1.0);
      EXPECT_LE(std::fabs(v - u), std::fabs(u) * (p == kF16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8)));
      nonzero += v != 0.0;
    }
    EXPECT_GT(nonzero, 80);
    EXPECT_EQ(random_half_matrix(7, 13, p, 42), bits);
    EXPECT_NE(random_half_matrix(7, 13, p, 43), bits);
  }
  EXPECT_TRUE(random_half_matrix(0, 5, kF16, 1).empty());
  EXPECT_THROW(random_half_matrix(-1, 5, kF16, 1), UsageError);
}

TEST(HalfLayouts, RoundValuesKeepsThePattern) {
  DenseMatrix d(2, 3);
  d(0, 1) = 1.0 / 3.0;
  d(1, 0) = 1e-9;  // rounds to zero in fp16, stays stored
  d(1, 2) = -70000.0;
  const CsrMatrix a = csr_from_dense(d);
  const CsrMatrix r = round_values(a, kF16);
  EXPECT_EQ(r.row_ptr, a.row_ptr);
  EXPECT_EQ(r.col_idx, a.col_idx);
  ASSERT_EQ(r.values.size(), 3u);
  EXPECT_EQ(r.values[0], 0.333251953125);
  EXPECT_EQ(r.values[1], 0.0);
  EXPECT_EQ(r.values[2], -std::numeric_limits<double>::infinity());
  EXPECT_EQ(r.source_dtype, DType::f16);
  EXPECT_EQ(round_values(a, kBf16).values[0], 0.333984375);
}

// 5 x 6, block 2: padded to 6 x 6, three block rows, the middle one empty.
//   row 0: (0,1)=1 (0,4)=2     block row 0: block columns 0, 2
//   row 1: (1,0)=3
//   rows 2, 3: empty           block row 1: none
//   row 4: (4,2)=5 (4,5)=4     block row 2: block columns 1, 2
CsrMatrix hand_matrix() {
  DenseMatrix d(5, 6);
  d(0, 1) = 1, d(0, 4) = 2, d(1, 0) = 3, d(4, 2) = 5, d(4, 5) = 4;
  return csr_from_dense(d);
}

TEST(HalfLayouts, BlockedEllOfAHandMatrix) {
  const BlockedEll e = blocked_ell_from_csr(hand_matrix(), 2);
  EXPECT_EQ(e.rows, 6);
  EXPECT_EQ(e.cols, 6);
  EXPECT_EQ(e.block, 2);
  EXPECT_EQ(e.ell_cols, 4);
  EXPECT_EQ(e.block_rows(), 3);
  EXPECT_EQ(e.ell_width(), 2);
  EXPECT_EQ(e.stored(), 24);
  EXPECT_EQ(e.col_ind, (std::vector<std::int32_t>{0, 2, -1, -1, 1, 2}));
  const std::vector<double> values = {
      0, 1, 2, 0,  // row 0: block column 0 holds (0,0) (0,1), block column 2 holds (0,4) (0,5)
      3, 0, 0, 0,  // row 1
      0, 0, 0, 0,  // row 2 (empty block row)
      0, 0, 0, 0,  // row 3
      5, 0, 0, 4,  // row 4: block column 1 holds (4,2) (4,3), block column 2 holds (4,4) (4,5)
      0, 0, 0, 0,  // row 5 (padding)
  };
  EXPECT_EQ(e.values, values);
}

TEST(HalfLayouts, BlockedEllWithBlockOneIsEll) {
  const BlockedEll e = blocked_ell_from_csr(hand_matrix(), 1);
  EXPECT_EQ(e.rows, 5);
  EXPECT_EQ(e.cols, 6);
  EXPECT_EQ(e.ell_cols, 2);  // the longest row
  EXPECT_EQ(e.col_ind, (std::vector<std::int32_t>{1, 4, 0, -1, -1, -1, -1, -1, 2, 5}));
  EXPECT_EQ(e.values, (std::vector<double>{1, 2, 3, 0, 0, 0, 0, 0, 5, 4}));
}

TEST(HalfLayouts, BlockedEllBlockLargerThanTheMatrix) {
  const BlockedEll e = blocked_ell_from_csr(hand_matrix(), 16);
  EXPECT_EQ(e.rows, 16);
  EXPECT_EQ(e.cols, 16);
  EXPECT_EQ(e.ell_cols, 16);
  EXPECT_EQ(e.col_ind, (std::vector<std::int32_t>{0}));
  ASSERT_EQ(e.values.size(), 256u);
  EXPECT_EQ(e.values[0 * 16 + 4], 2);
  EXPECT_EQ(e.values[4 * 16 + 5], 4);
}

TEST(HalfLayouts, BlockedEllOfAnEmptyMatrix) {
  CsrMatrix a;
  a.rows = 3, a.cols = 5;
  a.row_ptr.assign(4, 0);
  const BlockedEll e = blocked_ell_from_csr(a, 4);
  EXPECT_EQ(e.rows, 4);
  EXPECT_EQ(e.cols, 8);
  EXPECT_EQ(e.ell_cols, 0);
  EXPECT_TRUE(e.col_ind.empty());
  EXPECT_TRUE(e.values.empty());
}

TEST(HalfLayouts, BlockedEllRejectsBadBlocks) {
  EXPECT_THROW(blocked_ell_from_csr(hand_matrix(), 0), UsageError);
  EXPECT_THROW(blocked_ell_from_csr(hand_matrix(), -4), UsageError);
}

// Random matrices at several block sizes: expanding the Blocked-ELL form gives back A (padded with
// zeros), the index layout holds its invariants and every nonzero is stored exactly once.
TEST(HalfLayouts, BlockedEllExpandsBackToTheMatrix) {
  SplitMix64 rng(5);
  for (auto [m, k] : {std::pair<std::int64_t, std::int64_t>{37, 50}, {64, 64}, {1, 70}, {33, 1}}) {
    DenseMatrix d(m, k);
    for (double& v : d.data)
      if (rng.next() % 10 == 0) v = rng.uniform_pm1() + 2.0;  // nonzero
    const CsrMatrix a = csr_from_dense(d);
    for (int block : {1, 2, 3, 8, 16, 32}) {
      SCOPED_TRACE(testing::Message() << m << " x " << k << " block " << block);
      const BlockedEll e = blocked_ell_from_csr(a, block);
      ASSERT_EQ(e.rows % block, 0);
      ASSERT_EQ(e.cols % block, 0);
      ASSERT_EQ(e.ell_cols % block, 0);
      ASSERT_GE(e.rows, m);
      ASSERT_LT(e.rows - m, block);
      ASSERT_GE(e.cols, k);
      ASSERT_LT(e.cols - k, block);
      ASSERT_EQ(e.col_ind.size(), static_cast<std::size_t>(e.block_rows() * e.ell_width()));
      ASSERT_EQ(e.values.size(), static_cast<std::size_t>(e.rows * e.ell_cols));
      DenseMatrix back(e.rows, e.cols);
      std::int64_t stored_nonzeros = 0;
      for (std::int64_t br = 0; br < e.block_rows(); ++br) {
        std::int32_t previous = -1;
        bool padding = false;
        for (std::int64_t j = 0; j < e.ell_width(); ++j) {
          const std::int32_t bc = e.col_ind[static_cast<std::size_t>(br * e.ell_width() + j)];
          if (bc < 0) {
            EXPECT_EQ(bc, -1);
            padding = true;
          } else {
            EXPECT_FALSE(padding) << "a real block after a padding block";
            EXPECT_GT(bc, previous);
            EXPECT_LT(bc, e.cols / block);
            previous = bc;
          }
          for (std::int64_t r = br * block; r < (br + 1) * block; ++r) {
            for (std::int64_t c = 0; c < block; ++c) {
              const double v = e.values[static_cast<std::size_t>(r * e.ell_cols + j * block + c)];
              if (v == 0.0) continue;
              ++stored_nonzeros;
              ASSERT_GE(bc, 0) << "a value in a padding block";
              back(r, bc * block + c) += v;
            }
          }
        }
      }
      EXPECT_EQ(stored_nonzeros, a.nnz());
      for (std::int64_t r = 0; r < e.rows; ++r)
        for (std::int64_t c = 0; c < e.cols; ++c)
          ASSERT_EQ(back(r, c), r < m && c < k ? d(r, c) : 0.0) << r << ", " << c;
    }
  }
}

}  // namespace
}  // namespace sparsecc::bench
