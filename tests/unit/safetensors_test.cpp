// safetensors reader and writer: every dtype, header validation with byte offsets, overlap and size
// checks, round trips (f16/bf16 exact) and gzip transparency.
#include "sparsecc/io/safetensors.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "sparsecc/common/error.hpp"
#include "sparsecc/io/load.hpp"
#include "test_support.hpp"

namespace sparsecc {
namespace {

Bytes st(const std::string& header, const Bytes& data, std::uint64_t declared = ~std::uint64_t{0}) {
  const std::uint64_t n = declared == ~std::uint64_t{0} ? header.size() : declared;
  Bytes out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<unsigned char>(n >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

Bytes encode(DType t, const std::vector<double>& v) {
  Bytes out(v.size() * dtype_size(t));
  for (std::size_t i = 0; i < v.size(); ++i) store_le(t, v[i], out.data() + i * dtype_size(t));
  return out;
}

Bytes cat(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(Safetensors, ReadsEveryDtypeInHeaderOrder) {
  const std::vector<double> v = {1.0, -2.5, 0.0078125, 3.0};
  const std::string h = R"({"w32": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},)"
                        R"( "__metadata__": {"format": "pt"},)"
                        R"( "b16": {"dtype": "BF16", "shape": [4], "data_offsets": [16, 24]},)"
                        R"( "h16": {"dtype": "F16", "shape": [1, 4, 1], "data_offsets": [24, 32]},)"
                        R"( "d64": {"dtype": "F64", "shape": [4], "data_offsets": [32, 64]},)"
                        R"( "empty": {"dtype": "F32", "shape": [0, 3], "data_offsets": [64, 64]},)"
                        R"( "scalar": {"dtype": "F64", "shape": [], "data_offsets": [64, 72]}}   )";
  const Bytes data = cat(cat(cat(cat(encode(DType::f32, v), encode(DType::bf16, v)), encode(DType::f16, v)),
                             encode(DType::f64, v)),
                         encode(DType::f64, {42}));
  const Bytes f = st(h, data);
  EXPECT_EQ(list_safetensors(f, "m.safetensors"),
            (std::vector<std::string>{"w32", "b16", "h16", "d64", "empty", "scalar"}));
  const auto all = parse_safetensors(f, "m.safetensors");
  ASSERT_EQ(all.size(), 6u);
  const DType types[] = {DType::f32, DType::bf16, DType::f16, DType::f64};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(all[static_cast<std::size_t>(i)].dtype, types[i]);
    EXPECT_EQ(all[static_cast<std::size_t>(i)].data, v);
  }
  EXPECT_EQ(all[2].shape, (std::vector<std::int64_t>{1, 4, 1}));
  EXPECT_EQ(all[4].numel(), 0);
  EXPECT_EQ(parse_safetensors_tensor(f, "m.safetensors", "scalar").data, (std::vector<double>{42}));
  test::expect_input_error(
      [&] { parse_safetensors_tensor(f, "m.safetensors", "nope"); },
      {"m.safetensors: tensor 'nope': not in the file (available: w32, b16, h16, d64, empty, scalar)"});
}

TEST(Safetensors, RoundTripIsExact) {
  std::vector<Tensor> in(4);
  const DType types[] = {DType::f16, DType::bf16, DType::f32, DType::f64};
  for (int i = 0; i < 4; ++i) {
    Tensor& t = in[static_cast<std::size_t>(i)];
    t.name = "t" + std::to_string(i);
    t.dtype = types[i];
    t.shape = {3, 5};
    unsigned char buf[8];
    for (int k = 0; k < 15; ++k) {
      store_le(t.dtype, std::ldexp(k * 0.37 - 2.1, k - 7), buf);
      t.data.push_back(load_le(t.dtype, buf));
    }
  }
  const Bytes f = format_safetensors(in);
  EXPECT_EQ((f[0] | (f[1] << 8)) % 8, 0);
  const auto out = parse_safetensors(f, "r.safetensors");
  ASSERT_EQ(out.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(out[i].name, in[i].name);
    EXPECT_EQ(out[i].dtype, in[i].dtype);
    EXPECT_EQ(out[i].shape, in[i].shape);
    EXPECT_EQ(out[i].data, in[i].data);
  }
  EXPECT_TRUE(parse_safetensors(format_safetensors({}), "e.safetensors").empty());
  EXPECT_THROW(format_safetensors({in[0], in[0]}), UsageError);
  in[1].name = "__metadata__";
  EXPECT_THROW(format_safetensors(in), UsageError);
}

TEST(Safetensors, FilesAndGzip) {
  test::TempDir dir;
  Tensor t;
  t.name = "w";
  t.dtype = DType::bf16;
  t.shape = {2};
  t.data = {1.5, -3};
  for (const std::string name : {"m.safetensors", "m.safetensors.gz"}) {
    write_safetensors(dir.file(name), {t});
    EXPECT_EQ(list_safetensors(dir.file(name)), (std::vector<std::string>{"w"}));
    EXPECT_EQ(read_safetensors_tensor(dir.file(name), "w").data, t.data);
    EXPECT_EQ(read_safetensors(dir.file(name)).size(), 1u);
  }
  EXPECT_TRUE(is_gzip(read_file(dir.file("m.safetensors.gz"))));
}

TEST(Safetensors, HeaderErrors) {
  const auto parse = [](Bytes b) { return [b] { parse_safetensors(b, "m.safetensors"); }; };
  const Bytes d8 = encode(DType::f32, {1, 2});
  const auto one = [](const std::string& entry) { return std::string(R"({"w": )") + entry + "}"; };
  test::expect_input_error(parse({1, 2, 3}), {"m.safetensors: byte 0: 3 bytes is too short"});
  test::expect_input_error(parse(st("{}", {}, 200'000'000)), {"byte 0", "exceeds the 100000000 byte limit"});
  test::expect_input_error(parse(st("{}", {}, 50)),
                           {"byte 0", "header length 50 exceeds the 2 bytes after it"});
  test::expect_input_error(
      parse(st(R"({"w": })", {})),
      {"m.safetensors: byte 14: header JSON: parse error at line 1, column 7: syntax error"});
  test::expect_input_error(parse(st("[1, 2]", {})), {"byte 8", "must be an object"});
  test::expect_input_error(parse(st(R"({"w": 1e999})", {})), {"byte 8: header JSON: number overflow"});
  test::expect_input_error(
      parse(st(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "w": 1})", d8)),
      {"tensor 'w'", "duplicate header key"});
  test::expect_input_error(
      parse(st(one(R"({"dtype": "I64", "shape": [1], "data_offsets": [0, 8]})"), d8)),
      {"m.safetensors: tensor 'w': byte 8: unsupported dtype 'I64' (expected F16, BF16, F32 or F64)"});
  test::expect_input_error(parse(st(one(R"({"shape": [1], "data_offsets": [0, 8]})"), d8)),
                           {"'dtype' missing"});
  test::expect_input_error(parse(st(one(R"({"dtype": "F32", "shape": [-1], "data_offsets": [0, 8]})"), d8)),
                           {"tensor 'w'", "shape entry -1 is not an integer"});
  test::expect_input_error(parse(st(one(R"({"dtype": "F32", "shape": [1.5], "data_offsets": [0, 8]})"), d8)),
                           {"shape entry 1.5"});
  test::expect_input_error(
      parse(st(one(R"({"dtype": "F32", "shape": [1, 1, 1, 1, 2], "data_offsets": [0, 8]})"), d8)),
      {"5 dimensions"});
  test::expect_input_error(parse(st(one(R"({"dtype": "F32", "shape": [2], "data_offsets": [0, 16]})"), d8)),
                           {"tensor 'w'", "data_offsets [0,16] outside the 8 byte data buffer"});
  test::expect_input_error(parse(st(one(R"({"dtype": "F32", "shape": [2], "data_offsets": [8, 0]})"), d8)),
                           {"outside"});
  test::expect_input_error(parse(st(one(R"({"dtype": "F32", "shape": [2], "data_offsets": [0]})"), d8)),
                           {"[begin, end]"});
  test::expect_input_error(parse(st(one(R"({"dtype": "F32", "shape": [3], "data_offsets": [0, 8]})"), d8)),
                           {"shape (3,) of F32 needs 12 bytes, data_offsets [0,8] span 8"});
  test::expect_input_error(
      parse(st(
          one(R"({"dtype": "F32", "shape": [2147483647, 2147483647, 2147483647], "data_offsets": [0, 8]})"),
          d8)),
      {"too many elements"});
  test::expect_input_error(parse(st(R"({"__metadata__": {"a": 1}})", {})),
                           {"__metadata__ value of 'a' is not a string"});
  const std::string overlap = R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
                              R"( "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})";
  test::expect_input_error(
      parse(st(overlap, d8)),
      {"tensor 'b'", "byte " + std::to_string(8 + overlap.size() + 4), "data overlaps tensor 'a'"});
}

TEST(Safetensors, OtherDtypesAreLaidOutButNotRead) {
  // A checkpoint with an int64 step counter and a boolean mask beside a float weight.
  const std::string h = R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
                        R"( "step": {"dtype": "I64", "shape": [], "data_offsets": [8, 16]},)"
                        R"( "mask": {"dtype": "BOOL", "shape": [3], "data_offsets": [16, 19]}})";
  Bytes data = encode(DType::f32, {1, 2});
  data.resize(19, 1);
  const Bytes f = st(h, data);
  EXPECT_EQ(list_safetensors(f, "m.safetensors"), (std::vector<std::string>{"w", "step", "mask"}));
  EXPECT_EQ(parse_safetensors_tensor(f, "m.safetensors", "w").data, (std::vector<double>{1, 2}));
  test::expect_input_error([&] { parse_safetensors_tensor(f, "m.safetensors", "step"); },
                           {"m.safetensors: tensor 'step': byte 8: unsupported dtype 'I64'"});
  test::expect_input_error([&] { parse_safetensors(f, "m.safetensors"); }, {"tensor 'step'", "'I64'"});
  const auto all = parse_safetensors(f, "m.safetensors", true);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_TRUE(all[0].unread_dtype.empty());
  EXPECT_EQ(all[1].unread_dtype, "I64");
  EXPECT_TRUE(all[1].data.empty());
  EXPECT_EQ(all[2].unread_dtype, "BOOL");
  EXPECT_EQ(all[2].shape, (std::vector<std::int64_t>{3}));
  // Their sizes are checked like any other's.
  const std::string wrong = R"({"step": {"dtype": "I64", "shape": [2], "data_offsets": [0, 8]}})";
  test::expect_input_error([&] { parse_safetensors(st(wrong, Bytes(8, 0)), "m.safetensors", true); },
                           {"tensor 'step'", "shape (2,) of I64 needs 16 bytes, data_offsets [0,8] span 8"});
}

TEST(Safetensors, UnnamedSelectionIgnoresTensorsItCannotRead) {
  const std::string h = R"({"w": {"dtype": "F32", "shape": [2, 1], "data_offsets": [0, 8]},)"
                        R"( "step": {"dtype": "I64", "shape": [], "data_offsets": [8, 16]}})";
  Bytes data = encode(DType::f32, {1, 2});
  data.resize(16, 0);
  test::TempDir dir;
  test::write_bytes(dir.file("m.safetensors"), st(h, data));
  EXPECT_EQ(load_matrix(dir.file("m.safetensors")).nnz(), 2);
  EXPECT_EQ(load_tensor(dir.file("m.safetensors")).name, "w");
}

TEST(Safetensors, NonFiniteValuesNameTheFlatIndex) {
  const std::string h = R"({"w": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]}})";
  const Bytes data = encode(DType::bf16, {1, 2, std::numeric_limits<double>::quiet_NaN(), 4});
  test::expect_input_error([&] { parse_safetensors(st(h, data), "m.safetensors"); },
                           {"m.safetensors: tensor 'w': byte " + std::to_string(8 + h.size() + 4) +
                            ": value at flat index 2 is NaN"});
}

}  // namespace
}  // namespace sparsecc
