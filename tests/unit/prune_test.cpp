// Structured pruning (`sparsecc prune`): pattern parsing, the exact result of every pattern on small
// hand-made matrices (the thesis's 6x6 worked example for RMB), the RMB shortcut against a literal
// implementation of Alg. 19/20, achieved sparsity, the n:m and RMB balance properties, and the stats.
#include "sparsecc/matrix/prune.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/random.hpp"

namespace sparsecc {
namespace {

DenseMatrix from_rows(const std::vector<std::vector<double>>& rows) {
  DenseMatrix d(static_cast<std::int64_t>(rows.size()),
                rows.empty() ? 0 : static_cast<std::int64_t>(rows[0].size()));
  for (std::int64_t r = 0; r < d.rows; ++r)
    for (std::int64_t c = 0; c < d.cols; ++c)
      d(r, c) = rows[static_cast<std::size_t>(r)][static_cast<std::size_t>(c)];
  return d;
}

// The residual of thesis Fig. 7.10.
DenseMatrix thesis_matrix() {
  return from_rows({{3, 7, 8, 9, 2, 8},
                    {6, 4, 6, 2, 4, 1},
                    {1, 3, 2, 4, 2, 1},
                    {2, 9, 1, 3, 1, 1},
                    {3, 2, 6, 4, 3, 2},
                    {2, 3, 2, 8, 7, 3}});
}

// `a` with only the listed h x w tiles (top-left corners) kept.
DenseMatrix only_tiles(const DenseMatrix& a, std::int64_t h, std::int64_t w,
                       const std::vector<std::pair<std::int64_t, std::int64_t>>& corners) {
  DenseMatrix out(a.rows, a.cols, 0.0);
  for (const auto& [r0, c0] : corners)
    for (std::int64_t r = r0; r < std::min(a.rows, r0 + h); ++r)
      for (std::int64_t c = c0; c < std::min(a.cols, c0 + w); ++c) out(r, c) = a(r, c);
  return out;
}

// Small integers with many zeros and ties, so the tie rules and zero-strength passes are exercised.
DenseMatrix tie_matrix(std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
  SplitMix64 rng(seed);
  DenseMatrix d(rows, cols);
  for (auto& x : d.data)
    x = static_cast<double>(static_cast<int>(rng.next() % 7) - 3) * (rng.next() % 3 == 0);
  return d;
}

// Thesis Alg. 19/20 taken literally: every BH x BW block (edges padded with zeros), K passes, each
// computing the blocklet strengths of the residual and moving the first maximum of every row block.
DenseMatrix literal_rmb(const DenseMatrix& a, std::int64_t blh, std::int64_t blw, std::int64_t bh,
                        std::int64_t bw, std::int64_t k) {
  DenseMatrix out(a.rows, a.cols, 0.0);
  for (std::int64_t br = 0; br < a.rows; br += bh)
    for (std::int64_t bc = 0; bc < a.cols; bc += bw) {
      DenseMatrix res(bh, bw, 0.0), mbl(bh, bw, 0.0);
      for (std::int64_t r = 0; r < bh; ++r)
        for (std::int64_t c = 0; c < bw; ++c)
          if (br + r < a.rows && bc + c < a.cols) res(r, c) = a(br + r, bc + c);
      for (std::int64_t pass = 0; pass < k; ++pass)
        for (std::int64_t rb = 0; rb < bh / blh; ++rb) {
          std::int64_t best = 0;
          double best_strength = -1.0;
          for (std::int64_t cb = 0; cb < bw / blw; ++cb) {
            double s = 0.0;
            for (std::int64_t r = 0; r < blh; ++r)
              for (std::int64_t c = 0; c < blw; ++c) s += std::fabs(res(rb * blh + r, cb * blw + c));
            if (s > best_strength) best_strength = s, best = cb;
          }
          for (std::int64_t r = rb * blh; r < (rb + 1) * blh; ++r)
            for (std::int64_t c = best * blw; c < (best + 1) * blw; ++c) {
              mbl(r, c) += res(r, c);
              res(r, c) = 0.0;
            }
        }
      for (std::int64_t r = 0; r < bh; ++r)
        for (std::int64_t c = 0; c < bw; ++c)
          if (br + r < a.rows && bc + c < a.cols) out(br + r, bc + c) = mbl(r, c);
    }
  return out;
}

TEST(PrunePattern, ParsesEveryKind) {
  PrunePattern p = parse_prune_pattern("unstructured");
  EXPECT_EQ(p.kind, PruneKind::unstructured);
  EXPECT_FALSE(implied_sparsity(p));

  p = parse_prune_pattern("block:4x8");
  EXPECT_EQ(p.kind, PruneKind::block);
  EXPECT_EQ(p.tile_rows, 4);
  EXPECT_EQ(p.tile_cols, 8);

  p = parse_prune_pattern("2:4");
  EXPECT_EQ(p.kind, PruneKind::n_m);
  EXPECT_EQ(p.n, 2);
  EXPECT_EQ(p.m, 4);
  ASSERT_TRUE(implied_sparsity(p));
  EXPECT_DOUBLE_EQ(*implied_sparsity(p), 0.5);
  EXPECT_DOUBLE_EQ(*implied_sparsity(parse_prune_pattern("4:4")), 0.0);

  p = parse_prune_pattern("rmb:2x2");
  EXPECT_EQ(p.kind, PruneKind::rmb);
  EXPECT_EQ(p.tile_rows, 2);
  EXPECT_EQ(p.tile_cols, 2);
  EXPECT_EQ(p.rmb_rows, 0);
  EXPECT_EQ(p.rmb_cols, 0);

  p = parse_prune_pattern("rmb:4x2@128x32");
  EXPECT_EQ(p.tile_rows, 4);
  EXPECT_EQ(p.tile_cols, 2);
  EXPECT_EQ(p.rmb_rows, 128);
  EXPECT_EQ(p.rmb_cols, 32);

  for (const char* s :
       {"unstructured", "block:4x8", "2:4", "1:1", "rmb:2x2", "rmb:4x2@128x32", "rmb:1x1@1x4"})
    EXPECT_EQ(to_string(parse_prune_pattern(s)), s);
}

TEST(PrunePattern, RejectsBadSpellings) {
  for (const char* s : {"",
                        "foo",
                        "Unstructured",
                        "unstructured ",
                        "block",
                        "block:",
                        "block:4",
                        "block:4x",
                        "block:x4",
                        "block:0x4",
                        "block:4x0",
                        "block:-1x4",
                        "block:+4x4",
                        "block:4x4x4",
                        "block:4X4",
                        "block: 4x4",
                        "block:16777217x1",
                        "block:99999999999999999999x1",
                        "2:",
                        ":4",
                        "0:4",
                        "4:2",
                        "2:4:8",
                        "2:4.0",
                        "-2:4",
                        "2:-4",
                        "rmb:",
                        "rmb:2",
                        "rmb:2x2@",
                        "rmb:2x2@6",
                        "rmb:4x2@6x6",
                        "rmb:2x4@6x6",
                        "rmb:2x2@6x6@6x6",
                        "rmb:0x2",
                        "n:m"}) {
    EXPECT_THROW(parse_prune_pattern(s), UsageError) << "'" << s << "'";
  }
  try {
    parse_prune_pattern("rmb:4x2@6x6");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("does not tile the RMB block 6x6"), std::string::npos) << e.what();
  }
}

TEST(PruneDense, RmbThesisWorkedExample) {
  const DenseMatrix a = thesis_matrix();
  const PrunePattern p = parse_prune_pattern("rmb:2x2@6x6");
  // Three blocklet positions per row block: K = round((1 - S) * 3).
  EXPECT_EQ(rmb_blocklets_per_block(p, 6, 2.0 / 3.0), 1);
  EXPECT_EQ(rmb_blocklets_per_block(p, 6, 1.0 / 3.0), 2);
  EXPECT_EQ(rmb_blocklets_per_block(p, 6, 0.0), 3);
  EXPECT_EQ(rmb_blocklets_per_block(p, 6, 1.0), 1);  // at least one

  // Pass 1: indices [1, 0, 1], blocklets [[8,9],[6,2]], [[1,3],[2,9]], [[6,4],[2,8]].
  const DenseMatrix one = prune_dense(a, p, 2.0 / 3.0);
  EXPECT_EQ(one.data, from_rows({{0, 0, 8, 9, 0, 0},
                                 {0, 0, 6, 2, 0, 0},
                                 {1, 3, 0, 0, 0, 0},
                                 {2, 9, 0, 0, 0, 0},
                                 {0, 0, 6, 4, 0, 0},
                                 {0, 0, 2, 8, 0, 0}})
                          .data);
  // Pass 2 adds indices [0, 1, 2].
  EXPECT_EQ(prune_dense(a, p, 1.0 / 3.0).data,
            only_tiles(a, 2, 2, {{0, 2}, {0, 0}, {2, 0}, {2, 2}, {4, 2}, {4, 4}}).data);
  // Three passes exhaust the block: the matrix comes back whole.
  EXPECT_EQ(prune_dense(a, p, 0.0).data, a.data);
  EXPECT_EQ(prune_dense(a, p, 1.0).data, one.data);

  // The default RMB block (blocklet height x the whole row) and an explicit 2x6 give the same here.
  EXPECT_EQ(prune_dense(a, parse_prune_pattern("rmb:2x2"), 2.0 / 3.0).data, one.data);
  EXPECT_EQ(prune_dense(a, parse_prune_pattern("rmb:2x2@2x6"), 2.0 / 3.0).data, one.data);
}

TEST(PruneDense, RmbMatchesLiteralGreedy) {
  struct Case {
    std::int64_t rows, cols, blh, blw, bh, bw;
  };
  const Case cases[] = {{6, 6, 2, 2, 6, 6}, {13, 17, 2, 3, 4, 6},  {16, 32, 4, 2, 8, 16}, {9, 10, 1, 1, 3, 5},
                        {7, 7, 3, 2, 6, 4}, {32, 24, 4, 4, 4, 24}, {5, 40, 1, 4, 1, 8}};
  std::uint64_t seed = 1;
  for (const Case& c : cases)
    for (const double s : {0.0, 0.3, 0.5, 0.75, 0.9, 1.0})
      for (int zeros = 0; zeros < 2; ++zeros) {
        const DenseMatrix a =
            zeros ? tie_matrix(c.rows, c.cols, ++seed) : random_dense(c.rows, c.cols, ++seed);
        PrunePattern p;
        p.kind = PruneKind::rmb;
        p.tile_rows = c.blh;
        p.tile_cols = c.blw;
        p.rmb_rows = c.bh;
        p.rmb_cols = c.bw;
        const std::int64_t k = rmb_blocklets_per_block(p, c.cols, s);
        EXPECT_EQ(k, std::max<std::int64_t>(1, std::llround((1 - s) * static_cast<double>(c.bw / c.blw))));
        EXPECT_EQ(prune_dense(a, p, s).data, literal_rmb(a, c.blh, c.blw, c.bh, c.bw, k).data)
            << to_string(p) << " on " << c.rows << "x" << c.cols << " at " << s
            << (zeros ? " with ties" : "");
      }
}

TEST(PruneDense, RmbKeepsExactlyKBlockletsPerRowBlock) {
  // Edges in both directions: 30 rows are not a multiple of 8, 47 columns not of 10.
  const DenseMatrix a = random_dense(30, 47, 7);
  const PrunePattern p = parse_prune_pattern("rmb:4x2@8x10");
  const double s = 0.6;
  const std::int64_t k = rmb_blocklets_per_block(p, a.cols, s);
  ASSERT_EQ(k, 2);  // round(0.4 * 5)
  const DenseMatrix out = prune_dense(a, p, s);
  for (std::int64_t r0 = 0; r0 < a.rows; r0 += 4)
    for (std::int64_t c0 = 0; c0 < a.cols; c0 += 10) {
      int kept = 0;
      for (std::int64_t t = c0; t < std::min(a.cols, c0 + 10); t += 2) {
        // A blocklet is kept whole (a dense copy of the original) or dropped whole.
        int same = 0, zero = 0, n = 0;
        for (std::int64_t r = r0; r < std::min(a.rows, r0 + 4); ++r)
          for (std::int64_t c = t; c < std::min(a.cols, t + 2); ++c, ++n) {
            same += out(r, c) == a(r, c);
            zero += out(r, c) == 0.0;
          }
        ASSERT_TRUE(same == n || zero == n) << r0 << "," << t;
        kept += same == n;
      }
      EXPECT_EQ(kept, k) << "row block at " << r0 << ", RMB block column at " << c0;
    }

  // The default RMB block: every row block of the matrix keeps K blocklets across the whole row,
  // K = round((1 - S) * 24) for 47 columns rounded up to 48.
  const PrunePattern whole = parse_prune_pattern("rmb:4x2");
  ASSERT_EQ(rmb_blocklets_per_block(whole, a.cols, 0.75), 6);
  const DenseMatrix w = prune_dense(a, whole, 0.75);
  for (std::int64_t r0 = 0; r0 < a.rows; r0 += 4) {
    int kept = 0;
    for (std::int64_t t = 0; t < a.cols; t += 2) kept += w(r0, t) != 0.0;
    EXPECT_EQ(kept, 6) << r0;
  }
}

TEST(PruneDense, BlockKeepsStrongestWholeBlocks) {
  const DenseMatrix a = from_rows({{1, 1, 5, 0},  //
                                   {1, 1, 0, 0},
                                   {0, 0, 2, 2},
                                   {0, -9, 2, 2}});
  // Strengths: [4, 5; 9, 8] -> the two strongest are (1,0) and (1,1).
  const PrunePattern p = parse_prune_pattern("block:2x2");
  EXPECT_EQ(prune_dense(a, p, 0.5).data, only_tiles(a, 2, 2, {{2, 0}, {2, 2}}).data);
  EXPECT_EQ(prune_dense(a, p, 0.75).data, only_tiles(a, 2, 2, {{2, 0}}).data);
  EXPECT_EQ(prune_dense(a, p, 0.0).data, a.data);
  EXPECT_EQ(prune_dense(a, p, 1.0).data, DenseMatrix(4, 4).data);

  // Ties go to the lower block index; edge blocks count their missing entries as zeros. 3x5 with 2x2
  // blocks: 2 x 3 blocks, the right column and the bottom row partial.
  const DenseMatrix t = from_rows({{1, 1, 1, 1, 3},  //
                                   {1, 1, 1, 1, 3},
                                   {4, 0, 0, 0, 1}});
  // Strengths: [4, 4, 6; 4, 0, 1]; keep round(0.5 * 6) = 3: blocks 2, 0, 1 (4 = 4 = 4: lowest first).
  EXPECT_EQ(prune_dense(t, p, 0.5).data, only_tiles(t, 2, 2, {{0, 4}, {0, 0}, {0, 2}}).data);
  // At 0.6, keep round(0.4 * 6) = 2: blocks 2 and 0.
  EXPECT_EQ(prune_dense(t, p, 0.6).data, only_tiles(t, 2, 2, {{0, 4}, {0, 0}}).data);
}

TEST(PruneDense, NmKeepsLargestOfEveryGroup) {
  const DenseMatrix a = from_rows({{1, -3, 2, 0.5, 4, 4, 1, 4, 7, -8},  //
                                   {0, 0, 0, 1, -1, 1, 1, -1, 0, 0}});
  const PrunePattern p = parse_prune_pattern("2:4");
  // Groups of 4 (the last has 2 columns, kept whole); ties to the lower column.
  EXPECT_EQ(prune_dense(a, p, 0.5).data, from_rows({{0, -3, 2, 0, 4, 4, 0, 0, 7, -8},  //
                                                    {0, 0, 0, 1, -1, 1, 0, 0, 0, 0}})
                                             .data);
  EXPECT_EQ(prune_dense(a, p, 0.5).data, prune_dense(a, p, 0.5000000001).data);
  EXPECT_THROW(prune_dense(a, p, 0.3), UsageError);
  EXPECT_THROW(prune_dense(a, p, 0.51), UsageError);
  EXPECT_EQ(prune_dense(a, parse_prune_pattern("4:4"), 0.0).data, a.data);

  // On random matrices every full group keeps exactly N entries, each no smaller than any it dropped.
  for (const auto& [n, m] :
       {std::pair{2, 4}, std::pair{1, 4}, std::pair{1, 2}, std::pair{3, 8}, std::pair{5, 7}}) {
    const DenseMatrix r = random_dense(17, 56, static_cast<std::uint64_t>(n * 10 + m));
    PrunePattern q;
    q.kind = PruneKind::n_m;
    q.n = n;
    q.m = m;
    const DenseMatrix out = prune_dense(r, q, 1.0 - static_cast<double>(n) / m);
    for (std::int64_t row = 0; row < r.rows; ++row)
      for (std::int64_t g = 0; g < r.cols; g += m) {
        int kept = 0;
        double smallest_kept = std::numeric_limits<double>::infinity(), largest_dropped = 0.0;
        for (std::int64_t c = g; c < std::min(r.cols, g + m); ++c) {
          if (out(row, c) != 0.0) {
            ++kept;
            EXPECT_EQ(out(row, c), r(row, c));
            smallest_kept = std::min(smallest_kept, std::fabs(r(row, c)));
          } else {
            largest_dropped = std::max(largest_dropped, std::fabs(r(row, c)));
          }
        }
        EXPECT_EQ(kept, std::min<std::int64_t>(n, std::min(r.cols, g + m) - g)) << n << ":" << m;
        EXPECT_GE(smallest_kept, largest_dropped);
      }
  }
}

TEST(PruneDense, UnstructuredIsMagnitudePrune) {
  const DenseMatrix a = random_dense(20, 30, 5);
  const PrunePattern p = parse_prune_pattern("unstructured");
  for (const double s : {0.0, 0.25, 0.9, 1.0})
    EXPECT_EQ(prune_dense(a, p, s).data, dense_from_csr(magnitude_prune(a, s)).data);
  const DenseMatrix h = from_rows({{1, -4, 2}, {3, 0, -2}});
  EXPECT_EQ(prune_dense(h, p, 0.5).data, from_rows({{0, -4, 2}, {3, 0, 0}}).data);  // ties: lower index
}

TEST(PruneDense, AchievedSparsity) {
  const DenseMatrix a = random_dense(64, 64, 11);
  const auto achieved = [&](const char* pattern, double s) {
    return prune_stats(a, prune_dense(a, parse_prune_pattern(pattern), s)).sparsity;
  };
  EXPECT_DOUBLE_EQ(achieved("unstructured", 0.9), 1.0 - 410.0 / 4096.0);  // round(0.1 * 4096)
  EXPECT_DOUBLE_EQ(achieved("block:4x4", 0.75), 0.75);
  EXPECT_DOUBLE_EQ(achieved("block:8x4", 0.9), 1.0 - 13.0 / 128.0);  // round(0.1 * 128) blocks
  EXPECT_DOUBLE_EQ(achieved("2:4", 0.5), 0.5);
  EXPECT_DOUBLE_EQ(achieved("1:8", 0.875), 0.875);
  EXPECT_DOUBLE_EQ(achieved("rmb:4x2", 0.75), 0.75);        // K = 8 of 32 per row block
  EXPECT_DOUBLE_EQ(achieved("rmb:4x2@16x16", 0.75), 0.75);  // K = 2 of 8
  EXPECT_DOUBLE_EQ(achieved("rmb:1x1@1x32", 0.5), 0.5);
  EXPECT_DOUBLE_EQ(achieved("rmb:2x8@2x16", 0.9), 0.5);  // K = round(0.2) -> at least 1 of 2
}

TEST(PruneDense, RejectsBadArguments) {
  const DenseMatrix a = random_dense(4, 4, 1);
  for (const char* s : {"unstructured", "block:2x2", "rmb:2x2"})
    for (const double sp : {-0.1, 1.5, std::nan("")})
      EXPECT_THROW(prune_dense(a, parse_prune_pattern(s), sp), UsageError) << s << " " << sp;
  PrunePattern bad;
  bad.kind = PruneKind::rmb;
  bad.tile_rows = 3;
  bad.tile_cols = 2;
  bad.rmb_rows = 4;
  bad.rmb_cols = 4;
  EXPECT_THROW(prune_dense(a, bad, 0.5), UsageError);
  bad.kind = PruneKind::block;
  bad.tile_rows = 0;
  EXPECT_THROW(prune_dense(a, bad, 0.5), UsageError);
  bad.kind = PruneKind::n_m;
  bad.n = 3;
  bad.m = 2;
  EXPECT_THROW(prune_dense(a, bad, 0.5), UsageError);
}

TEST(PruneDense, EmptyAndDeterministic) {
  for (const char* s : {"unstructured", "block:2x2", "rmb:2x2", "2:4"}) {
    const PrunePattern p = parse_prune_pattern(s);
    const double sp = implied_sparsity(p).value_or(0.5);
    EXPECT_EQ(prune_dense(DenseMatrix(0, 5), p, sp).rows, 0) << s;
    EXPECT_EQ(prune_dense(DenseMatrix(3, 0), p, sp).cols, 0) << s;
    const DenseMatrix a = tie_matrix(19, 23, 3);
    EXPECT_EQ(prune_dense(a, p, sp).data, prune_dense(a, p, sp).data) << s;
  }
}

TEST(PruneStats, CountsAndFractions) {
  const DenseMatrix a = from_rows({{1, -2}, {0, 3}});
  const DenseMatrix k = from_rows({{0, -2}, {0, 3}});
  const PruneStats s = prune_stats(a, k);
  EXPECT_EQ(s.rows, 2);
  EXPECT_EQ(s.cols, 2);
  EXPECT_EQ(s.original_nnz, 3);
  EXPECT_EQ(s.kept_nnz, 2);
  EXPECT_DOUBLE_EQ(s.sparsity, 0.5);
  EXPECT_DOUBLE_EQ(s.magnitude_fraction, 5.0 / 6.0);
  EXPECT_DOUBLE_EQ(s.squared_fraction, 13.0 / 14.0);

  const PruneStats z = prune_stats(DenseMatrix(2, 3), DenseMatrix(2, 3));
  EXPECT_EQ(z.kept_nnz, 0);
  EXPECT_DOUBLE_EQ(z.sparsity, 1.0);
  EXPECT_DOUBLE_EQ(z.magnitude_fraction, 1.0);
  EXPECT_DOUBLE_EQ(z.squared_fraction, 1.0);
  EXPECT_DOUBLE_EQ(prune_stats(DenseMatrix(0, 3), DenseMatrix(0, 3)).sparsity, 0.0);

  EXPECT_THROW(prune_stats(a, DenseMatrix(2, 3)), UsageError);

  // The thesis's example after one pass: 3 blocklets, 12 of 36 entries, strengths 25 + 15 + 20 of 135.
  const DenseMatrix t = thesis_matrix();
  const PruneStats one = prune_stats(t, prune_dense(t, parse_prune_pattern("rmb:2x2@6x6"), 2.0 / 3.0));
  EXPECT_EQ(one.kept_nnz, 12);
  EXPECT_DOUBLE_EQ(one.sparsity, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(one.magnitude_fraction, 60.0 / 135.0);
}

}  // namespace
}  // namespace sparsecc
