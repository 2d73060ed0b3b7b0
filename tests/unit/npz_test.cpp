// .npz reader and writer: stored and deflated archives, hand-built zip fixtures for each error path,
// gzip transparency, and every tensor of the real SparseRT archives.
#include "sparsecc/io/npz.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>

#include "sparsecc/common/dtype.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/io/load.hpp"
#include "sparsecc/io/npy.hpp"
#include "test_support.hpp"

namespace sparsecc {
namespace {

std::uint32_t crc32(const Bytes& d) {
  std::uint32_t c = 0xffffffffu;
  for (unsigned char b : d) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  return ~c;
}

struct ZipEntry {
  std::string name;
  Bytes data;               // stored as is
  std::uint16_t flags = 0;  // bit 0: encrypted
  std::uint16_t method = 0;
  bool bad_crc = false;
  std::uint32_t declared = 0;  // when nonzero, the uncompressed size the headers claim
  std::int64_t crc = -1;       // when not negative, the CRC the headers give (that of deflated data)
};

// A minimal zip archive (local headers, central directory, end record) around `entries`.
Bytes make_zip(const std::vector<ZipEntry>& entries) {
  Bytes out, cd;
  auto put = [](Bytes& b, std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) b.push_back(static_cast<unsigned char>(v >> (8 * i)));
  };
  for (const auto& e : entries) {
    const std::uint32_t crc =
        (e.crc >= 0 ? static_cast<std::uint32_t>(e.crc) : crc32(e.data)) ^ (e.bad_crc ? 1u : 0u);
    const std::size_t offset = out.size();
    for (Bytes* b : {&out, &cd}) {
      put(*b, b == &out ? 0x04034b50 : 0x02014b50, 4);
      if (b == &cd) put(*b, 20, 2);
      put(*b, 20, 2);
      put(*b, e.flags, 2);
      put(*b, e.method, 2);
      put(*b, 0x00210000, 4);  // time 00:00, date 1980-01-01
      put(*b, crc, 4);
      put(*b, e.data.size(), 4);
      put(*b, e.declared ? e.declared : e.data.size(), 4);
      put(*b, e.name.size(), 2);
      put(*b, 0, 2);
      if (b == &cd) {
        put(*b, 0, 6);  // comment length, disk, internal attributes
        put(*b, 0, 4);  // external attributes
        put(*b, offset, 4);
      }
      b->insert(b->end(), e.name.begin(), e.name.end());
    }
    out.insert(out.end(), e.data.begin(), e.data.end());
  }
  const std::size_t cd_offset = out.size();
  out.insert(out.end(), cd.begin(), cd.end());
  put(out, 0x06054b50, 4);
  put(out, 0, 4);
  put(out, entries.size(), 2);
  put(out, entries.size(), 2);
  put(out, cd.size(), 4);
  put(out, cd_offset, 4);
  put(out, 0, 2);
  return out;
}

TEST(Npz, StoredAndDeflatedRoundTrip) {
  const std::vector<Tensor> in = {test::make_tensor("fc1", {2, 3}, {1, 0, 0, 0, -2, 0.5}),
                                  test::make_tensor("fc1_bias", {2}, {0.25, -0.125}, DType::f64),
                                  test::make_tensor("half", {2, 2}, {1, 2, 65504, -0.0009765625}, DType::f16),
                                  test::make_tensor("sub/scalar", {}, {3})};
  for (bool compress : {false, true}) {
    const Bytes z = format_npz(in, compress);
    EXPECT_EQ(list_npz(z, "m.npz"), (std::vector<std::string>{"fc1", "fc1_bias", "half", "sub/scalar"}));
    const auto out = parse_npz(z, "m.npz");
    ASSERT_EQ(out.size(), in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
      EXPECT_EQ(out[i].name, in[i].name);
      EXPECT_EQ(out[i].dtype, in[i].dtype);
      EXPECT_EQ(out[i].shape, in[i].shape);
      EXPECT_EQ(out[i].data, in[i].data);
    }
    EXPECT_EQ(parse_npz_tensor(z, "m.npz", "half").data, in[2].data);
  }
  // Deterministic output, and deflate actually compresses.
  std::vector<Tensor> zeros = {test::make_tensor("z", {64, 64}, std::vector<double>(4096, 0.0))};
  EXPECT_EQ(format_npz(zeros, true), format_npz(zeros, true));
  EXPECT_LT(format_npz(zeros, true).size(), format_npz(zeros, false).size() / 10);
  EXPECT_TRUE(parse_npz(format_npz({}, false), "e.npz").empty());
}

TEST(Npz, FilesAndGzip) {
  test::TempDir dir;
  const std::vector<Tensor> in = {test::make_tensor("a", {1, 2}, {1, 2}),
                                  test::make_tensor("b", {3}, {4, 5, 6})};
  for (const std::string name : {"w.npz", "w.npz.gz"}) {
    write_npz(dir.file(name), in, true);
    EXPECT_EQ(list_npz(dir.file(name)), (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(read_npz_tensor(dir.file(name), "b").data, in[1].data);
    EXPECT_EQ(read_npz(dir.file(name)).size(), 2u);
  }
  EXPECT_TRUE(is_gzip(read_file(dir.file("w.npz.gz"))));
  EXPECT_THROW(format_npz({in[0], in[0]}, false), UsageError);
  EXPECT_THROW(format_npz({test::make_tensor("", {1}, {1})}, false), UsageError);
}

// Raw deflate data (what a zip entry of method 8 holds): gzip's stream without its header and trailer.
Bytes deflate_raw(const Bytes& data) {
  const Bytes z = gzip(data);
  return Bytes(z.begin() + 10, z.end() - 8);
}

TEST(Npz, LyingEntrySizesCostNoMemory) {
  // 1 MiB of incompressible bytes, claimed to expand to 1 GiB: within deflate's ratio, but past what
  // an archive of this size may expand to. Refused before anything is read or allocated.
  Bytes noise(std::size_t{1} << 20);
  std::uint64_t x = 88172645463325252ull;
  for (auto& b : noise) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    b = static_cast<unsigned char>(x);
  }
  const Bytes packed = deflate_raw(noise);
  ZipEntry lie{"w.npy", packed, 0, 8, false, std::uint32_t{1} << 30};
  test::expect_input_error([&] { parse_npz(make_zip({lie}), "m.npz"); },
                           {"m.npz: tensor 'w'", "deflated entry of 1073741824 bytes",
                            "decompresses to more than 67108864 bytes", "numpy.savez"});
  // A lie within the limit fails on the data that is actually there.
  lie.declared = std::uint32_t{32} << 20;
  test::expect_input_error([&] { parse_npz(make_zip({lie}), "m.npz"); }, {"m.npz: tensor 'w'"});
  // Deflated entries share the archive's limit: two of 32 MiB each pass alone, not together.
  std::vector<double> sparse(std::size_t{8} << 20, 0.0);
  for (std::size_t i = 0; i < sparse.size(); i += 97) sparse[i] = 1.0;
  const Bytes payload = format_npy(test::make_tensor("z", {8 << 20}, sparse));
  const Bytes packed_zeros = deflate_raw(payload);
  const auto size = static_cast<std::uint32_t>(payload.size());
  const std::int64_t crc = crc32(payload);
  const Bytes two = make_zip(
      {{"a.npy", packed_zeros, 0, 8, false, size, crc}, {"b.npy", packed_zeros, 0, 8, false, size, crc}});
  ASSERT_LT(two.size(), std::size_t{1} << 20);
  EXPECT_EQ(parse_npz_tensor(two, "m.npz", "b").data, sparse);
  test::expect_input_error([&] { parse_npz(two, "m.npz"); },
                           {"m.npz: tensor 'b'", "decompresses to more than 67108864 bytes"});
}

TEST(Npz, MissingTensorListsTheAvailableOnes) {
  const Bytes z = format_npz({test::make_tensor("a", {1}, {1}), test::make_tensor("b", {1}, {2})}, false);
  test::expect_input_error([&] { parse_npz_tensor(z, "m.npz", "c"); },
                           {"m.npz: tensor 'c': not in the archive (available: a, b)"});
}

// A .npy payload of `t` (float64) relabelled as dtype `descr` of the same 8-byte width ("<i8", "<u8",
// "<c8"): a well-formed tensor of a dtype the reader does not decode.
Bytes relabelled_npy(const Tensor& t, const std::string& descr) {
  Bytes b = format_npy(t);
  const std::string from = "'<f8'";
  const auto at = std::search(b.begin(), b.end(), from.begin(), from.end());
  EXPECT_NE(at, b.end());
  std::copy(descr.begin(), descr.end(), at + 1);
  return b;
}

// The same for a descr of any length: the header is rebuilt with its length field and padding.
Bytes redescribed_npy(const Tensor& t, const std::string& descr) {
  const Bytes b = format_npy(t);
  const std::size_t len = b[8] | (b[9] << 8);
  std::string header(b.begin() + 10, b.begin() + 10 + static_cast<std::ptrdiff_t>(len));
  header.replace(header.find("'<f8'"), 5, "'" + descr + "'");
  while (!header.empty() && (header.back() == '\n' || header.back() == ' ')) header.pop_back();
  header += ' ';
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  Bytes out(b.begin(), b.begin() + 8);
  out.push_back(static_cast<unsigned char>(header.size() & 0xff));
  out.push_back(static_cast<unsigned char>(header.size() >> 8));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), b.begin() + 10 + static_cast<std::ptrdiff_t>(len), b.end());
  return out;
}

TEST(Npz, OtherDtypesAreKeptUnreadOnRequest) {
  const Bytes w = format_npy(test::make_tensor("w", {2, 2}, {1, 0, 0, 2}));
  const Bytes steps = relabelled_npy(test::make_tensor("s", {}, {0}, DType::f64), "<i8");
  const Bytes mask = relabelled_npy(test::make_tensor("m", {3}, {0, 0, 0}, DType::f64), "<c8");
  const Bytes z = make_zip({{"w.npy", w}, {"step.npy", steps}, {"mask.npy", mask}});
  test::expect_input_error(
      [&] { parse_npz(z, "m.npz"); },
      {"m.npz: tensor 'step'", "unsupported dtype '<i8' (expected float16, float32 or float64)"});
  EXPECT_EQ(parse_npz_tensor(z, "m.npz", "w").data, (std::vector<double>{1, 0, 0, 2}));
  const auto all = parse_npz(z, "m.npz", true);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_TRUE(all[0].unread_dtype.empty());
  EXPECT_EQ(all[1].unread_dtype, "<i8");
  EXPECT_TRUE(all[1].shape.empty());
  EXPECT_TRUE(all[1].data.empty());
  EXPECT_EQ(all[2].unread_dtype, "<c8");
  EXPECT_EQ(all[2].shape, (std::vector<std::int64_t>{3}));
  // Kept unread, the data size is still checked against the dtype's width.
  Bytes cut = steps;
  cut.pop_back();
  test::expect_input_error(
      [&] {
        parse_npz(make_zip({{"step.npy", cut}}), "m.npz", true);
      },
      {"tensor 'step'", "shape () needs 8 bytes of data, 7 present"});
  // Datetimes and timedeltas (8 bytes, a unit) are kept unread with their size checked; object
  // arrays (a pickle of unknown length) are kept unread and never unpickled; without keep_unread
  // both are errors, and so are malformed units.
  const Bytes when = redescribed_npy(test::make_tensor("t", {2}, {0, 0}, DType::f64), "<M8[D]");
  const Bytes span = redescribed_npy(test::make_tensor("d", {1}, {0}, DType::f64), "<m8");
  Bytes object = redescribed_npy(test::make_tensor("o", {1}, {0}, DType::f64), "|O");
  object.insert(object.end(), {0x80, 0x02, ']', '.'});  // a pickle's bytes: a different length
  const auto kept = parse_npz(
      make_zip({{"w.npy", w}, {"when.npy", when}, {"span.npy", span}, {"o.npy", object}}), "m.npz", true);
  ASSERT_EQ(kept.size(), 4u);
  EXPECT_EQ(kept[1].unread_dtype, "<M8[D]");
  EXPECT_EQ(kept[1].shape, (std::vector<std::int64_t>{2}));
  EXPECT_EQ(kept[2].unread_dtype, "<m8");
  EXPECT_EQ(kept[3].unread_dtype, "|O");
  EXPECT_TRUE(kept[3].data.empty());
  Bytes short_when = when;
  short_when.pop_back();
  test::expect_input_error(
      [&] {
        parse_npz(make_zip({{"when.npy", short_when}}), "m.npz", true);
      },
      {"tensor 'when'", "needs 16 bytes of data, 15 present"});
  test::expect_input_error(
      [&] {
        parse_npz(make_zip({{"when.npy", when}}), "m.npz");
      },
      {"tensor 'when'", "unsupported dtype '<M8[D]'"});
  test::expect_input_error(
      [&] {
        parse_npz(make_zip({{"o.npy", object}}), "m.npz");
      },
      {"tensor 'o'", "unsupported dtype '|O'"});
  // Bad units are not a dtype: an empty one, one of other characters, none after the width.
  for (const char* bad : {"<M8[]", "<M8[-s]", "<M[D]", "<M8[D"}) {
    const Bytes t = redescribed_npy(test::make_tensor("t", {1}, {0}, DType::f64), bad);
    test::expect_input_error(
        [&] {
          parse_npz(make_zip({{"t.npy", t}}), "m.npz", true);
        },
        {"unsupported dtype"});
  }
}

TEST(Npz, UnnamedSelectionIgnoresTensorsItCannotRead) {
  // A checkpoint: a float weight beside an int64 step counter and a 1-D float tensor holding NaN.
  test::TempDir dir;
  const Bytes w = format_npy(test::make_tensor("w", {2, 2}, {1, 0, 0, 2}));
  const Bytes steps = relabelled_npy(test::make_tensor("s", {}, {0}, DType::f64), "<i8");
  Bytes stats = format_npy(test::make_tensor("stats", {2}, {1, 1}, DType::f64));
  store_le(DType::f64, std::numeric_limits<double>::quiet_NaN(), stats.data() + stats.size() - 8);
  test::write_bytes(dir.file("m.npz"), make_zip({{"w.npy", w}, {"step.npy", steps}, {"stats.npy", stats}}));
  const CsrMatrix a = load_matrix(dir.file("m.npz"));
  EXPECT_EQ(a.rows, 2);
  EXPECT_EQ(a.nnz(), 2);
  // Tensors of any rank: 'stats' is a candidate, 'step' is not.
  test::expect_input_error([&] { load_tensor(dir.file("m.npz")); },
                           {"holds 2 tensors", "(candidates: w, stats)"});
  // The chosen tensor must be finite.
  test::write_bytes(dir.file("nan.npz"), make_zip({{"stats.npy", stats}, {"step.npy", steps}}));
  test::expect_input_error([&] { load_tensor(dir.file("nan.npz")); },
                           {"nan.npz: tensor 'stats'", "value at flat index 1 is NaN"});
  // Named, a tensor sparsecc cannot read is still an error naming it.
  test::expect_input_error([&] { load_tensor(dir.file("m.npz:step")); },
                           {"m.npz: tensor 'step'", "unsupported dtype '<i8'"});
}

TEST(Npz, ZipErrors) {
  const Bytes good = format_npy(test::make_tensor("x", {2}, {1, 2}));
  const auto list = [](Bytes b) { return [b] { parse_npz(b, "m.npz"); }; };
  EXPECT_EQ(parse_npz(make_zip({{"x.npy", good}}), "m.npz")[0].data, (std::vector<double>{1, 2}));
  test::expect_input_error(list({}), {"m.npz", "empty file"});
  test::expect_input_error(list({'h', 'e', 'l', 'l', 'o'}),
                           {"m.npz: not a valid zip archive: Not a zip archive"});
  Bytes cut = make_zip({{"x.npy", good}});
  cut.resize(cut.size() - 30);
  test::expect_input_error(list(cut), {"m.npz: not a valid zip archive"});
  test::expect_input_error(list(make_zip({{"readme.txt", good}})), {"entry 'readme.txt' is not a .npy file"});
  test::expect_input_error(list(make_zip({{".npy", good}})), {"entry '.npy' is not a .npy file"});
  test::expect_input_error(list(make_zip({{"x.npy", good}, {"x.npy", good}})),
                           {"m.npz: not a valid zip archive: duplicate entry names (File already exists)"});
  test::expect_input_error(list(make_zip({{"x.npy", good, 1}})), {"m.npz: tensor 'x'", "encrypted"});
  test::expect_input_error(list(make_zip({{"x.npy", good, 0, 12}})),
                           {"tensor 'x'", "unsupported compression method 12"});
  test::expect_input_error(list(make_zip({{"x.npy", good, 0, 0, true}})),
                           {"m.npz: tensor 'x': corrupt entry: CRC error"});
  Bytes short_data = good;
  short_data.resize(good.size() - 4);
  test::expect_input_error(list(make_zip({{"x.npy", short_data}})),
                           {"m.npz: tensor 'x': byte 128: shape (2,) needs 8 bytes of data, 4 present"});
}

TEST(Npz, RealSparseRtArchivesLoad) {
  SPARSECC_DATA_OR_SKIP(dir, "sparsert/mobilenet_v1_sparse90.npz");
  const std::map<std::string, std::vector<std::int64_t>> mobilenet = {
      {"contraction_1x1_0", {64, 32}},    {"contraction_1x1_1", {128, 64}},
      {"contraction_1x1_2", {128, 128}},  {"contraction_1x1_3", {256, 128}},
      {"contraction_1x1_4", {256, 256}},  {"contraction_1x1_5", {512, 256}},
      {"contraction_1x1_6", {512, 512}},  {"contraction_1x1_7", {512, 512}},
      {"contraction_1x1_8", {512, 512}},  {"contraction_1x1_9", {512, 512}},
      {"contraction_1x1_10", {512, 512}}, {"contraction_1x1_11", {1024, 512}},
      {"contraction_1x1_0_bias", {64}},   {"contraction_1x1_12_bias", {1024}},
      {"input_image", {32, 112, 112}},    {"result", {64, 12544}}};
  const auto tensors = read_npz(dir.string());
  EXPECT_EQ(tensors.size(), 27u);
  for (const auto& t : tensors) {
    EXPECT_EQ(t.dtype, DType::f32);
    EXPECT_EQ(static_cast<std::int64_t>(t.data.size()), t.numel());
    if (auto it = mobilenet.find(t.name); it != mobilenet.end()) {
      EXPECT_EQ(t.shape, it->second) << t.name;
    }
  }
}

double nonzero_fraction(const Tensor& t) {
  std::size_t nz = 0;
  for (double v : t.data) nz += v != 0.0;
  return static_cast<double>(nz) / static_cast<double>(t.data.size());
}

TEST(Npz, RealResNetFiltersAndFortranTranspose) {
  SPARSECC_DATA_OR_SKIP(dir, "sparsert");
  for (const auto& [file, density] :
       {std::pair{"resnet50_3x3_sparse90.npz", 0.09}, {"resnet50_3x3_sparse95.npz", 0.04}}) {
    const std::string path = (dir / file).string();
    if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " absent";
    std::map<std::string, Tensor> by_name;
    for (auto& t : read_npz(path)) by_name[t.name] = std::move(t);
    ASSERT_EQ(by_name.size(), 7u);
    const std::int64_t channels[] = {64, 128, 256}, hw[] = {56, 28, 14};
    for (int g = 0; g < 3; ++g) {
      const Tensor& f = by_name.at("filter_bg" + std::to_string(g + 1));
      EXPECT_EQ(f.shape, (std::vector<std::int64_t>{channels[g], channels[g] * 9}));
      EXPECT_NEAR(nonzero_fraction(f), density, 0.01) << file << " " << f.name;
      EXPECT_EQ(by_name.at("input_bg" + std::to_string(g + 1)).shape,
                (std::vector<std::int64_t>{channels[g], hw[g], hw[g]}));
    }
    const Tensor& a = by_name.at("filter_bg1");
    const Tensor& at = by_name.at("transposed_filter_bg1");
    ASSERT_EQ(at.shape, (std::vector<std::int64_t>{576, 64}));
    for (std::int64_t r = 0; r < 64; ++r)
      for (std::int64_t c = 0; c < 576; ++c)
        ASSERT_EQ(a.data[static_cast<std::size_t>(r * 576 + c)],
                  at.data[static_cast<std::size_t>(c * 64 + r)])
            << file << " (" << r << ", " << c << ")";
  }
}

}  // namespace
}  // namespace sparsecc
