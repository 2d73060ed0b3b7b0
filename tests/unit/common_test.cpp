// The common layer every reader stands on: error locations, dtype conversions, gzip, atomic writes,
// line and number parsing, the seeded generator, and magnitude pruning.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "sparsecc/common/dtype.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/common/file.hpp"
#include "sparsecc/common/random.hpp"
#include "sparsecc/matrix/prune.hpp"
#include "test_support.hpp"

using namespace sparsecc;

namespace {
std::span<const unsigned char> as_bytes(const std::string& s) {
  return {reinterpret_cast<const unsigned char*>(s.data()), s.size()};
}
std::string as_string(const Bytes& b) { return std::string(b.begin(), b.end()); }
}  // namespace

TEST(CommonError, LocationsAreDescribed) {
  EXPECT_EQ(SourceLocation::at_line("a.mtx", 7).describe(), "a.mtx:7");
  EXPECT_EQ(SourceLocation::at_byte("w.npz", 74, "fc1").describe(), "w.npz: tensor 'fc1': byte 74");
  EXPECT_EQ(SourceLocation::in_file("x").describe(), "x");
  try {
    throw_at_line("a.mtx", 3, "bad");
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "a.mtx:3: bad");
    EXPECT_EQ(e.where().line, 3);
    EXPECT_EQ(e.message(), "bad");
  }
}

TEST(CommonDtype, HalfConversionsAreExactAndRoundToNearestEven) {
  EXPECT_EQ(double_to_half_bits(1.0), 0x3c00);
  EXPECT_EQ(double_to_half_bits(-2.0), 0xc000);
  EXPECT_EQ(double_to_half_bits(65504.0), 0x7bff);               // largest finite
  EXPECT_EQ(double_to_half_bits(65520.0), 0x7c00);               // rounds up to infinity
  EXPECT_EQ(double_to_half_bits(std::ldexp(1.0, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(double_to_half_bits(std::ldexp(1.0, -25)), 0x0000);  // tie -> even (zero)
  EXPECT_EQ(double_to_half_bits(3 * std::ldexp(1.0, -25)), 0x0002);
  EXPECT_EQ(double_to_half_bits(1.0 + std::ldexp(1.0, -11)), 0x3c00);                      // tie -> even
  EXPECT_EQ(double_to_half_bits(1.0 + 3 * std::ldexp(1.0, -11)), 0x3c02);                  // tie -> even (up)
  EXPECT_EQ(double_to_half_bits(std::ldexp(1023.0, -24) + std::ldexp(1.0, -25)), 0x0400);  // into normals
  EXPECT_TRUE(std::isnan(half_bits_to_double(double_to_half_bits(std::nan("")))));
  // Every finite half survives a round trip exactly.
  for (std::uint32_t bits = 0; bits < 0x10000; ++bits) {
    const double v = half_bits_to_double(static_cast<std::uint16_t>(bits));
    if (std::isnan(v)) continue;
    ASSERT_EQ(double_to_half_bits(v), bits) << std::hex << bits;
  }
}

TEST(CommonDtype, Bf16ConversionsAreExactAndRoundToNearestEven) {
  EXPECT_EQ(double_to_bf16_bits(1.0), 0x3f80);
  EXPECT_EQ(double_to_bf16_bits(1.0 + std::ldexp(1.0, -8)), 0x3f80);      // tie -> even
  EXPECT_EQ(double_to_bf16_bits(1.0 + 3 * std::ldexp(1.0, -8)), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(double_to_bf16_bits(1e39), 0x7f80);
  for (std::uint32_t bits = 0; bits < 0x10000; ++bits) {
    const double v = bf16_bits_to_double(static_cast<std::uint16_t>(bits));
    if (std::isnan(v)) continue;
    ASSERT_EQ(double_to_bf16_bits(v), bits) << std::hex << bits;
  }
}

TEST(CommonDtype, LittleEndianLoadStoreRoundTrips) {
  unsigned char buf[8];
  for (DType t : {DType::f16, DType::bf16, DType::f32, DType::f64}) {
    store_le(t, -1.5, buf);
    EXPECT_EQ(load_le(t, buf), -1.5) << dtype_name(t);
    EXPECT_EQ(parse_dtype(dtype_name(t)), t);
  }
  store_le(DType::f32, 1.0, buf);
  EXPECT_EQ(buf[3], 0x3f);
  EXPECT_EQ(buf[2], 0x80);
  EXPECT_FALSE(parse_dtype("f8").has_value());
}

TEST(CommonGzip, RoundTripsConcatenatedMembersAndPadding) {
  const std::string text = "hello, sparse world\n";
  Bytes z = gzip(as_bytes(text));
  ASSERT_TRUE(is_gzip(z));
  EXPECT_EQ(as_string(gunzip(z, "t.gz")), text);
  Bytes two = z;
  two.insert(two.end(), z.begin(), z.end());
  EXPECT_EQ(as_string(gunzip(two, "t.gz")), text + text);
  Bytes padded = z;
  padded.insert(padded.end(), 16, 0);
  EXPECT_EQ(as_string(gunzip(padded, "t.gz")), text);
  EXPECT_EQ(as_string(gunzip(gzip({}), "empty.gz")), "");
}

TEST(CommonGzip, CorruptStreamsNameTheFileAndByte) {
  Bytes z = gzip(as_bytes(std::string(1000, 'x')));
  Bytes truncated(z.begin(), z.begin() + static_cast<std::ptrdiff_t>(z.size() / 2));
  try {
    gunzip(truncated, "t.gz");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("t.gz: byte"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
  Bytes trailing = z;
  trailing.push_back('!');
  EXPECT_THROW(gunzip(trailing, "t.gz"), InputError);
  Bytes flipped = z;
  flipped[12] ^= 0xff;
  EXPECT_THROW(gunzip(flipped, "t.gz"), InputError);
}

TEST(CommonFile, ReadInputIsTransparentToGzipAndNamesMissingFiles) {
  test::TempDir dir;
  write_file_atomic(dir.file("a.txt.gz"), std::string_view("compressed\n"));
  EXPECT_TRUE(is_gzip(read_file(dir.file("a.txt.gz"))));
  EXPECT_EQ(as_string(read_input(dir.file("a.txt.gz"))), "compressed\n");
  write_file_atomic(dir.file("b.txt"), std::string_view("plain"));
  EXPECT_EQ(as_string(read_input(dir.file("b.txt"))), "plain");
  try {
    read_input(dir.file("missing.txt"));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("missing.txt: cannot open"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_input(dir.path().string()), InputError);
}

TEST(CommonGzip, ExpansionIsLimitedRelativeToTheCompressedSize) {
  EXPECT_EQ(gunzip_limit(0), kMinExpansionLimitBytes);
  EXPECT_EQ(gunzip_limit(1000), kMinExpansionLimitBytes);
  EXPECT_EQ(gunzip_limit(std::uint64_t{10} << 20), kMaxExpansionRatio * (std::uint64_t{10} << 20));
  EXPECT_EQ(gunzip_limit(std::uint64_t{1} << 40), kMaxInputBytes);
  EXPECT_EQ(gunzip_limit(std::numeric_limits<std::uint64_t>::max()), kMaxInputBytes);
  const std::string text(1000, 'x');
  const Bytes z = gzip(as_bytes(text));
  EXPECT_EQ(gunzip(z, "t.gz", 1000).size(), 1000u);
  test::expect_input_error(
      [&] { gunzip(z, "t.gz", 999); },
      {"t.gz: gzip data decompresses to more than 999 bytes", "decompress the file first"});
  // A bomb: members of 1 MiB of zeros, each about 1 KB, past the 64 MiB floor. It is refused from a
  // file, by read_input, without holding more than the limit.
  const Bytes member = gzip(Bytes(std::size_t{1} << 20, 0));
  ASSERT_LT(member.size(), 8192u);
  Bytes bomb;
  for (std::uint64_t i = 0; i <= kMinExpansionLimitBytes >> 20; ++i)
    bomb.insert(bomb.end(), member.begin(), member.end());
  test::TempDir dir;
  test::write_bytes(dir.file("bomb.mtx.gz"), bomb);
  test::expect_input_error([&] { read_input(dir.file("bomb.mtx.gz")); },
                           {"bomb.mtx.gz: gzip data decompresses to more than 67108864 bytes",
                            "decompress the file first (gunzip) to lift it"});
  bomb.resize(bomb.size() - member.size());  // exactly the floor: accepted
  test::write_bytes(dir.file("ok.mtx.gz"), bomb);
  EXPECT_EQ(read_input(dir.file("ok.mtx.gz")).size(), kMinExpansionLimitBytes);
}

TEST(CommonFile, OnlyRegularFilesAreRead) {
  test::TempDir dir;
  test::expect_input_error([&] { read_file(dir.path().string()); }, {"is a directory"});
  if (std::filesystem::exists("/dev/zero"))
    test::expect_input_error([] { read_input("/dev/zero"); },
                             {"/dev/zero: is a character device, not a regular file"});
  if (std::filesystem::exists("/dev/urandom"))
    test::expect_input_error([] { read_file("/dev/urandom"); },
                             {"is a character device, not a regular file"});
  // A FIFO with no writer: refused at once rather than waited on or read forever.
  const std::string fifo = dir.file("pipe.mtx");
  if (::mkfifo(fifo.c_str(), 0600) == 0)
    test::expect_input_error([&] { read_input(fifo); },
                             {"pipe.mtx: is a FIFO (named pipe), not a regular file"});
  // A link to a regular file is read.
  test::write_text(dir.file("real.txt"), "data");
  std::error_code ec;
  std::filesystem::create_symlink(dir.file("real.txt"), dir.file("link.txt"), ec);
  if (!ec) EXPECT_EQ(as_string(read_file(dir.file("link.txt"))), "data");
  test::write_text(dir.file("empty.txt"), "");
  EXPECT_TRUE(read_file(dir.file("empty.txt")).empty());
}

TEST(CommonFile, AtomicWriteReplacesAndNeverLeavesPartialFiles) {
  test::TempDir dir;
  const std::string path = dir.file("out.txt");
  write_file_atomic(path, std::string_view("first"));
  write_file_atomic(path, std::string_view("second"));
  EXPECT_EQ(as_string(read_file(path)), "second");
  // A failed write (missing folder) throws and leaves no temporary behind.
  EXPECT_THROW(write_file_atomic(dir.file("nofolder/out.txt"), std::string_view("x")), std::runtime_error);
  // Renaming onto a directory fails: the directory stays and the temporary is removed.
  std::filesystem::create_directory(dir.file("taken"));
  EXPECT_THROW(write_file_atomic(dir.file("taken"), std::string_view("x")), std::runtime_error);
  EXPECT_TRUE(std::filesystem::is_directory(dir.file("taken")));
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) files += e.is_regular_file();
  EXPECT_EQ(files, 1);  // only out.txt
}

TEST(CommonText, LineCursorCountsLinesAndStripsCarriageReturns) {
  LineCursor c("a b\r\n\nlast");
  std::string_view line;
  ASSERT_TRUE(c.next(line));
  EXPECT_EQ(line, "a b");
  EXPECT_EQ(c.line_number(), 1);
  ASSERT_TRUE(c.next(line));
  EXPECT_EQ(line, "");
  ASSERT_TRUE(c.next(line));
  EXPECT_EQ(line, "last");
  EXPECT_EQ(c.line_number(), 3);
  EXPECT_EQ(c.line_offset(), 6);
  EXPECT_FALSE(c.next(line));
}

TEST(CommonText, FieldsAndNumbersAreParsedStrictly) {
  EXPECT_EQ(split_fields("64, 256,\t1638", true), (std::vector<std::string_view>{"64", "256", "1638"}));
  EXPECT_EQ(split_fields("1,2", false), (std::vector<std::string_view>{"1,2"}));
  std::int64_t i = 0;
  EXPECT_TRUE(parse_int("+42", i));
  EXPECT_EQ(i, 42);
  EXPECT_TRUE(parse_int("-9223372036854775808", i));
  EXPECT_FALSE(parse_int("9223372036854775808", i));  // overflow
  EXPECT_FALSE(parse_int("12x", i));
  EXPECT_FALSE(parse_int("", i));
  EXPECT_FALSE(parse_int("1.0", i));
  double d = 0;
  EXPECT_TRUE(parse_double("-1.5e3", d));
  EXPECT_EQ(d, -1500.0);
  EXPECT_FALSE(parse_double("1e999", d));
  EXPECT_FALSE(parse_double("1.0.0", d));
  EXPECT_FALSE(parse_double("+", d));
}

TEST(CommonRandom, SplitMix64MatchesTheReferenceSequence) {
  SplitMix64 r(0);  // reference outputs of splitmix64 seeded with 0
  EXPECT_EQ(r.next(), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(r.next(), 0x6E789E6AA1B965F4ull);
  SplitMix64 u(7);
  for (int k = 0; k < 10000; ++k) {
    const double v = u.uniform_pm1();
    ASSERT_GE(v, -1.0);
    ASSERT_LT(v, 1.0);
    ASSERT_EQ(static_cast<double>(static_cast<float>(v)), v);
  }
}

TEST(MatrixPrune, KeepsTheLargestMagnitudesDeterministically) {
  DenseMatrix d(2, 3);
  d.data = {0.5, -3.0, 1.0, -0.5, 2.0, 0.25};
  const CsrMatrix a = magnitude_prune(d, 0.5);  // keep 3 of 6
  EXPECT_EQ(a.nnz(), 3);
  const DenseMatrix back = dense_from_csr(a);
  EXPECT_EQ(back.data, (std::vector<double>{0.0, -3.0, 1.0, 0.0, 2.0, 0.0}));
  // Ties: equal magnitudes keep the lower row-major index.
  DenseMatrix t(1, 4, 1.0);
  const DenseMatrix kept = dense_from_csr(magnitude_prune(t, 0.5));
  EXPECT_EQ(kept.data, (std::vector<double>{1.0, 1.0, 0.0, 0.0}));
  EXPECT_EQ(magnitude_prune(d, 0.0).nnz(), 6);
  EXPECT_EQ(magnitude_prune(d, 1.0).nnz(), 0);
  EXPECT_THROW(magnitude_prune(d, 1.5), UsageError);
  EXPECT_THROW(magnitude_prune(d, std::nan("")), UsageError);
  const DenseMatrix big = random_dense(64, 64, 3);
  EXPECT_EQ(magnitude_prune(big, 0.9).nnz(), 410);  // round(0.1 * 4096)
  EXPECT_EQ(random_dense(4, 4, 3).data, random_dense(4, 4, 3).data);
}
