// Loading inputs by spec: `file:tensor` parsing, format detection, matrices from every format,
// tensor selection rules, and the real MobileNet layer.
#include "sparsecc/io/load.hpp"

#include <gtest/gtest.h>

#include <functional>

#include "sparsecc/common/error.hpp"
#include "sparsecc/io/npy.hpp"
#include "sparsecc/io/npz.hpp"
#include "sparsecc/io/safetensors.hpp"
#include "test_support.hpp"

namespace sparsecc {
namespace {

TEST(Load, ParsesInputSpecs) {
  test::TempDir dir;
  const std::string odd = dir.file("a:b.npz");
  test::write_text(odd, "");
  EXPECT_EQ(parse_input_spec(odd).path, odd);
  EXPECT_EQ(parse_input_spec(odd).tensor, "");
  EXPECT_EQ(parse_input_spec(odd + ":w").path, odd);
  EXPECT_EQ(parse_input_spec(odd + ":w").tensor, "w");
  EXPECT_EQ(parse_input_spec("m.npz:fc1").path, "m.npz");
  EXPECT_EQ(parse_input_spec("m.npz:fc1").tensor, "fc1");
  EXPECT_EQ(parse_input_spec("x/m.mtx").tensor, "");
  EXPECT_EQ(parse_input_spec("d:e/m.npz:w").path, "d:e/m.npz");
}

TEST(Load, DetectsFormatsByExtension) {
  EXPECT_EQ(detect_format("a.mtx"), InputFormat::mtx);
  EXPECT_EQ(detect_format("a.mtx.gz"), InputFormat::mtx);
  EXPECT_EQ(detect_format("d/a.smtx.gz"), InputFormat::smtx);
  EXPECT_EQ(detect_format("a.npy"), InputFormat::npy);
  EXPECT_EQ(detect_format("a.NPZ"), InputFormat::npz);
  EXPECT_EQ(detect_format("a.npz.gz"), InputFormat::npz);
  EXPECT_EQ(detect_format("m.safetensors"), InputFormat::safetensors);
  EXPECT_EQ(detect_format("n.swc"), InputFormat::swc);
  test::expect_input_error([] { detect_format("a.csv"); },
                           {"a.csv: unknown format (expected .mtx, .smtx, .npy"});
  test::expect_input_error([] { detect_format("a.gz"); }, {"unknown format"});
  test::expect_input_error([] { detect_format(".npy"); }, {"unknown format"});
}

TEST(Load, MatricesFromEveryFormat) {
  test::TempDir dir;
  test::write_text(dir.file("a.mtx"),
                   "%%MatrixMarket matrix coordinate real general\n2 3 2\n1 1 1.5\n2 3 -2\n");
  test::write_text(dir.file("a.smtx"), "2, 3, 2\n0 1 2\n0 2\n");
  write_npy(dir.file("a.npy"), test::make_tensor("a", {2, 3}, {1.5, 0, 0, 0, 0, -2}, DType::f16));
  write_npz(dir.file("a.npz.gz"),
            {test::make_tensor("a", {2, 3}, {1.5, 0, 0, 0, 0, -2}), test::make_tensor("bias", {2}, {1, 2})},
            true);
  write_safetensors(dir.file("a.safetensors"),
                    {test::make_tensor("a", {2, 3}, {1.5, 0, 0, 0, 0, -2}, DType::bf16),
                     test::make_tensor("b", {3, 1}, {1, 2, 3})});
  for (const std::string spec : {"a.mtx", "a.npy", "a.npz.gz", "a.npz.gz:a", "a.safetensors:a"}) {
    const CsrMatrix m = load_matrix(dir.file(spec));
    EXPECT_EQ(m.rows, 2) << spec;
    EXPECT_EQ(m.cols, 3) << spec;
    EXPECT_EQ(m.col_idx, (std::vector<std::int32_t>{0, 2})) << spec;
    EXPECT_EQ(m.values, (std::vector<double>{1.5, -2})) << spec;
  }
  EXPECT_EQ(load_matrix(dir.file("a.npy")).source_dtype, DType::f16);
  EXPECT_EQ(load_matrix(dir.file("a.safetensors:a")).source_dtype, DType::bf16);
  const CsrMatrix s = load_matrix(dir.file("a.smtx"), {.seed = 5});
  EXPECT_EQ(s.col_idx, (std::vector<std::int32_t>{0, 2}));
  EXPECT_EQ(s.values, load_matrix(dir.file("a.smtx"), {.seed = 5}).values);

  test::expect_input_error([&] { load_matrix(dir.file("a.safetensors")); },
                           {"a.safetensors: holds 2 2-D tensors; name one as", "(candidates: a, b)"});
  test::expect_input_error([&] { load_matrix(dir.file("a.npz.gz:bias")); },
                           {"a.npz.gz: tensor 'bias': shape (2,) is not a matrix"});
  test::expect_input_error([&] { load_matrix(dir.file("a.npz.gz:nope")); },
                           {"tensor 'nope'", "available: a, bias"});
  test::expect_input_error([&] { load_matrix(dir.file("a.mtx:x")); }, {"a.mtx: holds a single matrix"});
  test::expect_input_error([&] { load_matrix(dir.file("a.npy:x")); },
                           {"a.npy: a .npy file holds one tensor ('a')"});
  test::expect_input_error([&] { load_matrix(dir.file("cell.swc")); },
                           {"cell.swc: is a morphology, not a matrix"});
  write_npy(dir.file("wide.npy"), test::make_tensor("wide", {0, std::int64_t{1} << 30}, {}));
  test::expect_input_error(
      [&] { load_matrix(dir.file("wide.npy")); },
      {"wide.npy: tensor 'wide': shape (0, 1073741824) exceeds the matrix dimension limit"});
  test::expect_input_error([&] { load_matrix(dir.file("missing.npz")); }, {"missing.npz", "cannot open"});
  test::expect_input_error([&] { load_matrix(dir.file("missing.mtx:x")); }, {"missing.mtx: cannot open"});
}

TEST(Load, TensorsAndListing) {
  test::TempDir dir;
  write_npz(dir.file("b.npz"), {test::make_tensor("bias", {3}, {1, 2, 3})}, false);
  write_npz(dir.file("two.npz"), {test::make_tensor("x", {1}, {1}), test::make_tensor("y", {1}, {2})}, false);
  EXPECT_EQ(load_tensor(dir.file("b.npz")).data, (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(load_tensor(dir.file("two.npz:y")).data, (std::vector<double>{2}));
  test::expect_input_error([&] { load_tensor(dir.file("two.npz")); },
                           {"holds 2 tensors", "(candidates: x, y)"});
  test::expect_input_error([&] { load_tensor(dir.file("a.mtx")); },
                           {"a.mtx: is a matrix file, not a tensor container"});
  test::expect_input_error([&] { load_tensor(dir.file("a.swc")); }, {"is a morphology"});
  EXPECT_EQ(list_tensors(dir.file("two.npz")), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(list_tensors(dir.file("w.npy.gz")), (std::vector<std::string>{"w"}));
  write_safetensors(dir.file("s.safetensors"), {test::make_tensor("q", {2}, {1, 2})});
  EXPECT_EQ(list_tensors(dir.file("s.safetensors")), (std::vector<std::string>{"q"}));
  EXPECT_EQ(load_tensor(dir.file("s.safetensors")).name, "q");
}

TEST(Load, ValuesThatOverflowTheDtypeNameTheFileAndEntry) {
  CsrMatrix a;
  a.rows = 2;
  a.cols = 3;
  a.row_ptr = {0, 1, 2};
  a.col_idx = {0, 2};
  a.values = {1.0, 1e39};
  test::expect_input_error([&] { check_values_fit(a, "f32", "m.mtx"); },
                           {"m.mtx: the weight 1e+39 at row 2, column 3 overflows f32"});
  a.values = {70000.0, 1.0};
  check_values_fit(a, "f32", "m.mtx");
  check_values_fit(a, "bf16", "m.mtx");
  test::expect_input_error([&] { check_values_fit(a, "f16", "m.npz", "fc1"); },
                           {"m.npz: tensor 'fc1'", "the weight 70000 at row 1, column 1 overflows f16"});
  check_bias_fits({1.0, -3e38}, "b.npy", "b");
  test::expect_input_error(
      [&] {
        check_bias_fits({1.0, -1e39}, "b.npy", "b");
      },
      {"b.npy: tensor 'b'", "the bias value -1e+39 at index 1 overflows f32"});
}

TEST(Load, RealMobileNetLayer) {
  SPARSECC_DATA_OR_SKIP(file, "sparsert/mobilenet_v1_sparse90.npz");
  const CsrMatrix m = load_matrix(file.string() + ":contraction_1x1_0");
  EXPECT_EQ(m.rows, 64);
  EXPECT_EQ(m.cols, 32);
  EXPECT_EQ(m.source_dtype, DType::f32);
  EXPECT_NEAR(static_cast<double>(m.nnz()) / (64.0 * 32.0), 0.1, 0.02);
  EXPECT_EQ(load_tensor(file.string() + ":contraction_1x1_0_bias").shape, (std::vector<std::int64_t>{64}));
  test::expect_input_error([&] { load_matrix(file.string()); },
                           {"holds 13 2-D tensors", "contraction_1x1_11"});
}

}  // namespace
}  // namespace sparsecc
