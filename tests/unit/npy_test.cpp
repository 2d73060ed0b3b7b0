// .npy reader and writer: every dtype and byte order, both memory orders, all header versions,
// hand-built byte fixtures for each error path, and round trips through the writer.
#include "sparsecc/io/npy.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>

#include "sparsecc/common/error.hpp"
#include "test_support.hpp"

namespace sparsecc {
namespace {

// A .npy file: magic, version, header length, the dict padded with spaces to a 64-byte boundary.
Bytes npy(const std::string& dict, const Bytes& data, int major = 1) {
  const std::size_t prefix = major == 1 ? 10 : 12;
  std::string h = dict;
  h.append(63 - (prefix + h.size()) % 64, ' ');
  h.push_back('\n');
  Bytes out = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<unsigned char>(major), 0};
  for (std::size_t i = 0; i < prefix - 8; ++i) out.push_back(static_cast<unsigned char>(h.size() >> (8 * i)));
  out.insert(out.end(), h.begin(), h.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

Bytes encode(DType t, const std::vector<double>& v, bool big_endian = false) {
  const std::size_t n = dtype_size(t);
  Bytes out(v.size() * n);
  for (std::size_t i = 0; i < v.size(); ++i) {
    store_le(t, v[i], out.data() + i * n);
    if (big_endian)
      std::reverse(out.begin() + static_cast<std::ptrdiff_t>(i * n),
                   out.begin() + static_cast<std::ptrdiff_t>((i + 1) * n));
  }
  return out;
}

std::string dict(const std::string& descr, bool fortran, const std::string& shape) {
  return "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
         ", 'shape': " + shape + ", }";
}

TEST(Npy, ReadsFloat32COrder) {
  const Tensor t =
      parse_npy(npy(dict("<f4", false, "(2, 3)"), encode(DType::f32, {1, 2, 3, 4, 5, 6})), "d/w.npy");
  EXPECT_EQ(t.name, "w");
  EXPECT_EQ(t.dtype, DType::f32);
  EXPECT_EQ(t.shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(t.data, (std::vector<double>{1, 2, 3, 4, 5, 6}));
}

TEST(Npy, FortranOrderBecomesCOrder) {
  const Tensor t =
      parse_npy(npy(dict("<f8", true, "(2, 3)"), encode(DType::f64, {1, 4, 2, 5, 3, 6})), "w.npy");
  EXPECT_EQ(t.data, (std::vector<double>{1, 2, 3, 4, 5, 6}));
  // 3-D: element (i, j, k) = 100i + 10j + k sits at i + 2j + 6k in the file.
  std::vector<double> file(24);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) file[static_cast<std::size_t>(i + 2 * j + 6 * k)] = 100 * i + 10 * j + k;
  const Tensor u = parse_npy(npy(dict("<f4", true, "(2, 3, 4)"), encode(DType::f32, file)), "w.npy");
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        EXPECT_EQ(u.data[static_cast<std::size_t>(12 * i + 4 * j + k)], 100 * i + 10 * j + k);
}

TEST(Npy, EveryDtypeAndByteOrder) {
  const std::vector<double> v = {1.0, -2.5, 0.0009765625, 65504.0};
  struct Case {
    const char* descr;
    DType t;
    bool big;
  };
  for (const Case c :
       {Case{"<f2", DType::f16, false}, Case{">f2", DType::f16, true}, Case{"=f4", DType::f32, false},
        Case{"<f4", DType::f32, false}, Case{">f4", DType::f32, true}, Case{"|f8", DType::f64, false},
        Case{"<f8", DType::f64, false}, Case{">f8", DType::f64, true}}) {
    const Tensor t = parse_npy(npy(dict(c.descr, false, "(4,)"), encode(c.t, v, c.big)), "w.npy");
    EXPECT_EQ(t.dtype, c.t) << c.descr;
    EXPECT_EQ(t.data, v) << c.descr;
  }
}

TEST(Npy, AllHeaderVersions) {
  for (int major : {1, 2, 3}) {
    const Tensor t = parse_npy(npy(dict("<f4", false, "(1, 2)"), encode(DType::f32, {7, 8}), major), "w.npy");
    EXPECT_EQ(t.shape, (std::vector<std::int64_t>{1, 2})) << major;
    EXPECT_EQ(t.data, (std::vector<double>{7, 8})) << major;
  }
}

TEST(Npy, HeaderSpellings) {
  const Bytes two = encode(DType::f32, {1, 2});
  for (const std::string d : {"{\"shape\": (2,), \"descr\": \"<f4\", \"fortran_order\": False}",
                              "{'fortran_order':False,'shape':(2,),'descr':'<f4'}",
                              "{ 'descr' : '<f4' , 'fortran_order' : False , 'shape' : ( 2 , ) , }",
                              "{'descr': '<f4', 'fortran_order': False, 'shape': (2L,), }",
                              "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2,), }"}) {
    const Tensor t = parse_npy(npy(d, two), "w.npy");
    EXPECT_EQ(t.data, (std::vector<double>{1, 2})) << d;
  }
  EXPECT_TRUE(parse_npy(npy(dict("<f4", false, "()"), encode(DType::f32, {3})), "w.npy").shape.empty());
  const Tensor empty = parse_npy(npy(dict("<f4", true, "(0, 5)"), {}), "w.npy");
  EXPECT_EQ(empty.numel(), 0);
  const Tensor huge_empty =
      parse_npy(npy(dict("<f8", true, "(2147483647, 2147483647, 2147483647, 0)"), {}), "w.npy");
  EXPECT_TRUE(huge_empty.data.empty());
  EXPECT_EQ(parse_npy(format_npy(huge_empty, true), "w.npy").shape, huge_empty.shape);
  const Tensor four =
      parse_npy(npy(dict("<f2", false, "(1, 2, 1, 2)"), encode(DType::f16, {1, 2, 3, 4})), "w.npy");
  EXPECT_EQ(four.shape.size(), 4u);
}

TEST(Npy, ErrorsNameFileByteAndTensor) {
  const Bytes d8 = encode(DType::f32, {1, 2});
  const auto parse = [](Bytes b) { return [b] { parse_npy(b, "w.npy"); }; };
  test::expect_input_error(parse({'N', 'U', 'M'}), {"w.npy", "tensor 'w'", "byte 0", "not a .npy file"});
  Bytes v4 = npy(dict("<f4", false, "(2,)"), d8);
  v4[6] = 4;
  test::expect_input_error(parse(v4), {"byte 6", "unsupported .npy version 4.0"});
  Bytes cut = npy(dict("<f4", false, "(2,)"), {});
  cut.resize(40);
  test::expect_input_error(parse(cut), {"byte 8", "header length 118 exceeds the 30 bytes present"});
  // {'descr': at 10, the dtype string starts at byte 10 + 10.
  test::expect_input_error(
      parse(npy(dict("<i8", false, "(2,)"), d8)),
      {"w.npy: tensor 'w': byte 20: npy header: unsupported dtype '<i8' (expected float16, float32 "
       "or float64)"});
  test::expect_input_error(parse(npy(dict("<c8", false, "(1,)"), d8)), {"unsupported dtype '<c8'"});
  test::expect_input_error(parse(npy(dict("|O", false, "(1,)"), d8)), {"unsupported dtype '|O'"});
  test::expect_input_error(
      parse(npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", d8)),
      {"structured arrays"});
  test::expect_input_error(parse(npy(dict("<f4", false, "(1, 1, 1, 1, 2)"), d8)), {"more than 4 dimensions"});
  test::expect_input_error(parse(npy(dict("<f4", false, "(2)"), d8)), {"trailing comma"});
  test::expect_input_error(parse(npy(dict("<f4", false, "(-2,)"), d8)), {"non-negative integer"});
  test::expect_input_error(parse(npy(dict("<f4", false, "(99999999999,)"), d8)), {"exceeds the limit"});
  test::expect_input_error(parse(npy(dict("<f4", false, "(2147483647, 2147483647, 2147483647, 4)"), d8)),
                           {"too many elements"});
  test::expect_input_error(parse(npy("{'descr': '<f4', 'shape': (2,), }", d8)), {"lacks 'fortran_order'"});
  test::expect_input_error(
      parse(npy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", d8)),
      {"duplicate header key 'descr'"});
  test::expect_input_error(parse(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", d8)),
                           {"unexpected header key 'x'"});
  test::expect_input_error(parse(npy("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}", d8)),
                           {"True or False"});
  test::expect_input_error(parse(npy(dict("<f4", false, "(2,)") + " x", d8)),
                           {"unexpected text after the header"});
  test::expect_input_error(parse(npy("{'descr: '<f4'}", d8)), {"expected ':'"});
  test::expect_input_error(
      parse(npy(dict("<f4", false, "(64, 32)"), Bytes(100))),
      {"w.npy: tensor 'w': byte 128: shape (64, 32) needs 8192 bytes of data, 100 present"});
  test::expect_input_error(parse(npy(dict("<f4", false, "(1,)"), d8)),
                           {"byte 132", "4 unexpected bytes after the data"});
}

TEST(Npy, NonFiniteValuesNameTheFlatIndex) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  test::expect_input_error(
      [&] {
        parse_npy(npy(dict("<f4", false, "(2, 2)"), encode(DType::f32, {1, 2, 3, nan})), "w.npy");
      },
      {"w.npy: tensor 'w': byte 140: value at flat index 3 is NaN"});
  // Fortran order: C index 1 (row 0, column 1) is the file's element 2.
  test::expect_input_error(
      [&] {
        parse_npy(npy(dict("<f8", true, "(2, 2)"), encode(DType::f64, {1, 2, -inf, 4})), "w.npy");
      },
      {"byte 144", "value at flat index 1 is -Inf"});
  test::expect_input_error(
      [&] {
        parse_npy(npy(dict("<f2", false, "(2,)"), encode(DType::f16, {1, inf})), "w.npy");
      },
      {"flat index 1 is +Inf"});
}

TEST(Npy, RoundTripsEveryDtypeOrderAndVersion) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-100, 100);
  for (DType t : {DType::f16, DType::f32, DType::f64, DType::bf16}) {
    Tensor in;
    in.name = "x";
    in.dtype = t;
    in.shape = {3, 4, 5};
    unsigned char buf[8];
    for (int i = 0; i < 60; ++i) {
      store_le(t, u(rng), buf);  // values representable in t
      in.data.push_back(load_le(t, buf));
    }
    in.data[7] = -0.0;
    for (bool fortran : {false, true})
      for (int major : {1, 2, 3}) {
        const Bytes b = format_npy(in, fortran, major);
        EXPECT_EQ((major == 1 ? 10 + (b[8] | (b[9] << 8)) : 12 + (b[8] | (b[9] << 8))) % 64, 0);
        const Tensor out = parse_npy(b, "x.npy");
        EXPECT_EQ(out.dtype, t == DType::bf16 ? DType::f32 : t);
        EXPECT_EQ(out.shape, in.shape);
        ASSERT_EQ(out.data.size(), in.data.size());
        for (std::size_t i = 0; i < in.data.size(); ++i)
          EXPECT_EQ(std::bit_cast<std::uint64_t>(out.data[i]), std::bit_cast<std::uint64_t>(in.data[i]));
      }
  }
}

TEST(Npy, FilesAndGzip) {
  test::TempDir dir;
  Tensor w;
  w.name = "w";
  w.shape = {2, 2};
  w.data = {1, 0, 0, 0.5};
  for (const std::string name : {"w.npy", "w.npy.gz"}) {
    write_npy(dir.file(name), w, true);
    const Tensor r = read_npy(dir.file(name));
    EXPECT_EQ(r.name, "w");
    EXPECT_EQ(r.data, w.data);
  }
  EXPECT_TRUE(is_gzip(read_file(dir.file("w.npy.gz"))));
  test::expect_input_error([&] { read_npy(dir.file("missing.npy")); }, {"missing.npy", "cannot open"});
}

TEST(Npy, WriterRejectsWhatItCannotStore) {
  Tensor t;
  t.name = "t";
  t.dtype = DType::f16;
  t.shape = {2};
  t.data = {1, 1e6};  // overflows float16
  EXPECT_THROW(format_npy(t), UsageError);
  t.data = {1, std::nan("")};
  t.dtype = DType::f64;
  EXPECT_THROW(format_npy(t), UsageError);
  t.data = {1, 2, 3};
  EXPECT_THROW(format_npy(t), UsageError);
  t.data = {1, 2};
  EXPECT_THROW(format_npy(t, false, 4), UsageError);
}

}  // namespace
}  // namespace sparsecc
