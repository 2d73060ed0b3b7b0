// Matrix Market reader and writer: every format/field/symmetry combination, every error path, and
// round trips through files (plain and gzip).
#include "sparsecc/io/mtx.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/file.hpp"
#include "sparsecc/matrix/csr.hpp"
#include "test_support.hpp"

namespace sparsecc {
namespace {

std::span<const unsigned char> bytes(const std::string& s) {
  return {reinterpret_cast<const unsigned char*>(s.data()), s.size()};
}

CsrMatrix parse(const std::string& text) { return parse_mtx(bytes(text), "m.mtx"); }

DenseMatrix dense(const std::string& text) { return dense_from_csr(parse(text)); }

// Parsing `text` fails with an InputError whose message contains `where` and `what`.
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

const std::string kCoo = "%%MatrixMarket matrix coordinate real general\n";

TEST(Mtx, CoordinateRealGeneral) {
  const CsrMatrix a =
      parse(kCoo + "% a comment\n\n   % indented comment\n3 4 3\n3 1 -2.5\n1 4 1e-3\n\n1 2 7\n");
  EXPECT_NO_THROW(validate(a));
  EXPECT_EQ(a.rows, 3);
  EXPECT_EQ(a.cols, 4);
  EXPECT_EQ(a.source_dtype, DType::f64);
  EXPECT_EQ(a.row_ptr, (std::vector<std::int64_t>{0, 2, 2, 3}));
  EXPECT_EQ(a.col_idx, (std::vector<std::int32_t>{1, 3, 0}));
  EXPECT_EQ(a.values, (std::vector<double>{7, 1e-3, -2.5}));
}

TEST(Mtx, HeaderIsCaseInsensitiveAndCrlfIsAccepted) {
  const CsrMatrix a = parse("%%matrixmarket MATRIX Coordinate REAL General\r\n2 2 1\r\n2 2 4\r\n");
  EXPECT_EQ(a.nnz(), 1);
  EXPECT_EQ(a.values[0], 4);
  EXPECT_EQ(parse("%%MatrixMarket\tmatrix  coordinate real general\n1 1 1\n1 1 1").nnz(), 1);  // no final \n
}

TEST(Mtx, IntegerAndPatternFields) {
  const DenseMatrix i =
      dense("%%MatrixMarket matrix coordinate integer general\n2 2 2\n1 1 -3\n2 1 9007199254740993\n");
  EXPECT_EQ(i(0, 0), -3);
  EXPECT_EQ(i(1, 0), 9007199254740992.0);  // converted to the nearest double
  const DenseMatrix p = dense("%%MatrixMarket matrix coordinate pattern general\n2 3 2\n1 3\n2 1\n");
  EXPECT_EQ(p.data, (std::vector<double>{0, 0, 1, 1, 0, 0}));
}

TEST(Mtx, SymmetricCoordinateIsExpanded) {
  const DenseMatrix d =
      dense("%%MatrixMarket matrix coordinate real symmetric\n3 3 3\n1 1 2\n3 1 5\n3 2 -1\n");
  EXPECT_EQ(d.data, (std::vector<double>{2, 0, 5, 0, 0, -1, 5, -1, 0}));
  const DenseMatrix p = dense("%%MatrixMarket matrix coordinate pattern symmetric\n2 2 2\n2 1\n2 2\n");
  EXPECT_EQ(p.data, (std::vector<double>{0, 1, 1, 1}));
  const DenseMatrix i = dense("%%MatrixMarket matrix coordinate integer symmetric\n2 2 1\n2 1 4\n");
  EXPECT_EQ(i.data, (std::vector<double>{0, 4, 4, 0}));
}

TEST(Mtx, SkewSymmetricCoordinateIsExpandedNegated) {
  const DenseMatrix d =
      dense("%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 3\n2 1 2\n3 1 5\n3 3 0\n");
  EXPECT_EQ(d.data, (std::vector<double>{0, -2, -5, 2, 0, 0, 5, 0, 0}));
  const DenseMatrix i = dense("%%MatrixMarket matrix coordinate integer skew-symmetric\n2 2 1\n2 1 3\n");
  EXPECT_EQ(i.data, (std::vector<double>{0, -3, 3, 0}));
}

TEST(Mtx, ArrayGeneralIsColumnMajor) {
  const DenseMatrix d = dense("%%MatrixMarket matrix array real general\n% c\n2 3\n1\n2\n0\n4\n5\n\n6\n");
  EXPECT_EQ(d.data, (std::vector<double>{1, 0, 5, 2, 4, 6}));
  const CsrMatrix a = parse("%%MatrixMarket matrix array real general\n2 3\n1\n2\n0\n4\n5\n6\n");
  EXPECT_EQ(a.nnz(), 5);  // the zero is not stored
  const DenseMatrix i = dense("%%MatrixMarket matrix array integer general\n1 2\n-1\n7\n");
  EXPECT_EQ(i.data, (std::vector<double>{-1, 7}));
}

TEST(Mtx, ArraySymmetricAndSkewStoreTheLowerTriangle) {
  // Symmetric: columns of the lower triangle including the diagonal: (1,1) (2,1) (3,1) (2,2) (3,2) (3,3).
  const DenseMatrix s = dense("%%MatrixMarket matrix array real symmetric\n3 3\n1\n2\n3\n4\n5\n6\n");
  EXPECT_EQ(s.data, (std::vector<double>{1, 2, 3, 2, 4, 5, 3, 5, 6}));
  // Skew: strictly below the diagonal: (2,1) (3,1) (3,2).
  const DenseMatrix k = dense("%%MatrixMarket matrix array real skew-symmetric\n3 3\n1\n2\n3\n");
  EXPECT_EQ(k.data, (std::vector<double>{0, -1, -2, 1, 0, -3, 2, 3, 0}));
  EXPECT_EQ(parse("%%MatrixMarket matrix array real skew-symmetric\n1 1\n").nnz(), 0);
  const DenseMatrix i = dense("%%MatrixMarket matrix array integer skew-symmetric\n2 2\n-4\n");
  EXPECT_EQ(i.data, (std::vector<double>{0, 4, -4, 0}));
  EXPECT_EQ(parse("%%MatrixMarket matrix array integer symmetric\n1 1\n5\n").values[0], 5);
}

TEST(Mtx, DuplicatesAreSummedAndZerosDropped) {
  const CsrMatrix a = parse(kCoo + "2 2 6\n1 1 1.5\n1 1 2.5\n2 2 0\n2 1 3\n2 1 -3\n1 2 -0.0\n");
  EXPECT_EQ(a.nnz(), 1);
  EXPECT_EQ(a.col_idx[0], 0);
  EXPECT_EQ(a.values[0], 4.0);
  const DenseMatrix p = dense("%%MatrixMarket matrix coordinate pattern general\n1 1 3\n1 1\n1 1\n1 1\n");
  EXPECT_EQ(p(0, 0), 3.0);
}

TEST(Mtx, EmptyShapes) {
  const CsrMatrix z = parse(kCoo + "0 0 0\n");
  EXPECT_EQ(z.rows, 0);
  EXPECT_EQ(z.cols, 0);
  EXPECT_EQ(z.row_ptr, (std::vector<std::int64_t>{0}));
  const CsrMatrix k = parse(kCoo + "0 5 0\n");
  EXPECT_EQ(k.cols, 5);
  const CsrMatrix e = parse("%%MatrixMarket matrix array real general\n4 0\n");
  EXPECT_EQ(e.rows, 4);
  EXPECT_EQ(e.row_ptr.size(), 5u);
  EXPECT_EQ(parse(kCoo + "3 3 0\n").nnz(), 0);
}

TEST(Mtx, BannerErrors) {
  expect_error("", "m.mtx:1:", "missing '%%MatrixMarket'");
  expect_error("3 3 0\n", "m.mtx:1:", "missing '%%MatrixMarket'");
  expect_error("%%MatrixMarket matrix coordinate real\n1 1 0\n", "m.mtx:1:", "header must read");
  expect_error("%%MatrixMarket vector coordinate real general\n", "m.mtx:1:", "unsupported object 'vector'");
  expect_error("%%MatrixMarket matrix sparse real general\n", "m.mtx:1:", "unknown format 'sparse'");
  expect_error("%%MatrixMarket matrix coordinate complex general\n",
               "m.mtx:1:", "unsupported field 'complex'");
  expect_error("%%MatrixMarket matrix coordinate quaternion general\n", "m.mtx:1:", "unknown field");
  expect_error("%%MatrixMarket matrix coordinate real hermitian\n",
               "m.mtx:1:", "unsupported symmetry 'hermitian'");
  expect_error("%%MatrixMarket matrix coordinate real upper\n", "m.mtx:1:", "unknown symmetry 'upper'");
  expect_error("%%MatrixMarket matrix array pattern general\n",
               "m.mtx:1:", "'pattern' is not valid with 'array'");
  expect_error("%%MatrixMarket matrix coordinate pattern skew-symmetric\n",
               "m.mtx:1:", "'pattern' is not valid with 'skew-symmetric'");
}

TEST(Mtx, SizeLineErrors) {
  expect_error(kCoo + "% only comments\n\n", "m.mtx:3:", "missing size line");
  expect_error(kCoo, "m.mtx:1:", "missing size line");
  expect_error(kCoo + "3 3\n", "m.mtx:2:", "size line must read 'rows cols entries'");
  expect_error("%%MatrixMarket matrix array real general\n3 3 9\n",
               "m.mtx:2:", "size line must read 'rows cols'");
  expect_error(kCoo + "3 x 0\n", "m.mtx:2:", "column count 'x' is not an integer");
  expect_error(kCoo + "-3 3 0\n", "m.mtx:2:", "row count -3 is negative");
  expect_error(kCoo + "3 3 -1\n", "m.mtx:2:", "entry count -1 is negative");
  expect_error(kCoo + "99999999999999999999 3 0\n", "m.mtx:2:", "is not an integer");
  expect_error(kCoo + "3 3000000000 0\n", "m.mtx:2:", "dimension 3000000000 exceeds the supported maximum");
  expect_error("%%MatrixMarket matrix coordinate real symmetric\n3 4 0\n",
               "m.mtx:2:", "must be square, not 3x4");
  expect_error(kCoo + "1000 1000 1000000000000\n1 1 1\n",
               "m.mtx:2:", "declares 1000000000000 entries but only 7 bytes follow");
  expect_error("%%MatrixMarket matrix array real general\n10000000 10000000\n1\n",
               "m.mtx:2:", "declares 100000000000000 entries");
}

TEST(Mtx, EntryCountErrors) {
  expect_error(kCoo + "3 3 3\n1 1 1.0000\n2 2 2.0000\n", "m.mtx:4:", "file ends after 2 of the 3 entries");
  expect_error(kCoo + "3 3 1\n1 1 1\n\n2 2 2\n", "m.mtx:5:", "more entries than the 1 declared");
  expect_error("%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n",
               "m.mtx:5:", "file ends after 3 of the 4");
  expect_error("%%MatrixMarket matrix array real symmetric\n2 2\n1\n2\n3\n4\n",
               "m.mtx:6:", "more entries than the 3");
}

TEST(Mtx, EntryErrors) {
  expect_error(kCoo + "8 8 2\n1 1 1\n2 9 1\n", "m.mtx:4:", "column index 9 out of range 1..8");
  expect_error(kCoo + "8 8 1\n0 1 1\n", "m.mtx:3:", "row index 0 out of range 1..8");
  expect_error(kCoo + "8 8 1\n1.0 1 1\n", "m.mtx:3:", "row index '1.0' is not an integer");
  expect_error(kCoo + "8 8 1\n1 1\n", "m.mtx:3:", "expected 3 (row col value) fields, found 2");
  expect_error(kCoo + "8 8 1\n1 1 1 1\n", "m.mtx:3:", "found 4");
  expect_error("%%MatrixMarket matrix coordinate pattern general\n8 8 1\n1 1 1\n",
               "m.mtx:3:", "expected 2 (row col) fields, found 3");
  expect_error(kCoo + "8 8 1\n1 1 abc\n", "m.mtx:3:", "value 'abc' is not a number");
  expect_error(kCoo + "8 8 1\n1 1 nan\n", "m.mtx:3:", "value 'nan' is not finite");
  expect_error(kCoo + "8 8 1\n1 1 -inf\n", "m.mtx:3:", "value '-inf' is not finite");
  expect_error(kCoo + "8 8 1\n1 1 1e999\n", "m.mtx:3:", "value '1e999' is not a number");
  expect_error("%%MatrixMarket matrix coordinate integer general\n8 8 1\n1 1 1.5\n",
               "m.mtx:3:", "value '1.5' is not an integer");
  expect_error("%%MatrixMarket matrix array real general\n1 2\n1 2\n",
               "m.mtx:3:", "expected 1 value per line");
  expect_error("%%MatrixMarket matrix array real general\n1 2\n1\nNaN\n", "m.mtx:4:", "not finite");
  expect_error(kCoo + "1 1 2\n1 1 1.5e308\n1 1 1.5e308\n",
               "m.mtx:4:", "sum of duplicate entries at (1, 1) overflows");
}

TEST(Mtx, SymmetryErrors) {
  expect_error("%%MatrixMarket matrix coordinate real symmetric\n3 3 2\n2 1 1\n1 3 1\n", "m.mtx:4:",
               "entry (1, 3) is above the diagonal; a symmetric file stores only the lower triangle");
  expect_error("%%MatrixMarket matrix coordinate pattern symmetric\n3 3 1\n1 2\n",
               "m.mtx:3:", "above the diagonal");
  expect_error("%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 1\n2 3 1\n",
               "m.mtx:3:", "a skew-symmetric file stores only the lower triangle");
  expect_error("%%MatrixMarket matrix coordinate integer skew-symmetric\n3 3 2\n2 1 1\n2 2 4\n",
               "m.mtx:4:", "nonzero diagonal entry (2, 2)");
}

TEST(Mtx, FormatIsCoordinateRealGeneralWithExactValues) {
  CsrMatrix a;
  a.rows = 2;
  a.cols = 3;
  a.row_ptr = {0, 2, 3};
  a.col_idx = {0, 2, 1};
  a.values = {0.1, -1e-300, 5e-324};
  EXPECT_EQ(format_mtx(a),
            "%%MatrixMarket matrix coordinate real general\n2 3 3\n1 1 0.10000000000000001\n"
            "1 3 -1e-300\n2 2 4.9406564584124654e-324\n");
  a.values[0] = std::numeric_limits<double>::infinity();
  EXPECT_THROW(format_mtx(a), UsageError);
}

void expect_same(const CsrMatrix& a, const CsrMatrix& b) {
  EXPECT_EQ(a.rows, b.rows);
  EXPECT_EQ(a.cols, b.cols);
  EXPECT_EQ(a.row_ptr, b.row_ptr);
  EXPECT_EQ(a.col_idx, b.col_idx);
  EXPECT_EQ(a.values, b.values);
}

TEST(Mtx, RoundTripsRandomMatricesThroughFiles) {
  test::TempDir dir;
  std::mt19937_64 rng(5);
  const std::pair<int, int> shapes[] = {{0, 0}, {0, 3}, {3, 0}, {1, 1}, {17, 9}, {40, 60}};
  for (const auto& [r, c] : shapes) {
    DenseMatrix d(r, c);
    for (auto& v : d.data) {
      if (rng() % 4) continue;
      // Arbitrary bit patterns of finite doubles, to exercise the exactness of %.17g.
      double x = 0;
      do {
        const std::uint64_t bits = rng();
        std::memcpy(&x, &bits, sizeof x);
      } while (!std::isfinite(x) || x == 0.0);
      v = x;
    }
    const CsrMatrix a = csr_from_dense(d);
    expect_same(parse(format_mtx(a)), a);
    for (const char* file : {"a.mtx", "a.mtx.gz"}) {
      write_mtx(dir.file(file), a);
      expect_same(read_mtx(dir.file(file)), a);
    }
    EXPECT_TRUE(is_gzip(read_file(dir.file("a.mtx.gz"))));
  }
}

TEST(Mtx, ReadErrorsNameThePath) {
  test::TempDir dir;
  try {
    read_mtx(dir.file("missing.mtx"));
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("missing.mtx"), std::string::npos);
  }
  const std::string path = dir.file("bad.mtx.gz");
  const std::string text = kCoo + "2 2 1\n3 1 1\n";
  test::write_bytes(path, gzip(bytes(text)));
  try {
    read_mtx(path);
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ":3: row index 3 out of range 1..2", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace sparsecc
