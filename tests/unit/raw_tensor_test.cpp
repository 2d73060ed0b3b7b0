// Tensors scanned from the file's bytes straight into CSR (io/raw_tensor.hpp), the path large f16/bf16
// layers take: every half bit pattern read exactly, -0.0 dropped with +0.0, the pattern kept, the same
// matrix as decoding to doubles first (every dtype, C and Fortran order, both byte orders), .npz
// (stored and deflated) and .safetensors, models read layer by layer, and broken half tensors refused
// naming the file and the tensor.
#include "sparsecc/io/raw_tensor.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/random.hpp"
#include "sparsecc/io/load.hpp"
#include "sparsecc/io/npy.hpp"
#include "sparsecc/io/npz.hpp"
#include "sparsecc/io/safetensors.hpp"
#include "sparsecc/model/model.hpp"
#include "test_support.hpp"

namespace sparsecc {
namespace {

using test::expect_input_error;
using test::TempDir;

// A .safetensors file of one tensor from raw little-endian element bytes.
Bytes safetensors_of(const std::string& name, const std::string& tag, std::vector<std::int64_t> shape,
                     const Bytes& data, std::uint64_t span = ~std::uint64_t{0}) {
  if (span == ~std::uint64_t{0}) span = data.size();
  std::string shp;
  for (std::size_t i = 0; i < shape.size(); ++i) shp += (i ? "," : "") + std::to_string(shape[i]);
  const std::string h = "{\"" + name + "\":{\"dtype\":\"" + tag + "\",\"shape\":[" + shp +
                        "],\"data_offsets\":[0," + std::to_string(span) + "]}}";
  Bytes out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<unsigned char>(h.size() >> (8 * i)));
  out.insert(out.end(), h.begin(), h.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

bool half_finite(DType t, std::uint16_t b) {
  return t == DType::f16 ? (b & 0x7c00) != 0x7c00 : (b & 0x7f80) != 0x7f80;
}
double half_value(DType t, std::uint16_t b) {
  return t == DType::f16 ? half_bits_to_double(b) : bf16_bits_to_double(b);
}

// Every bit pattern of a 16-bit type once, as a 256 x 256 matrix in pattern order; NaN and Inf
// patterns replaced by +0 (they are refused), so that every finite value, subnormals and -0.0 among
// them, is in the file.
Bytes every_pattern(DType t) {
  Bytes out;
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const auto bits = static_cast<std::uint16_t>(half_finite(t, static_cast<std::uint16_t>(b)) ? b : 0);
    out.push_back(static_cast<unsigned char>(bits));
    out.push_back(static_cast<unsigned char>(bits >> 8));
  }
  return out;
}

// Checks that `a` holds exactly the patterns of every_pattern(t): nonzero finite ones at their place
// with their exact value, +0, -0 and the replaced NaN/Inf patterns absent.
void expect_every_pattern(const CsrMatrix& a, DType t) {
  ASSERT_EQ(a.rows, 256);
  ASSERT_EQ(a.cols, 256);
  EXPECT_EQ(a.source_dtype, t);
  validate(a);
  std::int64_t expected_nnz = 0, subnormals = 0;
  for (std::int64_t r = 0; r < 256; ++r) {
    std::int64_t k = a.row_ptr[static_cast<std::size_t>(r)];
    for (std::int64_t c = 0; c < 256; ++c) {
      const auto b = static_cast<std::uint16_t>(r * 256 + c);
      if (!half_finite(t, b) || (b & 0x7fff) == 0) continue;  // zeros of the mask (+0, -0)
      ++expected_nnz;
      const double v = half_value(t, b);
      if (std::fabs(v) < (t == DType::f16 ? std::ldexp(1.0, -14) : std::ldexp(1.0, -126))) ++subnormals;
      ASSERT_LT(k, a.row_ptr[static_cast<std::size_t>(r) + 1]) << "row " << r;
      ASSERT_EQ(a.col_idx[static_cast<std::size_t>(k)], c) << "row " << r;
      ASSERT_EQ(a.values[static_cast<std::size_t>(k)], v) << "pattern " << b;
      ++k;
    }
    EXPECT_EQ(k, a.row_ptr[static_cast<std::size_t>(r) + 1]);
  }
  EXPECT_EQ(a.nnz(), expected_nnz);
  EXPECT_EQ(subnormals, 2 * (t == DType::f16 ? 1023 : 127));
}

TEST(RawTensor, EveryHalfBitPatternFromSafetensorsIsReadExactly) {
  TempDir dir;
  for (const auto& [t, tag] : {std::pair{DType::f16, "F16"}, std::pair{DType::bf16, "BF16"}}) {
    SCOPED_TRACE(tag);
    const std::string path = dir.file(std::string(tag) + ".safetensors");
    test::write_bytes(path, safetensors_of("w", tag, {256, 256}, every_pattern(t)));
    expect_every_pattern(load_matrix(path), t);
    expect_every_pattern(load_matrix(path + ":w"), t);
  }
}

TEST(RawTensor, EveryHalfBitPatternFromNpzStoredAndDeflatedIsReadExactly) {
  TempDir dir;
  // The .npz writer stores f16 values bit for bit (-0.0 as 0x8000): the file holds every pattern.
  const Bytes bits = every_pattern(DType::f16);
  Tensor t = test::make_tensor("w", {256, 256}, {}, DType::f16);
  for (std::size_t i = 0; i < 65536; ++i) t.data.push_back(load_le(DType::f16, bits.data() + 2 * i));
  for (const bool compress : {false, true}) {
    SCOPED_TRACE(compress ? "deflated" : "stored");
    const std::string path = dir.file(compress ? "d.npz" : "s.npz");
    write_npz(path, {t}, compress);
    expect_every_pattern(load_matrix(path), DType::f16);
    expect_every_pattern(load_matrix(path + ":w"), DType::f16);
  }
  const std::string npy = dir.file("w.npy");
  write_npy(npy, t);
  expect_every_pattern(load_matrix(npy), DType::f16);
}

TEST(RawTensor, NegativeZeroIsAZeroOfTheMask) {
  TempDir dir;
  // Row 0: -0, 1, +0; row 1: -0, -0, -2 (f16 bits).
  const Bytes data = {0x00, 0x80, 0x00, 0x3c, 0x00, 0x00, 0x00, 0x80, 0x00, 0x80, 0x00, 0xc0};
  const std::string path = dir.file("z.safetensors");
  test::write_bytes(path, safetensors_of("w", "F16", {2, 3}, data));
  const CsrMatrix a = load_matrix(path);
  EXPECT_EQ(a.row_ptr, (std::vector<std::int64_t>{0, 1, 2}));
  EXPECT_EQ(a.col_idx, (std::vector<std::int32_t>{1, 2}));
  EXPECT_EQ(a.values, (std::vector<double>{1.0, -2.0}));
}

// A random tensor of `rows` x `cols` in dtype t (about 30 % nonzero, some rows empty, some -0.0).
Tensor random_tensor(DType t, std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
  SplitMix64 rng(seed);
  Tensor w = test::make_tensor("w", {rows, cols}, {}, t);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::uint64_t u = rng.next();
      double v = 0.0;
      if (r % 5 != 3 && u % 10 < 3)
        v = round_to(t, static_cast<double>(static_cast<std::int64_t>(u >> 40) - (1 << 23)) / 4096.0);
      if (u % 10 == 9) v = -0.0;
      w.data.push_back(v);
    }
  return w;
}

void expect_same(const CsrMatrix& a, const CsrMatrix& b) {
  EXPECT_EQ(a.rows, b.rows);
  EXPECT_EQ(a.cols, b.cols);
  EXPECT_EQ(a.row_ptr, b.row_ptr);
  EXPECT_EQ(a.col_idx, b.col_idx);
  EXPECT_EQ(a.values, b.values);
  EXPECT_EQ(a.source_dtype, b.source_dtype);
}

TEST(RawTensor, SameMatrixAsDecodingFirstInEveryDtypeOrderAndByteOrder) {
  for (const DType t : {DType::f16, DType::bf16, DType::f32, DType::f64}) {
    SCOPED_TRACE(dtype_name(t));
    const Tensor w = random_tensor(t, 37, 53, 7 + static_cast<std::uint64_t>(t));
    const CsrMatrix expected = matrix_from_tensor(w, "x");
    EXPECT_GT(expected.nnz(), 0);
    // safetensors (little-endian, C order)
    const Bytes st = format_safetensors({w});
    const auto raws = parse_safetensors_raw(std::make_shared<const Bytes>(st), "m.safetensors");
    ASSERT_EQ(raws.size(), 1u);
    expect_same(csr_from_raw(raws[0], "m.safetensors"), expected);
    if (t == DType::bf16) continue;  // NumPy has no bfloat16
    // .npy in C and Fortran order
    for (const bool fortran : {false, true}) {
      const Bytes npy = format_npy(w, fortran);
      const RawTensor raw = parse_npy_raw(nullptr, npy, "w.npy");
      EXPECT_EQ(raw.fortran_order, fortran);
      expect_same(csr_from_raw(raw, "w.npy"), expected);
      // the same bytes big-endian: '>' in the header, every element swapped
      Bytes be = npy;
      const std::string header(be.begin(), be.begin() + static_cast<std::ptrdiff_t>(raw.data_byte));
      const auto at = header.find("'<f");
      ASSERT_NE(at, std::string::npos);
      be[at + 1] = '>';
      const std::size_t size = dtype_size(t);
      for (std::size_t i = static_cast<std::size_t>(raw.data_byte); i < be.size(); i += size)
        std::reverse(be.begin() + static_cast<std::ptrdiff_t>(i),
                     be.begin() + static_cast<std::ptrdiff_t>(i + size));
      const RawTensor swapped = parse_npy_raw(nullptr, be, "w.npy");
      EXPECT_TRUE(swapped.big_endian);
      expect_same(csr_from_raw(swapped, "w.npy"), expected);
    }
  }
}

TEST(RawTensor, NonFiniteHalfValuesNameTheFileTensorIndexAndByte) {
  TempDir dir;
  for (const bool fortran : {false, true}) {
    Tensor w = test::make_tensor("layer.weight", {3, 4}, std::vector<double>(12, 0.5), DType::f16);
    const Bytes npy = format_npy(w, fortran);
    Bytes bad = npy;
    const RawTensor raw = parse_npy_raw(nullptr, npy, "m.npy", "layer.weight");
    // C index 6 (row 1, column 2): file index 6 in C order, 2 * 3 + 1 = 7 in Fortran order.
    const std::size_t file_index = fortran ? 7 : 6;
    bad[static_cast<std::size_t>(raw.data_byte) + 2 * file_index + 1] = 0x7c;  // +Inf (0x7c00)
    bad[static_cast<std::size_t>(raw.data_byte) + 2 * file_index] = 0x00;
    const std::string path = dir.file(fortran ? "f.npy" : "c.npy");
    test::write_bytes(path, bad);
    const std::string byte = std::to_string(raw.data_byte + 2 * static_cast<std::int64_t>(file_index));
    expect_input_error([&] { load_matrix(path); }, {path, "flat index 6", "+Inf", byte});
    expect_input_error([&] { check_raw_finite(read_npy_raw(path), path); }, {path, "flat index 6", byte});
  }
  // bf16 NaN in a safetensors file, the tensor named.
  Bytes data(2 * 6, 0);
  data[2 * 4] = 0xc1, data[2 * 4 + 1] = 0x7f;  // 0x7fc1: NaN
  const std::string path = dir.file("n.safetensors");
  test::write_bytes(path, safetensors_of("fc.weight", "BF16", {2, 3}, data));
  expect_input_error([&] { load_matrix(path); }, {path, "fc.weight", "flat index 4", "NaN"});
  expect_input_error([&] { load_matrix(path + ":fc.weight"); }, {path, "fc.weight", "flat index 4", "NaN"});
}

TEST(RawTensor, MalformedOrTruncatedHalfTensorsAreRefusedNamingFileAndTensor) {
  TempDir dir;
  const Bytes data(2 * 16, 0x3c);
  // data_offsets span 30 bytes for a 4 x 4 F16 tensor (32 needed)
  const std::string short_span = dir.file("short.safetensors");
  test::write_bytes(short_span, safetensors_of("w", "F16", {4, 4}, Bytes(data.begin(), data.end() - 2)));
  expect_input_error([&] { load_matrix(short_span); }, {short_span, "'w'", "needs 32 bytes"});
  // the header claims 32 bytes, the file ends after 20
  const std::string cut = dir.file("cut.safetensors");
  test::write_bytes(cut, safetensors_of("w", "BF16", {4, 4}, Bytes(data.begin(), data.begin() + 20), 32));
  expect_input_error([&] { load_matrix(cut + ":w"); }, {cut, "'w'", "outside the 20 byte data buffer"});
  // a .npy (and the same as an .npz member) whose data stops short of its shape
  Tensor w = test::make_tensor("w", {4, 4}, std::vector<double>(16, 1.0), DType::f16);
  Bytes npy = format_npy(w);
  npy.resize(npy.size() - 3);
  const std::string npy_path = dir.file("w.npy");
  test::write_bytes(npy_path, npy);
  expect_input_error([&] { load_matrix(npy_path); }, {npy_path, "'w'", "needs 32 bytes of data, 29 present"});
  // a truncated .npz archive (stored and deflated)
  for (const bool compress : {false, true}) {
    Bytes npz = format_npz({w}, compress);
    npz.resize(npz.size() - 30);
    const std::string p = dir.file(compress ? "d.npz" : "s.npz");
    test::write_bytes(p, npz);
    expect_input_error([&] { load_matrix(p + ":w"); }, {p});
  }
  // a deflated member whose data is corrupt: the CRC check names the member
  Bytes npz = format_npz({random_tensor(DType::f16, 64, 64, 3)}, true);
  npz[60] ^= 0x55;
  const std::string corrupt = dir.file("corrupt.npz");
  test::write_bytes(corrupt, npz);
  expect_input_error([&] { load_matrix(corrupt + ":w"); }, {corrupt, "'w'"});
  // a rank-3 half tensor is no matrix
  const std::string cube = dir.file("cube.safetensors");
  test::write_bytes(cube, safetensors_of("c", "F16", {2, 2, 4}, data));
  expect_input_error([&] { load_matrix(cube + ":c"); }, {cube, "'c'", "not a matrix"});
}

TEST(RawTensor, ModelsOfHalfLayersAreReadLayerByLayer) {
  TempDir dir;
  std::vector<Tensor> tensors;
  std::vector<CsrMatrix> expected;
  const std::vector<std::pair<std::int64_t, std::int64_t>> shapes = {{48, 40}, {40, 64}, {64, 24}};
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    for (const DType t : {DType::f16, DType::bf16}) {
      Tensor w =
          random_tensor(t, shapes[i].first, shapes[i].second, 100 + i + 10 * static_cast<std::uint64_t>(t));
      w.name = std::string(t == DType::f16 ? "h" : "b") + std::to_string(i) + ".weight";
      expected.push_back(matrix_from_tensor(w, "x"));
      tensors.push_back(w);
      Tensor bias = test::make_tensor(std::string(t == DType::f16 ? "h" : "b") + std::to_string(i) + ".bias",
                                      {shapes[i].first}, {}, t);
      for (std::int64_t r = 0; r < shapes[i].first; ++r) bias.data.push_back(0.25 * static_cast<double>(r));
      tensors.push_back(bias);
    }
  }
  const std::string st = dir.file("m.safetensors");
  write_safetensors(st, tensors);
  const ModelContents m = read_model(st, {.select = "", .max_density = 1.0});
  ASSERT_EQ(m.layers.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE(m.layers[i].name);
    expect_same(m.layers[i].a, expected[i]);
    EXPECT_EQ(m.layers[i].bias.size(), static_cast<std::size_t>(expected[i].rows));
    EXPECT_EQ(m.layers[i].bias.back(), 0.25 * static_cast<double>(expected[i].rows - 1));
  }
  // the f16 layers as an .npz, stored and deflated
  std::vector<Tensor> halves;
  for (const Tensor& t : tensors)
    if (t.dtype == DType::f16) halves.push_back(t);
  for (const bool compress : {false, true}) {
    const std::string npz = dir.file(compress ? "d.npz" : "s.npz");
    write_npz(npz, halves, compress);
    const ModelContents n = read_model(npz, {.select = "", .max_density = 1.0});
    ASSERT_EQ(n.layers.size(), 3u);
    for (std::size_t i = 0; i < 3; ++i) expect_same(n.layers[i].a, expected[2 * i]);
  }
  // a NaN in a half layer is refused naming the file and the tensor
  const std::string bad = dir.file("bad.safetensors");
  Bytes f16 = Bytes(2 * 48 * 40, 0);
  f16[2 * 7] = 0x00, f16[2 * 7 + 1] = 0x7e;  // 0x7e00: NaN
  test::write_bytes(bad, safetensors_of("h0.weight", "F16", {48, 40}, f16));
  expect_input_error([&] { read_model(bad, {.select = "", .max_density = 1.0}); },
                     {bad, "h0.weight", "flat index 7"});
}

TEST(RawTensor, ProgressOnlyForReadsLongerThanASecond) {
  TempDir dir;
  const std::string path = dir.file("w.safetensors");
  test::write_bytes(path, safetensors_of("w", "F16", {256, 256}, every_pattern(DType::f16)));
  int calls = 0;
  LoadOptions options;
  options.progress = [&](const std::string&, double, double) { ++calls; };
  load_matrix(path, options);
  EXPECT_EQ(calls, 0);  // milliseconds: no line

  std::vector<std::pair<std::string, double>> seen;
  double first_left = -1;
  {
    ProgressClock clock(
        [&](const std::string& step, double f, double left) {
          if (seen.empty()) first_left = left;
          seen.emplace_back(step, f);
        },
        "read x");
    clock.at(0.1);
    clock.at(0.5);
    EXPECT_TRUE(seen.empty());
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
    clock.at(0.6);  // past a second: the start line, 0.4 left at 0.5 a second or so
    clock.at(0.8);
  }  // finished: the end
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0], (std::pair<std::string, double>{"read x", 0.0}));
  EXPECT_GT(first_left, 0.5);
  EXPECT_LT(first_left, 5.0);
  EXPECT_EQ(seen[1].second, 0.8);
  EXPECT_EQ(seen[2].second, 1.0);
}

}  // namespace
}  // namespace sparsecc
