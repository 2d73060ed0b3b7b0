// SWC reader: fields, comments, numbers and the messages of every rejection.
#include "sparsecc/io/swc.hpp"

#include <gtest/gtest.h>

#include <string>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/file.hpp"
#include "test_support.hpp"

namespace sparsecc {
namespace {

SwcFile parse_text(const std::string& text, const std::string& name = "cell.swc") {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  return parse_swc(std::span<const unsigned char>(p, text.size()), name);
}

std::string error_of(const std::string& text) {
  try {
    parse_text(text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Swc, ParsesSamplesCommentsAndBlankLines) {
  const SwcFile f = parse_text(
      "\xEF\xBB\xBF# header\n\n 1 1 0 0 0 5.5 -1\r\n2\t3 1.5 -2 3e1 1. 1 # trailing comment\n   \n#x\n7 4 0 "
      "0 1 0 2\n");
  ASSERT_EQ(f.samples.size(), 3u);
  EXPECT_EQ(f.name, "cell.swc");
  const SwcSample& b = f.samples[1];
  EXPECT_EQ(b.id, 2);
  EXPECT_EQ(b.type, 3);
  EXPECT_DOUBLE_EQ(b.x, 1.5);
  EXPECT_DOUBLE_EQ(b.y, -2);
  EXPECT_DOUBLE_EQ(b.z, 30);
  EXPECT_DOUBLE_EQ(b.radius, 1);
  EXPECT_EQ(b.parent, 1);
  EXPECT_EQ(b.line, 4);
  EXPECT_EQ(f.samples[0].parent, -1);
  EXPECT_EQ(f.samples[2].line, 7);
  EXPECT_EQ(f.samples[2].radius, 0);
}

TEST(Swc, EmptyInputHasNoSamples) {
  EXPECT_TRUE(parse_text("").samples.empty());
  EXPECT_TRUE(parse_text("# only a comment\n\n").samples.empty());
}

TEST(Swc, RejectsMalformedLinesNamingFileAndLine) {
  EXPECT_EQ(error_of("1 1 0 0 0 1 -1\n2 1 0 0 1\n"),
            "cell.swc:2: expected 7 fields (id type x y z radius parent), got 5");
  EXPECT_EQ(error_of("1 1 0 0 0 1 -1 9\n"),
            "cell.swc:1: expected 7 fields (id type x y z radius parent), got 8");
  EXPECT_EQ(error_of("1.5 1 0 0 0 1 -1\n"), "cell.swc:1: id '1.5' is not an integer");
  EXPECT_EQ(error_of("1 1 0 0 0 1 1.0\n"), "cell.swc:1: parent '1.0' is not an integer");
  EXPECT_EQ(error_of("1 soma 0 0 0 1 -1\n"), "cell.swc:1: type 'soma' is not an integer");
  EXPECT_EQ(error_of("1 1 0 abc 0 1 -1\n"), "cell.swc:1: y 'abc' is not a number");
  EXPECT_EQ(error_of("1 1 0 0 nan 1 -1\n"), "cell.swc:1: z 'nan' is not finite");
  EXPECT_EQ(error_of("1 1 0 0 0 inf -1\n"), "cell.swc:1: radius 'inf' is not finite");
  EXPECT_EQ(error_of("1 1 1e400 0 0 1 -1\n"), "cell.swc:1: x '1e400' is not a number");
  EXPECT_EQ(error_of("\n\n1 1 0 0 0 -0.5 -1\n"), "cell.swc:3: radius -0.5 of sample 1 is negative");
  EXPECT_EQ(error_of("1 1 0 0 0 1 -2\n"),
            "cell.swc:1: parent -2 of sample 1 is negative (only -1 marks a root)");
  EXPECT_EQ(error_of("-3 1 0 0 0 1 -1\n"), "cell.swc:1: sample id -3 is negative");
  EXPECT_EQ(error_of("1 -1 0 0 0 1 -1\n"), "cell.swc:1: type -1 of sample 1 is out of range");
  EXPECT_NE(error_of("1 1 2e9 0 0 1 -1\n").find("cell.swc:1: x 2000000000 exceeds the limit"),
            std::string::npos);
  EXPECT_EQ(error_of("99999999999999999999 1 0 0 0 1 -1\n"),
            "cell.swc:1: id '99999999999999999999' is not an integer");
}

TEST(Swc, InputErrorCarriesTheLocation) {
  try {
    parse_text("1 1 0 0 0 1 -1\n\n2 1 0 0 0 x 1\n", "a/b.swc");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where().file, "a/b.swc");
    EXPECT_EQ(e.where().line, 3);
    EXPECT_EQ(e.message(), "radius 'x' is not a number");
  }
}

TEST(Swc, ReadsGzipTransparently) {
  test::TempDir dir;
  const std::string text = "1 1 0 0 0 2 -1\n2 3 0 0 5 1 1\n";
  const auto gz =
      gzip(std::span<const unsigned char>(reinterpret_cast<const unsigned char*>(text.data()), text.size()));
  test::write_bytes(dir.file("cell.swc.gz"), gz);
  const SwcFile f = read_swc(dir.file("cell.swc.gz"));
  ASSERT_EQ(f.samples.size(), 2u);
  EXPECT_EQ(f.samples[1].parent, 1);
  EXPECT_THROW(read_swc(dir.file("missing.swc")), InputError);
}

}  // namespace
}  // namespace sparsecc
