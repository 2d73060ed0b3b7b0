// Blocklet decomposition: the thesis's worked 6x6 example, block strengths, exactness of
// A = A_blocks + A_residual, fill threshold and cap, the CBL / CMBL / CRMB layouts, the proposal,
// rejection of bad input and determinism.
#include "sparsecc/inspector/blocklets.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/random.hpp"

namespace sparsecc {
namespace {

using Grid = std::vector<std::vector<double>>;

std::uint64_t bits(double v) { return std::bit_cast<std::uint64_t>(v); }

// The 6x6 residual of thesis Fig. 7.10.
CsrMatrix thesis_matrix() {
  const double v[6][6] = {{3, 7, 8, 9, 2, 8}, {6, 4, 6, 2, 4, 1}, {1, 3, 2, 4, 2, 1},
                          {2, 9, 1, 3, 1, 1}, {3, 2, 6, 4, 3, 2}, {2, 3, 2, 8, 7, 3}};
  DenseMatrix d(6, 6);
  for (int r = 0; r < 6; ++r)
    for (int c = 0; c < 6; ++c) d(r, c) = v[r][c];
  return csr_from_dense(d, DType::f32);
}

// Every block's magnitude strength, zeros included.
Grid strength_grid(const CsrMatrix& a, BlockShape s) {
  const BlockStrengths st = block_strengths(a, s);
  Grid g(static_cast<std::size_t>(st.row_blocks),
         std::vector<double>(static_cast<std::size_t>(st.col_blocks), 0.0));
  for (const BlockStrength& b : st.blocks)
    g[static_cast<std::size_t>(b.row_block)][static_cast<std::size_t>(b.col_block)] = b.magnitude;
  return g;
}

// A rows x cols matrix whose entries are present with probability `density`, plus a few dense
// rectangles so that tiles of every shape and fill appear; values lie on the float32 grid.
CsrMatrix random_matrix(std::int64_t rows, std::int64_t cols, double density, std::uint64_t seed,
                        bool planted = true) {
  SplitMix64 rng(seed);
  DenseMatrix d(rows, cols);
  for (auto& x : d.data)
    if ((rng.next() >> 11) * 0x1p-53 < density) x = rng.uniform_pm1();
  if (planted && rows > 0 && cols > 0)
    for (int p = 0; p < 4; ++p) {
      const auto r0 = static_cast<std::int64_t>(rng.next() % static_cast<std::uint64_t>(rows));
      const auto c0 = static_cast<std::int64_t>(rng.next() % static_cast<std::uint64_t>(cols));
      const auto h = static_cast<std::int64_t>(1 + rng.next() % 24),
                 w = static_cast<std::int64_t>(1 + rng.next() % 24);
      for (std::int64_t r = r0; r < std::min(rows, r0 + h); ++r)
        for (std::int64_t c = c0; c < std::min(cols, c0 + w); ++c) d(r, c) = rng.uniform_pm1();
    }
  return csr_from_dense(d, DType::f32);
}

void expect_same_csr(const CsrMatrix& got, const CsrMatrix& want) {
  EXPECT_EQ(got.rows, want.rows);
  EXPECT_EQ(got.cols, want.cols);
  EXPECT_EQ(got.row_ptr, want.row_ptr);
  EXPECT_EQ(got.col_idx, want.col_idx);
  ASSERT_EQ(got.values.size(), want.values.size());
  for (std::size_t i = 0; i < got.values.size(); ++i)
    EXPECT_EQ(bits(got.values[i]), bits(want.values[i])) << i;
}

// A_blocks alone, as CSR.
CsrMatrix blocks_only(BlockletDecomposition d) {
  d.residual = CsrMatrix{};
  d.residual.rows = d.rows;
  d.residual.cols = d.cols;
  d.residual.row_ptr.assign(static_cast<std::size_t>(d.rows) + 1, 0);
  return recombine_blocklets(d);
}

// Checks A = A_blocks + A_residual bit for bit, independently of recombine_blocklets: every stored entry
// of A lies in exactly one tile (nonzeros only) or in the residual, tiles hold A's values or +0.0, and
// the tiles are aligned, distinct, sorted and at least as full as the threshold.
void expect_exact(const CsrMatrix& a, const BlockletDecomposition& d) {
  const BlockShape s = d.config.shape;
  ASSERT_EQ(d.rows, a.rows);
  ASSERT_EQ(d.cols, a.cols);
  const auto at = [&](std::int64_t r, std::int64_t c) { return static_cast<std::size_t>(r * a.cols + c); };
  std::vector<char> present(static_cast<std::size_t>(a.rows * a.cols), 0);
  std::vector<double> value(present.size(), 0.0);
  std::vector<int> owners(present.size(), 0);
  for (std::int64_t r = 0; r < a.rows; ++r)
    for (std::int64_t i = a.row_ptr[r]; i < a.row_ptr[r + 1]; ++i) {
      present[at(r, a.col_idx[i])] = 1;
      value[at(r, a.col_idx[i])] = a.values[i];
    }
  for (std::size_t t = 0; t < d.tiles.size(); ++t) {
    const BlockletTile& tile = d.tiles[t];
    ASSERT_EQ(tile.row % s.bh, 0);
    ASSERT_EQ(tile.col % s.bw, 0);
    ASSERT_LT(tile.row, a.rows);
    ASSERT_LT(tile.col, a.cols);
    ASSERT_EQ(tile.values.size(), static_cast<std::size_t>(s.bh * s.bw));
    if (t > 0) {
      EXPECT_LT(std::tie(d.tiles[t - 1].row, d.tiles[t - 1].col), std::tie(tile.row, tile.col));
    }
    std::int32_t nnz = 0;
    for (int e = 0; e < s.bh * s.bw; ++e) {
      const std::int64_t r = tile.row + e / s.bw, c = tile.col + e % s.bw;
      const double v = tile.values[static_cast<std::size_t>(e)];
      if (r >= a.rows || c >= a.cols) {
        EXPECT_EQ(bits(v), bits(0.0)) << "padding";
        continue;
      }
      const std::size_t p = at(r, c);
      if (present[p] && value[p] != 0.0) {  // a tile takes every nonzero of its block
        EXPECT_EQ(bits(v), bits(value[p]));
        ++owners[p];
        ++nnz;
      } else {
        EXPECT_EQ(bits(v), bits(0.0)) << "explicit zeros are +0.0";
      }
    }
    EXPECT_EQ(tile.nnz, nnz);
    EXPECT_GE(static_cast<double>(nnz) / (s.bh * s.bw), d.config.fill_threshold);
  }
  const CsrMatrix& res = d.residual;
  ASSERT_NO_THROW(validate(res));
  ASSERT_EQ(res.rows, a.rows);
  ASSERT_EQ(res.cols, a.cols);
  EXPECT_EQ(res.source_dtype, a.source_dtype);
  for (std::int64_t r = 0; r < res.rows; ++r)
    for (std::int64_t i = res.row_ptr[r]; i < res.row_ptr[r + 1]; ++i) {
      const std::size_t p = at(r, res.col_idx[i]);
      ASSERT_TRUE(present[p]);
      EXPECT_EQ(bits(res.values[i]), bits(value[p]));
      ++owners[p];
    }
  for (std::size_t p = 0; p < present.size(); ++p) EXPECT_EQ(owners[p], present[p] ? 1 : 0) << p;
  expect_same_csr(recombine_blocklets(d), a);
  EXPECT_EQ(d.nnz_covered() + res.nnz(), a.nnz());
}

// The thesis's separate_blocklet (Alg. 20), literally, on a dense residual: one block per row block at
// the first maximum of sum(|res|); the block is moved out of `res`. Returns the CBL.
CblMatrix separate_blocklet(DenseMatrix& res, BlockShape s) {
  const std::int64_t nrb = res.rows / s.bh, ncb = res.cols / s.bw;
  CblMatrix bl{s, res.rows, res.cols, std::vector<double>(static_cast<std::size_t>(res.rows * s.bw), 0.0),
               std::vector<std::int32_t>(static_cast<std::size_t>(nrb), 0)};
  for (std::int64_t rb = 0; rb < nrb; ++rb) {
    std::int64_t best = 0;
    double best_strength = -1.0;
    for (std::int64_t cb = 0; cb < ncb; ++cb) {
      double strength = 0.0;
      for (int i = 0; i < s.bh; ++i)
        for (int j = 0; j < s.bw; ++j) strength += std::fabs(res(rb * s.bh + i, cb * s.bw + j));
      if (strength > best_strength) {
        best = cb;
        best_strength = strength;
      }
    }
    bl.indices[static_cast<std::size_t>(rb)] = static_cast<std::int32_t>(best);
    for (int i = 0; i < s.bh; ++i)
      for (int j = 0; j < s.bw; ++j) {
        double& x = res(rb * s.bh + i, best * s.bw + j);
        bl.values[static_cast<std::size_t>((rb * s.bh + i) * s.bw + j)] = x;
        x = 0.0;
      }
  }
  return bl;
}

BlockletConfig config(BlockShape s, double fill, std::int64_t cap = kUnlimitedBlocks,
                      std::string precision = "f16") {
  return {s, fill, cap, std::move(precision)};
}

// ---- the thesis's worked example (Fig. 7.10 and its continuation) ----

TEST(BlockletThesisExample, StrengthsOfTheSixBySixResidual) {
  const BlockStrengths st = block_strengths(thesis_matrix(), {2, 2});
  EXPECT_EQ(st.row_blocks, 3);
  EXPECT_EQ(st.col_blocks, 3);
  ASSERT_EQ(st.blocks.size(), 9u);
  for (const BlockStrength& b : st.blocks) {
    EXPECT_EQ(b.nnz, 4);
    EXPECT_EQ(b.fill, 1.0);
  }
  EXPECT_EQ(strength_grid(thesis_matrix(), {2, 2}), (Grid{{20, 25, 15}, {15, 10, 5}, {10, 20, 15}}));
}

TEST(BlockletThesisExample, ThreeGreedyPassesReproduceTheNotes) {
  const CsrMatrix a = thesis_matrix();
  // Pass 1: the blocklet of Fig. 7.10 (cap 3 = one block per row block).
  const BlockletDecomposition d1 = decompose_blocklets(a, config({2, 2}, 1.0, 3));
  expect_exact(a, d1);
  ASSERT_EQ(d1.tiles.size(), 3u);
  EXPECT_EQ(d1.tiles[0], (BlockletTile{0, 2, 0, 4, {8, 9, 6, 2}}));
  EXPECT_EQ(d1.tiles[1], (BlockletTile{2, 0, 0, 4, {1, 3, 2, 9}}));
  EXPECT_EQ(d1.tiles[2], (BlockletTile{4, 2, 0, 4, {6, 4, 2, 8}}));
  const CmblMatrix m1 = cmbl_from_blocklets(d1);
  ASSERT_EQ(m1.bl_matrices.size(), 1u);
  const CblMatrix& bl1 = m1.bl_matrices[0];
  EXPECT_EQ(bl1.indices, (std::vector<std::int32_t>{1, 0, 1}));
  EXPECT_EQ(bl1.values, (std::vector<double>{8, 9, 6, 2, 1, 3, 2, 9, 6, 4, 2, 8}));
  std::vector<double> column0;
  for (std::size_t r = 0; r < 6; ++r) column0.push_back(bl1.values[r * 2]);
  EXPECT_EQ(column0, (std::vector<double>{8, 6, 1, 2, 6, 2}));
  EXPECT_EQ(strength_grid(d1.residual, {2, 2}), (Grid{{20, 0, 15}, {0, 10, 5}, {10, 0, 15}}));

  // Pass 2.
  const BlockletDecomposition d2 = decompose_blocklets(a, config({2, 2}, 1.0, 6));
  expect_exact(a, d2);
  const CmblMatrix m2 = cmbl_from_blocklets(d2);
  ASSERT_EQ(m2.bl_matrices.size(), 2u);
  EXPECT_EQ(m2.bl_matrices[0], bl1);
  EXPECT_EQ(m2.bl_matrices[1].indices, (std::vector<std::int32_t>{0, 1, 2}));
  EXPECT_EQ(m2.bl_matrices[1].values, (std::vector<double>{3, 7, 6, 4, 2, 4, 1, 3, 3, 2, 7, 3}));
  EXPECT_EQ(strength_grid(d2.residual, {2, 2}), (Grid{{0, 0, 15}, {0, 0, 5}, {10, 0, 0}}));

  // Pass 3 exhausts the matrix: a dense 6x6 block is three (2,2) blocklets.
  const BlockletDecomposition d3 = decompose_blocklets(a, config({2, 2}, 1.0));
  expect_exact(a, d3);
  EXPECT_EQ(d3.tiles.size(), 9u);
  EXPECT_EQ(d3.passes(), 3);
  EXPECT_EQ(d3.residual.nnz(), 0);
  const CmblMatrix m3 = cmbl_from_blocklets(d3);
  ASSERT_EQ(m3.bl_matrices.size(), 3u);
  EXPECT_EQ(m3.bl_matrices[0], m2.bl_matrices[0]);
  EXPECT_EQ(m3.bl_matrices[1], m2.bl_matrices[1]);
  EXPECT_EQ(m3.bl_matrices[2].indices, (std::vector<std::int32_t>{2, 2, 0}));
  EXPECT_EQ(m3.bl_matrices[2].values, (std::vector<double>{2, 8, 4, 1, 2, 1, 1, 1, 3, 2, 2, 3}));

  // The literal Alg. 20, applied three times to the dense residual, gives the same three blocklets.
  DenseMatrix res = dense_from_csr(a);
  for (std::size_t k = 0; k < 3; ++k) EXPECT_EQ(separate_blocklet(res, {2, 2}), m3.bl_matrices[k]) << k;
  EXPECT_EQ(res.data, std::vector<double>(36, 0.0));
}

TEST(BlockletThesisExample, CblColumnsConcatenateBlockColumnsInRowBlockOrder) {
  // Fig. 7.4's second blocklet: column 0 of its three blocks is [2,6], [4,8], [6,2].
  DenseMatrix d(6, 4);
  const std::int64_t cb[3] = {1, 0, 1};
  const double col0[3][2] = {{2, 6}, {4, 8}, {6, 2}};
  for (int rb = 0; rb < 3; ++rb)
    for (int i = 0; i < 2; ++i) {
      d(rb * 2 + i, cb[rb] * 2) = col0[rb][i];
      d(rb * 2 + i, cb[rb] * 2 + 1) = 10 + rb * 2 + i;
    }
  const CsrMatrix a = csr_from_dense(d);
  const CmblMatrix m = cmbl_from_blocklets(decompose_blocklets(a, config({2, 2}, 1.0)));
  ASSERT_EQ(m.bl_matrices.size(), 1u);
  std::vector<double> column0;
  for (std::size_t r = 0; r < 6; ++r) column0.push_back(m.bl_matrices[0].values[r * 2]);
  EXPECT_EQ(column0, (std::vector<double>{2, 6, 4, 8, 6, 2}));
  EXPECT_EQ(m.bl_matrices[0].indices, (std::vector<std::int32_t>{1, 0, 1}));
  expect_same_csr(csr_from_cbl(m.bl_matrices[0]), a);
}

TEST(BlockletThesisExample, MatchesLiteralGreedyOnDenseMatrices) {
  // Without zeros every block qualifies, so the lossless greedy is the thesis's greedy.
  for (const BlockShape s :
       {BlockShape{2, 2}, BlockShape{4, 2}, BlockShape{2, 4}, BlockShape{8, 8}, BlockShape{16, 8}}) {
    SplitMix64 rng(static_cast<std::uint64_t>(s.bh * 100 + s.bw));
    DenseMatrix d(32, 32);
    for (auto& x : d.data) x = rng.uniform_pm1() + 2.0;  // never zero
    const CsrMatrix a = csr_from_dense(d);
    const CmblMatrix m = cmbl_from_blocklets(decompose_blocklets(a, config(s, 1.0)));
    ASSERT_EQ(m.bl_matrices.size(), static_cast<std::size_t>(32 / s.bw));
    for (const CblMatrix& bl : m.bl_matrices) EXPECT_EQ(separate_blocklet(d, s), bl) << block_shape_name(s);
  }
}

// ---- exactness, threshold, cap ----

TEST(BlockletDecompose, ExactOnRandomMatricesForEveryShape) {
  struct Case {
    std::int64_t rows, cols;
    double density;
  };
  const Case cases[] = {{0, 0, 0.5},    {0, 7, 0.5},    {5, 0, 0.5},    {1, 1, 1.0},
                        {16, 8, 0.3},   {37, 53, 0.1},  {64, 64, 0.02}, {64, 64, 0.3},
                        {100, 33, 0.7}, {33, 100, 1.0}, {130, 70, 0.05}};
  std::vector<BlockShape> shapes = blocklet_candidate_shapes();
  shapes.push_back({3, 5});
  shapes.push_back({1, 1});
  std::uint64_t seed = 1;
  for (const Case& c : cases)
    for (const BlockShape s : shapes)
      for (const double fill : {0.01, 0.25, 0.5, 1.0}) {
        SCOPED_TRACE(::testing::Message() << c.rows << "x" << c.cols << " density " << c.density << " shape "
                                          << block_shape_name(s) << " fill " << fill);
        const CsrMatrix a = random_matrix(c.rows, c.cols, c.density, seed++);
        const BlockletDecomposition d = decompose_blocklets(a, config(s, fill));
        expect_exact(a, d);
        // Uncapped, the tiles are exactly the blocks at or above the threshold.
        std::set<std::pair<std::int64_t, std::int64_t>> want, got;
        for (const BlockStrength& b : block_strengths(a, s).blocks)
          if (b.fill >= fill) want.insert({b.row_block * s.bh, b.col_block * s.bw});
        for (const BlockletTile& t : d.tiles) got.insert({t.row, t.col});
        EXPECT_EQ(got, want);
      }
}

TEST(BlockletDecompose, PassesRankBlocksByStrengthWithinARowBlock) {
  const CsrMatrix a = random_matrix(64, 96, 0.4, 11);
  for (const BlockShape s : blocklet_candidate_shapes()) {
    const BlockletDecomposition d = decompose_blocklets(a, config(s, 0.2));
    std::map<std::int64_t, std::vector<const BlockletTile*>> by_row;
    for (const BlockletTile& t : d.tiles) by_row[t.row].push_back(&t);
    for (auto& [row, tiles] : by_row) {
      std::sort(tiles.begin(), tiles.end(), [](auto* x, auto* y) { return x->pass < y->pass; });
      for (std::size_t k = 0; k < tiles.size(); ++k) {
        EXPECT_EQ(tiles[k]->pass, static_cast<std::int32_t>(k));  // passes 0..n-1 without a cap
        if (k == 0) continue;
        double prev = 0, cur = 0;
        for (double v : tiles[k - 1]->values) prev += std::fabs(v);
        for (double v : tiles[k]->values) cur += std::fabs(v);
        EXPECT_GE(prev, cur);
      }
    }
  }
}

TEST(BlockletDecompose, TiesTakeTheFirstMaximumAndNanRanksLast) {
  DenseMatrix d(2, 6, 1.0);
  CsrMatrix a = csr_from_dense(d);
  BlockletDecomposition got = decompose_blocklets(a, config({2, 2}, 1.0, 1));
  ASSERT_EQ(got.tiles.size(), 1u);
  EXPECT_EQ(got.tiles[0].col, 0);
  a.values[0] = std::numeric_limits<double>::quiet_NaN();  // block 0 now has a NaN strength
  got = decompose_blocklets(a, config({2, 2}, 1.0, 1));
  ASSERT_EQ(got.tiles.size(), 1u);
  EXPECT_EQ(got.tiles[0].col, 2);
  got = decompose_blocklets(a, config({2, 2}, 1.0));
  expect_exact(a, got);
  EXPECT_EQ(got.tiles[0].pass, 2);
  a.values[1] = std::numeric_limits<double>::infinity();
  expect_exact(a, decompose_blocklets(a, config({2, 2}, 0.5)));
}

TEST(BlockletDecompose, StoredZerosStayInTheResidual) {
  DenseMatrix d(4, 4, 1.5);
  CsrMatrix a = csr_from_dense(d, DType::bf16);
  a.values[1] = 0.0;   // (0, 1)
  a.values[6] = -0.0;  // (1, 2)
  const BlockletDecomposition got = decompose_blocklets(a, config({2, 2}, 0.5, kUnlimitedBlocks, "bf16"));
  expect_exact(a, got);
  EXPECT_EQ(got.tiles.size(), 4u);
  EXPECT_EQ(got.residual.nnz(), 2);
  EXPECT_EQ(got.residual.source_dtype, DType::bf16);
  EXPECT_EQ(bits(got.residual.values[1]), bits(-0.0));
  EXPECT_EQ(got.explicit_zeros(), 2);
}

TEST(BlockletDecompose, FillThresholdIsRespected) {
  // One 4x4 block with 16, 12, 8 and 4 nonzeros each.
  DenseMatrix d(4, 16);
  for (int cb = 0; cb < 4; ++cb)
    for (int e = 0; e < 16 - 4 * cb; ++e) d(e / 4, cb * 4 + e % 4) = 1 + e;
  const CsrMatrix a = csr_from_dense(d);
  const auto cols = [&](double fill) {
    std::vector<std::int64_t> c;
    for (const BlockletTile& t : decompose_blocklets(a, config({4, 4}, fill)).tiles) c.push_back(t.col);
    return c;
  };
  EXPECT_EQ(cols(1.0), (std::vector<std::int64_t>{0}));
  EXPECT_EQ(cols(0.75), (std::vector<std::int64_t>{0, 4}));
  EXPECT_EQ(cols(0.7), (std::vector<std::int64_t>{0, 4}));
  EXPECT_EQ(cols(0.5), (std::vector<std::int64_t>{0, 4, 8}));
  EXPECT_EQ(cols(0.25), (std::vector<std::int64_t>{0, 4, 8, 12}));
  EXPECT_EQ(cols(0.01), (std::vector<std::int64_t>{0, 4, 8, 12}));
}

TEST(BlockletDecompose, CapKeepsWholePassesThenTheStrongestBlocks) {
  const CsrMatrix a = random_matrix(96, 80, 0.35, 5);
  for (const BlockShape s : blocklet_candidate_shapes()) {
    const BlockletDecomposition full = decompose_blocklets(a, config(s, 0.25));
    const auto total = static_cast<std::int64_t>(full.tiles.size());
    ASSERT_GT(total, 4) << block_shape_name(s);
    for (const std::int64_t cap :
         {std::int64_t{0}, std::int64_t{1}, std::int64_t{5}, total / 2, total - 1, total, total + 3}) {
      SCOPED_TRACE(::testing::Message() << block_shape_name(s) << " cap " << cap);
      const BlockletDecomposition d = decompose_blocklets(a, config(s, 0.25, cap));
      expect_exact(a, d);
      EXPECT_EQ(static_cast<std::int64_t>(d.tiles.size()), std::min(cap, total));
      // The capped tiles are the uncapped ones of the earlier passes and part of the last pass, whose
      // dropped blocks are no stronger than the kept ones.
      const std::int32_t last = d.passes() - 1;
      double weakest_kept = std::numeric_limits<double>::infinity(), strongest_dropped = 0.0;
      std::set<std::pair<std::int64_t, std::int64_t>> kept;
      for (const BlockletTile& t : d.tiles) kept.insert({t.row, t.col});
      for (const BlockletTile& t : full.tiles) {
        double strength = 0;
        for (double v : t.values) strength += std::fabs(v);
        const bool in = kept.count({t.row, t.col}) > 0;
        if (t.pass < last) {
          EXPECT_TRUE(in);
        }
        if (t.pass > last) {
          EXPECT_FALSE(in);
        }
        if (t.pass == last && in) weakest_kept = std::min(weakest_kept, strength);
        if (t.pass == last && !in) strongest_dropped = std::max(strongest_dropped, strength);
      }
      for (const BlockletTile& t : d.tiles)
        EXPECT_TRUE(std::find(full.tiles.begin(), full.tiles.end(), t) != full.tiles.end());
      if (last >= 0) {
        EXPECT_GE(weakest_kept, strongest_dropped);
      }
    }
  }
}

TEST(BlockletDecompose, PartialEdgeBlocksArePadded) {
  DenseMatrix d(5, 5, 2.0);
  const CsrMatrix a = csr_from_dense(d);
  const BlockletDecomposition got = decompose_blocklets(a, config({4, 4}, 0.05));
  expect_exact(a, got);
  ASSERT_EQ(got.tiles.size(), 4u);
  EXPECT_EQ(got.tiles[3].row, 4);
  EXPECT_EQ(got.tiles[3].col, 4);
  EXPECT_EQ(got.tiles[3].nnz, 1);
  EXPECT_EQ(got.explicit_zeros(), 4 * 16 - 25);
  EXPECT_EQ(decompose_blocklets(a, config({4, 4}, 0.5)).tiles.size(), 1u);  // edge blocks are <= 8/16 full
}

TEST(BlockletDecompose, Deterministic) {
  const CsrMatrix a = random_matrix(77, 91, 0.2, 99);
  for (const BlockShape s : blocklet_candidate_shapes()) {
    const BlockletDecomposition x = decompose_blocklets(a, config(s, 0.3, 17));
    const BlockletDecomposition y = decompose_blocklets(a, config(s, 0.3, 17));
    EXPECT_EQ(x.tiles, y.tiles);
    expect_same_csr(x.residual, y.residual);
    EXPECT_EQ(to_json(x).dump(), to_json(y).dump());
  }
  std::vector<BlockletCandidate> c1, c2;
  EXPECT_EQ(propose_blocklets(a, {}, &c1), propose_blocklets(a, {}, &c2));
  ASSERT_EQ(c1.size(), c2.size());
  for (std::size_t i = 0; i < c1.size(); ++i) EXPECT_EQ(c1[i].estimated_cost, c2[i].estimated_cost);
}

// ---- bad input ----

TEST(BlockletDecompose, RejectsBadConfigs) {
  const CsrMatrix a = thesis_matrix();
  const auto expect_rejected = [&](const BlockletConfig& cfg, const std::string& needle) {
    try {
      decompose_blocklets(a, cfg);
      ADD_FAILURE() << "no error, expected one mentioning " << needle;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_rejected(config({0, 8}, 0.5), "0x8");
  expect_rejected(config({16, 0}, 0.5), "16x0");
  expect_rejected(config({0, 0}, 0.5), "side");
  expect_rejected(config({-4, 4}, 0.5), "side");
  expect_rejected(config({257, 1}, 0.5), "side");
  expect_rejected(config({2, 2}, 0.0), "fill threshold");
  expect_rejected(config({2, 2}, -0.5), "fill threshold");
  expect_rejected(config({2, 2}, 1.0000001), "fill threshold");
  expect_rejected(config({2, 2}, std::numeric_limits<double>::quiet_NaN()), "fill threshold");
  expect_rejected(config({2, 2}, 0.5, -1), "cap");
  expect_rejected(config({2, 2}, 0.5, 10, "f64"), "precision");
  expect_rejected(config({2, 2}, 0.5, 10, ""), "precision");
  EXPECT_NO_THROW(decompose_blocklets(a, config({256, 256}, 1.0, 0, "bf16")));
  EXPECT_THROW(block_strengths(a, {0, 1}), UsageError);
  CsrMatrix broken = a;
  broken.col_idx[0] = 99;
  EXPECT_THROW(decompose_blocklets(broken, config({2, 2}, 0.5)), UsageError);
  EXPECT_THROW(propose_blocklets(a, {"int8"}), UsageError);
}

TEST(BlockletDecompose, RecombineRejectsInconsistentTiles) {
  const CsrMatrix a = thesis_matrix();
  const BlockletDecomposition good = decompose_blocklets(a, config({2, 2}, 1.0, 3));
  BlockletDecomposition d = good;
  d.tiles[0].col = 1;  // off the grid
  EXPECT_THROW(recombine_blocklets(d), UsageError);
  d = good;
  d.tiles[1].row = 0;
  d.tiles[1].col = 2;  // same position as tile 0
  EXPECT_THROW(recombine_blocklets(d), UsageError);
  d = good;
  d.tiles[0].values.pop_back();
  EXPECT_THROW(recombine_blocklets(d), UsageError);
  d = good;
  d.tiles[0].col = 0;  // overlaps the residual's nonzeros
  EXPECT_THROW(recombine_blocklets(d), UsageError);
  d = good;
  d.residual.cols = 5;
  EXPECT_THROW(recombine_blocklets(d), UsageError);
}

// ---- layouts ----

TEST(BlockletLayouts, CmblAndCrmbRoundTrips) {
  std::uint64_t seed = 300;
  for (const auto& [rows, cols] :
       {std::pair<std::int64_t, std::int64_t>{64, 64}, {50, 37}, {17, 130}, {0, 9}}) {
    const CsrMatrix a = random_matrix(rows, cols, 0.3, seed++);
    std::vector<BlockShape> shapes = blocklet_candidate_shapes();
    shapes.push_back({3, 5});
    for (const BlockShape s : shapes) {
      SCOPED_TRACE(::testing::Message() << rows << "x" << cols << " shape " << block_shape_name(s));
      const BlockletDecomposition d = decompose_blocklets(a, config(s, 0.3, 40, "bf16"));
      const CsrMatrix blocks = blocks_only(d);

      const CmblMatrix cmbl = cmbl_from_blocklets(d);
      ASSERT_NO_THROW(validate(cmbl));
      EXPECT_EQ(static_cast<std::int32_t>(cmbl.bl_matrices.size()), d.passes());
      expect_same_csr(csr_from_cmbl(cmbl, DType::f32), blocks);
      const BlockletDecomposition from_cmbl = blocklets_from_cmbl(cmbl, "bf16");
      EXPECT_EQ(from_cmbl.tiles, d.tiles);  // positions, passes and value bits
      if (!d.tiles.empty()) {
        EXPECT_EQ(from_cmbl.config.shape, s);
      }
      EXPECT_EQ(from_cmbl.config.precision, "bf16");
      EXPECT_EQ(from_cmbl.residual.nnz(), 0);
      EXPECT_EQ(cmbl_from_blocklets(from_cmbl), cmbl);
      for (const BlockletTile& t : from_cmbl.tiles)
        EXPECT_GE(static_cast<double>(t.nnz) / (s.bh * s.bw), from_cmbl.config.fill_threshold);

      for (const BlockShape rmb : {s, BlockShape{2 * s.bh, 3 * s.bw}, BlockShape{4 * s.bh, s.bw}}) {
        SCOPED_TRACE(::testing::Message() << "RMB block " << block_shape_name(rmb));
        const CrmbMatrix crmb = crmb_from_blocklets(d, rmb);
        ASSERT_NO_THROW(validate(crmb));
        expect_same_csr(csr_from_crmb(crmb, DType::f32), blocks);
        const BlockletDecomposition back = blocklets_from_crmb(crmb, "bf16");
        ASSERT_EQ(back.tiles.size(), d.tiles.size());
        for (std::size_t i = 0; i < d.tiles.size(); ++i) {
          EXPECT_EQ(back.tiles[i].row, d.tiles[i].row);
          EXPECT_EQ(back.tiles[i].col, d.tiles[i].col);
          EXPECT_EQ(back.tiles[i].nnz, d.tiles[i].nnz);
          EXPECT_EQ(back.tiles[i].values, d.tiles[i].values);
        }
        EXPECT_EQ(crmb_from_blocklets(back, rmb), crmb);
        // The residual travels beside the layout: together they give A back.
        BlockletDecomposition whole = back;
        whole.residual = d.residual;
        expect_same_csr(recombine_blocklets(whole), a);
      }
    }
  }
}

TEST(BlockletLayouts, CrmbStructure) {
  // 6x6 example, (2,2) blocklets inside 4x4 RMB blocks: 2 x 2 RMB blocks, the bottom and right ones
  // partial (rows 4..5 and columns 4..5 of 8 exist).
  const BlockletDecomposition d = decompose_blocklets(thesis_matrix(), config({2, 2}, 1.0));
  const CrmbMatrix m = crmb_from_blocklets(d, {4, 4});
  EXPECT_EQ(m.row_block_ptr, (std::vector<std::int64_t>{0, 2, 4}));
  EXPECT_EQ(m.indices, (std::vector<std::int32_t>{0, 1, 0, 1}));
  ASSERT_EQ(m.mbl_matrices.size(), 4u);
  // Block (0,0): rows 0..3, columns 0..3. Row block 0 has tiles at column blocks 1 (pass 0) and 0
  // (pass 1); row block 1 has 0 (pass 0) and 1 (pass 1): two blocklets.
  const CmblMatrix& b00 = m.mbl_matrices[0];
  ASSERT_EQ(b00.bl_matrices.size(), 2u);
  EXPECT_EQ(b00.bl_matrices[0].indices, (std::vector<std::int32_t>{1, 0}));
  EXPECT_EQ(b00.bl_matrices[1].indices, (std::vector<std::int32_t>{0, 1}));
  EXPECT_EQ(b00.bl_matrices[0].values, (std::vector<double>{8, 9, 6, 2, 1, 3, 2, 9}));
  // Block (1,1): rows 4..7, columns 4..7 of a 6x6 matrix: one tile (rows 4..5, columns 4..5), and
  // local row block 1 is padding, stored as a zero block at column block 0.
  const CmblMatrix& b11 = m.mbl_matrices[3];
  ASSERT_EQ(b11.bl_matrices.size(), 1u);
  EXPECT_EQ(b11.bl_matrices[0].indices, (std::vector<std::int32_t>{0, 0}));
  EXPECT_EQ(b11.bl_matrices[0].values, (std::vector<double>{3, 2, 7, 3, 0, 0, 0, 0}));
}

// A CRMB produced by the thesis's (lossy) RMB pruning with mixed blocklet types, as RMB-trained
// weights would arrive.
CrmbMatrix thesis_rmb(const DenseMatrix& w, BlockShape block, const std::vector<BlockShape>& types,
                      DenseMatrix& kept) {
  CrmbMatrix m;
  m.block = block;
  m.rows = w.rows;
  m.cols = w.cols;
  m.row_block_ptr = {0};
  kept = DenseMatrix(w.rows, w.cols);
  for (std::int64_t rb = 0; rb < w.rows / block.bh; ++rb) {
    for (std::int64_t cb = 0; cb < w.cols / block.bw; ++cb) {
      DenseMatrix res(block.bh, block.bw);
      for (int i = 0; i < block.bh; ++i)
        for (int j = 0; j < block.bw; ++j) res(i, j) = w(rb * block.bh + i, cb * block.bw + j);
      CmblMatrix mbl{block.bh, block.bw, {}};
      for (const BlockShape t : types) mbl.bl_matrices.push_back(separate_blocklet(res, t));
      for (int i = 0; i < block.bh; ++i)
        for (int j = 0; j < block.bw; ++j)
          kept(rb * block.bh + i, cb * block.bw + j) = w(rb * block.bh + i, cb * block.bw + j) - res(i, j);
      m.mbl_matrices.push_back(std::move(mbl));
      m.indices.push_back(static_cast<std::int32_t>(cb));
    }
    m.row_block_ptr.push_back(static_cast<std::int64_t>(m.mbl_matrices.size()));
  }
  return m;
}

TEST(BlockletLayouts, ImportsThesisRmbMatrices) {
  SplitMix64 rng(8);
  DenseMatrix w(32, 32);
  for (auto& x : w.data) x = rng.uniform_pm1() + 2.0;
  DenseMatrix kept;
  // Mixed types (notes section 4: block 8x8, blocklets (4,2), (2,1), (1,1); density 4/8).
  const CrmbMatrix mixed = thesis_rmb(w, {8, 8}, {{4, 2}, {2, 1}, {1, 1}}, kept);
  ASSERT_NO_THROW(validate(mixed));
  const CsrMatrix a = csr_from_crmb(mixed, DType::f16);
  EXPECT_EQ(a.source_dtype, DType::f16);
  EXPECT_EQ(a.nnz(), 32 * 32 / 2);
  expect_same_csr(a, csr_from_dense(kept, DType::f16));
  EXPECT_THROW(blocklets_from_crmb(mixed), UsageError);
  // Homogeneous types import directly; the RMB matrix is then covered without a residual.
  const CrmbMatrix homo = thesis_rmb(w, {16, 8}, {{4, 2}, {4, 2}}, kept);
  const BlockletDecomposition d = blocklets_from_crmb(homo);
  EXPECT_EQ(d.config.shape, (BlockShape{4, 2}));
  EXPECT_EQ(d.config.fill_threshold, 1.0);
  EXPECT_EQ(d.tiles.size(), 32u / 4 * 2 * 32 / 8);
  expect_same_csr(recombine_blocklets(d), csr_from_dense(kept, DType::f16));
  expect_exact(csr_from_dense(kept, DType::f16), d);
  // An empty layout.
  const BlockletDecomposition empty = blocklets_from_cmbl(CmblMatrix{4, 4, {}});
  EXPECT_TRUE(empty.tiles.empty());
  EXPECT_EQ(empty.config.shape, (BlockShape{1, 1}));
}

TEST(BlockletLayouts, MergesBlocksOnOnePositionAndAcceptsZeroOverlaps) {
  // Two (2,2) blocklets over a 2x4 matrix: the second picks the same block with the other nonzeros
  // (a tie on an exhausted residual), and a third is all zero on top of the first.
  CmblMatrix m{2, 4, {}};
  m.bl_matrices.push_back({{2, 2}, 2, 4, {1, 0, 0, 2}, {1}});
  m.bl_matrices.push_back({{2, 2}, 2, 4, {0, 3, 4, 0}, {1}});
  m.bl_matrices.push_back({{2, 2}, 2, 4, {0, 0, 0, -0.0}, {1}});
  ASSERT_NO_THROW(validate(m));
  const BlockletDecomposition d = blocklets_from_cmbl(m, "f32");
  ASSERT_EQ(d.tiles.size(), 1u);
  EXPECT_EQ(d.tiles[0], (BlockletTile{0, 2, 0, 4, {1, 3, 4, 2}}));
  EXPECT_EQ(d.residual.source_dtype, DType::f32);
}

TEST(BlockletLayouts, RejectsMalformedLayouts) {
  const CblMatrix good{{2, 2}, 4, 5, std::vector<double>(8, 1.0), {0, 1}};
  ASSERT_NO_THROW(validate(good));
  CblMatrix bl = good;
  bl.indices = {0};
  EXPECT_THROW(validate(bl), UsageError);
  bl = good;
  bl.indices = {0, 3};  // 3 column blocks: 0..2
  EXPECT_THROW(validate(bl), UsageError);
  bl = good;
  bl.values.pop_back();
  EXPECT_THROW(validate(bl), UsageError);
  bl = good;
  bl.indices = {2, 0};  // column block 2 covers columns 4..5 of a 5-column matrix: padding is nonzero
  EXPECT_THROW(validate(bl), UsageError);
  bl.values = {1, 0, 1, 0, 1, 1, 1, 1};
  EXPECT_NO_THROW(validate(bl));
  bl = good;
  bl.type = {0, 2};
  EXPECT_THROW(validate(bl), UsageError);

  CmblMatrix m{4, 5, {good, good}};
  EXPECT_THROW(validate(m), UsageError);  // the same nonzeros twice
  m.bl_matrices[1].rows = 6;
  EXPECT_THROW(validate(m), UsageError);

  const BlockletDecomposition d = decompose_blocklets(thesis_matrix(), config({2, 2}, 1.0));
  EXPECT_THROW(crmb_from_blocklets(d, {3, 4}), UsageError);
  EXPECT_THROW(crmb_from_blocklets(d, {4, 0}), UsageError);
  const CrmbMatrix crmb = crmb_from_blocklets(d, {4, 4});
  CrmbMatrix c = crmb;
  c.row_block_ptr = {0, 2, 3};
  EXPECT_THROW(validate(c), UsageError);
  c = crmb;
  c.row_block_ptr.pop_back();
  EXPECT_THROW(validate(c), UsageError);
  c = crmb;
  std::swap(c.indices[0], c.indices[1]);
  EXPECT_THROW(validate(c), UsageError);
  c = crmb;
  c.indices[1] = 2;
  EXPECT_THROW(validate(c), UsageError);
  c = crmb;
  c.mbl_matrices[0].rows = 2;
  EXPECT_THROW(validate(c), UsageError);
  c = crmb;
  c.mbl_matrices[3].bl_matrices[0].values[5] = 1.0;  // a nonzero in the padding rows 6..7
  EXPECT_THROW(validate(c), UsageError);
  EXPECT_THROW(csr_from_crmb(c), UsageError);
  EXPECT_THROW(blocklets_from_crmb(crmb, "fp16"), UsageError);
  c = crmb;
  c.block = {4, 3};
  EXPECT_THROW(validate(c), UsageError);
}

// ---- proposal and summary ----

TEST(BlockletPropose, PicksTensorCoreTilesForPlantedDenseBlocks) {
  // Aligned dense 16x16 blocks on a sparse background.
  SplitMix64 rng(21);
  DenseMatrix d(128, 128);
  for (auto& x : d.data)
    if ((rng.next() >> 11) * 0x1p-53 < 0.02) x = rng.uniform_pm1();
  for (const auto& [r0, c0] : {std::pair{0, 32}, {16, 0}, {48, 96}, {96, 112}, {112, 16}})
    for (int r = 0; r < 16; ++r)
      for (int c = 0; c < 16; ++c) d(r0 + r, c0 + c) = 0.5 + r + c;
  const CsrMatrix a = csr_from_dense(d, DType::f16);
  std::vector<BlockletCandidate> candidates;
  const BlockletConfig cfg = propose_blocklets(a, {}, &candidates);
  EXPECT_EQ(cfg.shape, (BlockShape{16, 16}));
  EXPECT_EQ(cfg.precision, "f16");
  EXPECT_EQ(cfg.max_blocks, kUnlimitedBlocks);
  ASSERT_EQ(candidates.size(), 5u);
  EXPECT_TRUE(candidates[1].tensor_cores);
  EXPECT_FALSE(candidates[3].tensor_cores);
  EXPECT_EQ(cfg.fill_threshold, candidates[1].fill_threshold);
  EXPECT_EQ(candidates[1].blocks, 5);
  for (const BlockletCandidate& c : candidates) EXPECT_LE(candidates[1].estimated_cost, c.estimated_cost);
  // The estimate's blocks are the decomposition's.
  const BlockletDecomposition dec = decompose_blocklets(a, cfg);
  EXPECT_EQ(static_cast<std::int64_t>(dec.tiles.size()), candidates[1].blocks);
  EXPECT_EQ(dec.nnz_covered(), candidates[1].nnz_covered);
  expect_exact(a, dec);
  // The same matrix declared f32 has no exact tensor-core path; the option overrides the dtype.
  EXPECT_EQ(propose_blocklets(a, {"bf16"}).precision, "bf16");
  std::vector<BlockletCandidate> f32;
  propose_blocklets(a, {"f32"}, &f32);
  for (const BlockletCandidate& c : f32) EXPECT_FALSE(c.tensor_cores);
}

TEST(BlockletPropose, TurnsBlockletsOffForUnstructuredSparsity) {
  for (const DType t : {DType::f16, DType::f32}) {
    CsrMatrix a = random_matrix(256, 256, 0.1, 4, false);
    a.source_dtype = t;
    std::vector<BlockletCandidate> candidates;
    const BlockletConfig cfg = propose_blocklets(a, {}, &candidates);
    EXPECT_EQ(cfg.max_blocks, 0);
    EXPECT_EQ(cfg.shape, (BlockShape{16, 8}));
    EXPECT_NO_THROW(validate_blocklet_config(cfg));
    EXPECT_EQ(decompose_blocklets(a, cfg).tiles.size(), 0u);
    for (const BlockletCandidate& c : candidates)
      EXPECT_EQ(c.estimated_cost, 0.5 * (t == DType::f32 ? 2 : 1) * a.nnz());
  }
  EXPECT_EQ(propose_blocklets(CsrMatrix{}).max_blocks, 0);
}

TEST(BlockletPropose, MarginalSavingsLeaveBlockletsOff) {
  // One dense 16x16 block in a 10 % random 256x256 matrix saves under 5 % of the estimate; eight do not.
  CsrMatrix sparse = random_matrix(256, 256, 0.1, 4, false);
  DenseMatrix d = dense_from_csr(sparse);
  const auto plant = [&](int blocks) {
    for (int b = 0; b < blocks; ++b)
      for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c) d(32 * b + r, 16 * b + c) = 1.0 + r;
    return csr_from_dense(d, DType::f16);
  };
  std::vector<BlockletCandidate> candidates;
  const CsrMatrix one = plant(1);
  EXPECT_EQ(propose_blocklets(one, {}, &candidates).max_blocks, 0);
  EXPECT_EQ(candidates[1].blocks, 1);
  EXPECT_LT(candidates[1].estimated_cost, 0.5 * static_cast<double>(one.nnz()));
  const BlockletConfig eight = propose_blocklets(plant(8), {}, &candidates);
  EXPECT_EQ(eight.max_blocks, kUnlimitedBlocks);
  EXPECT_EQ(eight.shape, (BlockShape{16, 16}));
  EXPECT_EQ(candidates[1].blocks, 8);
}

TEST(BlockletPropose, DenseMatricesUseTiles) {
  DenseMatrix d(64, 64, 1.0);
  for (const DType t : {DType::f16, DType::bf16, DType::f32}) {
    const BlockletConfig cfg = propose_blocklets(csr_from_dense(d, t));
    EXPECT_GT(cfg.max_blocks, 0);
    EXPECT_EQ(cfg.shape, (BlockShape{16, 16}));
    EXPECT_EQ(cfg.precision, std::string(dtype_name(t)));
  }
}

TEST(BlockletSummary, JsonOfTheThesisExample) {
  const CsrMatrix a = thesis_matrix();
  nlohmann::json j = to_json(decompose_blocklets(a, config({2, 2}, 1.0)));
  EXPECT_EQ(j["shape"], "2x2");
  EXPECT_EQ(j["fill_threshold"], 1.0);
  EXPECT_TRUE(j["max_blocks"].is_null());
  EXPECT_EQ(j["precision"], "f16");
  EXPECT_EQ(j["rows"], 6);
  EXPECT_EQ(j["cols"], 6);
  EXPECT_EQ(j["nnz"], 36);
  EXPECT_EQ(j["blocks"], 9);
  EXPECT_EQ(j["passes"], 3);
  EXPECT_EQ(j["nnz_covered"], 36);
  EXPECT_EQ(j["explicit_zeros"], 0);
  EXPECT_EQ(j["residual_nnz"], 0);
  EXPECT_EQ(j["coverage"], 1.0);
  j = to_json(decompose_blocklets(a, config({4, 4}, 0.25, 2, "bf16")));
  EXPECT_EQ(j["shape"], "4x4");
  EXPECT_EQ(j["max_blocks"], 2);
  EXPECT_EQ(j["blocks"], 2);
  EXPECT_EQ(j["nnz_covered"], 16 + 8);
  EXPECT_EQ(j["explicit_zeros"], 8);
  EXPECT_EQ(j["residual_nnz"], 12);
  EXPECT_EQ(j["coverage"], 24.0 / 36.0);
}

}  // namespace
}  // namespace sparsecc
