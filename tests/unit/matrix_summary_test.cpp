// summarize_matrix, to_json and to_text.
#include "sparsecc/inspector/matrix_summary.hpp"

#include <gtest/gtest.h>

#include "sparsecc/common/error.hpp"
#include "sparsecc/io/smtx.hpp"
#include "test_support.hpp"

namespace sparsecc {
namespace {

TEST(MatrixSummary, SmallMatrixStatistics) {
  DenseMatrix d(4, 3);
  d(0, 0) = 1;
  d(0, 2) = 2;
  d(3, 1) = 3;
  const MatrixSummary s = summarize_matrix(csr_from_dense(d, DType::f16));
  EXPECT_EQ(s.rows, 4);
  EXPECT_EQ(s.cols, 3);
  EXPECT_EQ(s.nnz, 3);
  EXPECT_DOUBLE_EQ(s.sparsity, 0.75);
  EXPECT_EQ(s.source_dtype, DType::f16);
  EXPECT_EQ(s.row_nnz.min, 0);
  EXPECT_EQ(s.row_nnz.max, 2);
  EXPECT_DOUBLE_EQ(s.row_nnz.mean, 0.75);
  EXPECT_EQ(s.row_nnz.empty, 2);
  EXPECT_EQ(s.col_nnz.empty, 0);
  // Grid capped by the shape: 4 x 3 regions of one element each, equal to the pattern.
  ASSERT_EQ(s.block_density.size(), 4u);
  for (std::int64_t r = 0; r < 4; ++r)
    for (std::int64_t c = 0; c < 3; ++c) EXPECT_EQ(s.block_density[r][c], d(r, c) != 0 ? 1.0 : 0.0);
}

TEST(MatrixSummary, BlockDensityCountsEveryNonzeroOnce) {
  // 37 x 23, uneven region sizes; a full lower-left quadrant.
  DenseMatrix d(37, 23);
  for (int r = 0; r < 37; ++r)
    for (int c = 0; c < 23; ++c) d(r, c) = (r >= 18 && c < 11) || (r * 7 + c * 3) % 11 == 0 ? 1.0 : 0.0;
  const CsrMatrix a = csr_from_dense(d);
  for (const int grid : {1, 2, 5, 16, 100}) {
    const MatrixSummary s = summarize_matrix(a, grid);
    const std::size_t gr = std::min(grid, 37), gc = std::min(grid, 23);
    ASSERT_EQ(s.block_density.size(), gr);
    double total = 0;
    for (std::size_t i = 0; i < gr; ++i) {
      ASSERT_EQ(s.block_density[i].size(), gc);
      const std::int64_t h = (i + 1) * 37 / gr - i * 37 / gr;
      for (std::size_t j = 0; j < gc; ++j) {
        const std::int64_t w = (j + 1) * 23 / gc - j * 23 / gc;
        double count = 0;
        for (std::int64_t r = i * 37 / gr; r < static_cast<std::int64_t>((i + 1) * 37 / gr); ++r)
          for (std::int64_t c = j * 23 / gc; c < static_cast<std::int64_t>((j + 1) * 23 / gc); ++c)
            count += d(r, c);
        EXPECT_DOUBLE_EQ(s.block_density[i][j], count / static_cast<double>(h * w));
        EXPECT_GE(s.block_density[i][j], 0.0);
        EXPECT_LE(s.block_density[i][j], 1.0);
        total += s.block_density[i][j] * static_cast<double>(h * w);
      }
    }
    EXPECT_NEAR(total, static_cast<double>(a.nnz()), 1e-9);
  }
  EXPECT_EQ(summarize_matrix(a, 1).block_density[0][0], static_cast<double>(a.nnz()) / (37 * 23));
}

TEST(MatrixSummary, EmptyShapes) {
  const MatrixSummary z = summarize_matrix(CsrMatrix{});
  EXPECT_TRUE(z.block_density.empty());
  CsrMatrix k;
  k.cols = 5;
  const MatrixSummary s = summarize_matrix(k);
  EXPECT_EQ(s.col_nnz.empty, 5);
  EXPECT_TRUE(s.block_density.empty());
  EXPECT_NO_THROW(to_text(s));
  EXPECT_EQ(to_json(s)["block_density"].size(), 0u);
}

TEST(MatrixSummary, RejectsBadGrid) {
  EXPECT_THROW(summarize_matrix(CsrMatrix{}, 0), UsageError);
  EXPECT_THROW(summarize_matrix(CsrMatrix{}, 1025), UsageError);
}

TEST(MatrixSummary, JsonHasTheDocumentedKeys) {
  DenseMatrix d(3, 3);
  d(0, 0) = 1;
  d(2, 1) = 1;
  const nlohmann::json j = to_json(summarize_matrix(csr_from_dense(d)));
  EXPECT_EQ(j["rows"], 3);
  EXPECT_EQ(j["cols"], 3);
  EXPECT_EQ(j["nnz"], 2);
  EXPECT_DOUBLE_EQ(j["sparsity"].get<double>(), 7.0 / 9.0);
  EXPECT_EQ(j["row_nnz"]["min"], 0);
  EXPECT_EQ(j["row_nnz"]["max"], 1);
  EXPECT_DOUBLE_EQ(j["row_nnz"]["mean"].get<double>(), 2.0 / 3.0);
  EXPECT_TRUE(j["row_nnz"].contains("stddev"));
  EXPECT_TRUE(j["col_nnz"].contains("stddev"));
  EXPECT_EQ(j["empty_rows"], 1);
  EXPECT_EQ(j["empty_cols"], 1);
  EXPECT_EQ(j["source_dtype"], "f64");
  ASSERT_TRUE(j["block_density"].is_array());
  ASSERT_EQ(j["block_density"].size(), 3u);
  EXPECT_EQ(j["block_density"][2][1], 1.0);
  EXPECT_EQ(j["block_density"][1][1], 0.0);
}

TEST(MatrixSummary, TextDrawsTheDensityMap) {
  DenseMatrix d(4, 4);
  for (int c = 0; c < 4; ++c) d(0, c) = 1;  // densest region
  d(2, 2) = 1;                              // 1/4 as dense at grid 2
  const std::string text = to_text(summarize_matrix(csr_from_dense(d), 2));
  EXPECT_NE(text.find("matrix 4 x 4, 5 nonzeros, sparsity 68.75%"), std::string::npos) << text;
  EXPECT_NE(text.find("nnz per row: min 0"), std::string::npos) << text;
  EXPECT_NE(text.find("empty rows 2"), std::string::npos) << text;
  EXPECT_NE(text.find("  +--+\n  |@@|\n  | +|\n  +--+\n"), std::string::npos) << text;
}

TEST(MatrixSummary, RealDlmcLayer) {
  SPARSECC_DATA_OR_SKIP(file, "dlmc/rn50/magnitude_pruning/0.9/bottleneck_1_block_group1_1_1.smtx.gz");
  const MatrixSummary s = summarize_matrix(read_smtx(file.string(), 0));
  EXPECT_EQ(s.rows, 64);
  EXPECT_EQ(s.cols, 256);
  EXPECT_EQ(s.nnz, 1638);
  EXPECT_EQ(s.block_density.size(), 16u);
  const std::string text = to_text(s);
  EXPECT_NE(text.find("matrix 64 x 256, 1638 nonzeros"), std::string::npos);
  EXPECT_EQ(to_json(s)["block_density"][0].size(), 16u);
}

}  // namespace
}  // namespace sparsecc
