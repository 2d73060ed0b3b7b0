// DLMC .smtx reader and writer: layout variants, every error path, round trips, and every real DLMC
// file in the shared data folder checked against dlmc.csv.
#include "sparsecc/io/smtx.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/file.hpp"
#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/matrix/stats.hpp"
#include "test_support.hpp"

namespace sparsecc {
namespace {

std::span<const unsigned char> bytes(const std::string& s) {
  return {reinterpret_cast<const unsigned char*>(s.data()), s.size()};
}

CsrMatrix parse(const std::string& text, std::uint64_t seed = 1) {
  return parse_smtx(bytes(text), "w.smtx", seed);
}

void expect_error(const std::string& text, const std::string& where, const std::string& what) {
  try {
    parse(text);
    ADD_FAILURE() << "parsed without error; expected " << where << " " << what;
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(where, 0), 0u) << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
  }
}

TEST(Smtx, ParsesDlmcLayout) {
  // As in the published files: comma-separated header, a trailing space on lines 2 and 3.
  const CsrMatrix a = parse("3, 4, 4\n0 2 2 4 \n0 3 1 2 \n", 9);
  EXPECT_NO_THROW(validate(a));
  EXPECT_EQ(a.rows, 3);
  EXPECT_EQ(a.cols, 4);
  EXPECT_EQ(a.source_dtype, DType::f32);
  EXPECT_EQ(a.row_ptr, (std::vector<std::int64_t>{0, 2, 2, 4}));
  EXPECT_EQ(a.col_idx, (std::vector<std::int32_t>{0, 3, 1, 2}));
  CsrMatrix expected = a;
  fill_values_uniform(expected, 9);
  EXPECT_EQ(a.values, expected.values);
  EXPECT_NE(parse("3, 4, 4\n0 2 2 4 \n0 3 1 2 \n", 10).values, a.values);
}

TEST(Smtx, SeparatorAndLineEndingVariants) {
  const CsrMatrix ref = parse("2, 2, 2\n0 1 2\n1 0\n");
  for (const char* text : {"2 2 2\n0 1 2\n1 0\n", "2,2,2\n0 1 2\n1 0", "2 , 2 , 2\r\n0\t1 2\r\n1 0\r\n",
                           "2, 2, 2\n0 1 2\n1 0\n\n  \n"}) {
    const CsrMatrix a = parse(text);
    EXPECT_EQ(a.row_ptr, ref.row_ptr) << text;
    EXPECT_EQ(a.col_idx, ref.col_idx) << text;
  }
}

TEST(Smtx, EmptyShapesAndNoNonzeros) {
  const CsrMatrix z = parse("0, 0, 0\n0\n");
  EXPECT_EQ(z.rows, 0);
  EXPECT_EQ(z.row_ptr, (std::vector<std::int64_t>{0}));
  EXPECT_EQ(parse("0, 7, 0\n0\n\n").cols, 7);
  const CsrMatrix e = parse("3, 2, 0\n0 0 0 0\n");
  EXPECT_EQ(e.nnz(), 0);
  EXPECT_EQ(e.row_ptr.size(), 4u);
}

TEST(Smtx, UnsortedRowsAreSorted) {
  const CsrMatrix a = parse("2, 5, 4\n0 3 4\n4 0 2 3\n");
  EXPECT_EQ(a.col_idx, (std::vector<std::int32_t>{0, 2, 4, 3}));
  EXPECT_NO_THROW(validate(a));
}

TEST(Smtx, Errors) {
  expect_error("", "w.smtx:1:", "empty file");
  expect_error("2, 2\n0 1 2\n0 1\n", "w.smtx:1:", "line 1 must read 'nrows, ncols, nnz', found 2 fields");
  expect_error("2, 2, 2, 2\n", "w.smtx:1:", "found 4 fields");
  expect_error("2, x, 2\n", "w.smtx:1:", "column count 'x' is not an integer");
  expect_error("-2, 2, 2\n", "w.smtx:1:", "negative size");
  expect_error("2, 2, -1\n", "w.smtx:1:", "negative size");
  expect_error("2, 2147483648, 0\n", "w.smtx:1:", "dimension 2147483648 exceeds the supported maximum");
  expect_error("2, 2, 5\n0 1 5\n", "w.smtx:1:", "5 nonzeros do not fit a 2x2 matrix");
  expect_error("10, 10, 1000000000000\n0\n", "w.smtx:1:", "do not fit");
  expect_error("10000, 10000, 100000000\n0 1\n1\n",
               "w.smtx:2:", "expected 10001 row offsets (nrows + 1), found 2");
  expect_error("2, 2, 2\n", "w.smtx:1:", "missing line 2");
  expect_error("2, 2, 2\n0 1\n0 1\n", "w.smtx:2:", "expected 3 row offsets (nrows + 1), found 2");
  expect_error("2, 2, 2\n1 1 2\n0 1\n", "w.smtx:2:", "the first row offset must be 0, found 1");
  expect_error("2, 2, 2\n0 2 1\n0 1\n", "w.smtx:2:", "row offset 2 (1) is less than the one before it (2)");
  expect_error("2, 2, 2\n0 1 1\n0 1\n", "w.smtx:2:", "the last row offset is 1, expected nnz 2");
  expect_error("2, 2, 2\n0 1 9\n0 1\n", "w.smtx:2:", "row offset 2 (9) exceeds nnz 2");
  expect_error("2, 2, 2\n0 1 a\n0 1\n", "w.smtx:2:", "row offset 'a' is not an integer");
  expect_error("2, 2, 2\n0 1 2\n", "w.smtx:2:", "missing line 3");
  expect_error("2, 2, 2\n0 1 2\n0\n", "w.smtx:3:", "expected 2 column indices (nnz), found 1");
  expect_error("2, 2, 2\n0 1 2\n0 1 1\n", "w.smtx:3:", "expected 2 column indices (nnz), found 3");
  expect_error("2, 2, 2\n0 1 2\n0 2\n", "w.smtx:3:", "column index 2 out of range 0..1");
  expect_error("2, 2, 2\n0 1 2\n0 -1\n", "w.smtx:3:", "column index -1 out of range");
  expect_error("2, 2, 2\n0 1 2\n0 1.5\n", "w.smtx:3:", "column index '1.5' is not an integer");
  expect_error("1, 3, 2\n0 2\n1 1\n", "w.smtx:3:", "row 0 lists column 1 more than once");
  expect_error("2, 2, 2\n0 1 2\n0 1\n0\n", "w.smtx:4:", "unexpected content after the column indices");
  expect_error("2, 2, 0\n0 0 0\n\n5\n", "w.smtx:4:", "unexpected content");
}

TEST(Smtx, RoundTripThroughFiles) {
  test::TempDir dir;
  std::mt19937 rng(3);
  for (const auto& [r, c] :
       std::vector<std::pair<int, int>>{{0, 0}, {0, 4}, {4, 0}, {1, 1}, {30, 20}, {5, 90}}) {
    DenseMatrix d(r, c);
    for (auto& v : d.data) v = rng() % 3 == 0 ? 1.0 : 0.0;
    CsrMatrix a = csr_from_dense(d, DType::f32);
    fill_values_uniform(a, 77);
    const CsrMatrix b = parse(format_smtx(a), 77);
    EXPECT_EQ(b.rows, a.rows);
    EXPECT_EQ(b.cols, a.cols);
    EXPECT_EQ(b.row_ptr, a.row_ptr);
    EXPECT_EQ(b.col_idx, a.col_idx);
    EXPECT_EQ(b.values, a.values);
    for (const char* file : {"a.smtx", "a.smtx.gz"}) {
      write_smtx(dir.file(file), a);
      const CsrMatrix f = read_smtx(dir.file(file), 77);
      EXPECT_EQ(f.row_ptr, a.row_ptr);
      EXPECT_EQ(f.col_idx, a.col_idx);
      EXPECT_EQ(f.values, a.values);
    }
    EXPECT_TRUE(is_gzip(read_file(dir.file("a.smtx.gz"))));
  }
  CsrMatrix one;
  one.rows = 2;
  one.cols = 3;
  one.row_ptr = {0, 1, 2};
  one.col_idx = {2, 0};
  one.values = {5, 6};
  EXPECT_EQ(format_smtx(one), "2, 3, 2\n0 1 2\n2 0\n");
}

TEST(Smtx, GzipErrorsNameThePathAndLine) {
  test::TempDir dir;
  const std::string path = dir.file("w.smtx.gz");
  const std::string text = "2, 2, 2\n0 1 2\n0 2\n";
  test::write_bytes(path, gzip(bytes(text)));
  try {
    read_smtx(path, 0);
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ":3: column index 2 out of range 0..1", 0), 0u) << e.what();
  }
}

// Every DLMC file present loads, and its shape, nonzero count and per-row/column statistics match
// dlmc.csv (whose columns are model,quality,path,name,nrows,ncols,nnz,mean_nnz_per_row,
// std_nnz_per_row,mean_nnz_per_col,std_nnz_per_col,sparsity).
TEST(Smtx, AllRealDlmcFilesLoadAndMatchTheCsv) {
  SPARSECC_DATA_OR_SKIP(dlmc, "dlmc");
  std::map<std::string, std::vector<std::string>> csv;
  std::ifstream in(dlmc / "dlmc.csv");
  std::string line;
  std::getline(in, line);
  ASSERT_EQ(line.rfind("model,quality,path,name,nrows,ncols,nnz,mean_nnz_per_row,std_nnz_per_row,", 0), 0u);
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
    if (f.size() == 12) csv[f[2]] = f;
  }
  const auto start = std::chrono::steady_clock::now();
  int files = 0, listed = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dlmc)) {
    const std::string p = entry.path().string();
    if (!entry.is_regular_file() || !p.ends_with(".smtx.gz")) continue;
    ++files;
    SCOPED_TRACE(p);
    CsrMatrix a;
    ASSERT_NO_THROW(a = read_smtx(p, 1));
    ASSERT_NO_THROW(validate(a));
    // The csv's path is "dlmc/<model>/<method>/<level>/<name>.smtx".
    const std::string rel = std::filesystem::relative(entry.path(), dlmc).string();
    const auto it = csv.find("dlmc/" + rel.substr(0, rel.size() - 3));
    if (it == csv.end()) continue;
    ++listed;
    const auto& f = it->second;
    EXPECT_EQ(a.rows, std::stoll(f[4]));
    EXPECT_EQ(a.cols, std::stoll(f[5]));
    EXPECT_EQ(a.nnz(), static_cast<std::int64_t>(std::stod(f[6])));
    const MatrixStats s = matrix_stats(a);
    EXPECT_NEAR(s.row.mean, std::stod(f[7]), 1e-6 * (1 + s.row.mean));
    EXPECT_NEAR(s.row.stddev, std::stod(f[8]), 1e-5 * (1 + s.row.stddev));
    EXPECT_NEAR(s.col.mean, std::stod(f[9]), 1e-6 * (1 + s.col.mean));
    EXPECT_NEAR(s.col.stddev, std::stod(f[10]), 1e-5 * (1 + s.col.stddev));
    EXPECT_NEAR(s.sparsity, std::stod(f[11]), 1e-6);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(files, 0);
  EXPECT_EQ(listed, files) << "some DLMC files are not listed in dlmc.csv";
  EXPECT_LT(secs, 20.0);
  std::cout << "[ info     ] " << files << " DLMC files loaded, " << listed << " checked against dlmc.csv in "
            << secs << " s\n";
}

}  // namespace
}  // namespace sparsecc
