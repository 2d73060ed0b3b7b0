// The executor bundle format: round trips, deterministic bytes, and a specific BundleError for every
// kind of damage (truncation at every offset, flipped bytes, bad header fields, bad section tables,
// missing sections, bad metadata); the bundle stage's atomic writer.
#include "sparsecc/runtime/bundle.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <utility>

#include "sparsecc/bundle/write_bundle.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/common/file.hpp"
#include "test_support.hpp"

using namespace sparsecc;
using rt::Bundle;
using rt::BundleError;
using Raw = std::vector<unsigned char>;
using nlohmann::json;

namespace {

Bundle small_bundle() {
  Bundle b;
  auto& md = b.metadata;
  md.m = 3;
  md.k = 4;
  md.n = 5;
  md.nnz = 6;
  md.n_tile = 4;
  md.bias = true;
  md.relu = true;
  md.values_mode = "streamed";
  md.kernel = "spmm_test";
  md.block_rows = 3;
  md.block_x = 32;
  md.shared_bytes = 64;
  md.generator_version = "0.1.0";
  md.fingerprint = "0123456789abcdef";
  md.plan_summary = {{"strategy", "row_split"}, {"rows_per_block", 1}};
  b.cubin = {0x7f, 'E', 'L', 'F', 0, 1, 2, 3, 4, 5, 6};
  b.ptx = ".version 8.0\n.target sm_90\n";
  b.values = {1.5f, -2.0f, 0.25f, 3.0f, -0.125f, 7.0f};
  b.bias = {0.5f, -1.0f, 2.0f};
  return b;
}

std::span<const unsigned char> text_bytes(const std::string& s) {
  return {reinterpret_cast<const unsigned char*>(s.data()), s.size()};
}
Raw floats(const std::vector<float>& v) {
  Raw r(v.size() * 4);
  if (!v.empty()) std::memcpy(r.data(), v.data(), r.size());
  return r;
}

// An independent encoder of the format, for bundles the writer refuses to produce.
Raw raw_bundle(const std::vector<std::pair<std::uint32_t, Raw>>& sections) {
  const auto put = [](Raw& out, std::size_t at, auto v) { std::memcpy(out.data() + at, &v, sizeof v); };
  std::size_t at = (32 + 24 * sections.size() + 7) / 8 * 8;
  Raw out(at, 0);
  for (std::size_t i = 0; i < sections.size(); ++i) {
    put(out, 32 + 24 * i, sections[i].first);
    put(out, 32 + 24 * i + 8, std::uint64_t(at));
    put(out, 32 + 24 * i + 16, std::uint64_t(sections[i].second.size()));
    out.insert(out.end(), sections[i].second.begin(), sections[i].second.end());
    at = (out.size() + 7) / 8 * 8;
    out.resize(at, 0);
  }
  std::memcpy(out.data(), "SPCCBNDL", 8);
  put(out, 8, rt::kBundleFormatVersion);
  put(out, 12, std::uint32_t(sections.size()));
  put(out, 16, std::uint64_t(out.size()));
  put(out, 24, rt::fnv1a64(std::span(out).subspan(32)));
  return out;
}

// The sections of small_bundle() with its metadata replaced.
Raw with_metadata(const json& md) {
  const Bundle b = small_bundle();
  const std::string text = md.dump();
  return raw_bundle(
      {{1, Raw(text.begin(), text.end())}, {2, b.cubin}, {4, floats(b.values)}, {5, floats(b.bias)}});
}

void patch_u64(Raw& r, std::size_t at, std::uint64_t v, bool rechecksum = true) {
  std::memcpy(r.data() + at, &v, 8);
  if (rechecksum) {
    const std::uint64_t h = rt::fnv1a64(std::span(r).subspan(32));
    std::memcpy(r.data() + 24, &h, 8);
  }
}

void expect_bundle_error(const Raw& bytes, const std::vector<std::string>& parts) {
  try {
    rt::parse_bundle(bytes, "t.spcc");
    ADD_FAILURE() << "expected BundleError containing '" << parts.front() << "'";
  } catch (const BundleError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("t.spcc: ", 0), 0u) << what;
    for (const auto& p : parts)
      EXPECT_NE(what.find(p), std::string::npos) << "'" << p << "' not in: " << what;
  }
}

}  // namespace

TEST(Bundle, RoundTripIsBitExact) {
  const Bundle b = small_bundle();
  const Raw bytes = rt::bundle_bytes(b);
  const Bundle back = rt::parse_bundle(bytes, "t.spcc");
  EXPECT_EQ(back.metadata, b.metadata);
  EXPECT_EQ(back.metadata.to_json(), b.metadata.to_json());
  EXPECT_EQ(back.cubin, b.cubin);
  EXPECT_EQ(back.ptx, b.ptx);
  EXPECT_EQ(floats(back.values), floats(b.values));
  EXPECT_EQ(floats(back.bias), floats(b.bias));
  EXPECT_EQ(rt::bundle_bytes(back), bytes);
}

TEST(Bundle, MinimalBakedBundleWithPtxOnly) {
  Bundle b = small_bundle();
  b.cubin.clear();
  b.values.clear();
  b.bias.clear();
  b.metadata.values_mode = "baked";
  b.metadata.bias = false;
  b.metadata.n_mode = "runtime";
  EXPECT_EQ(rt::parse_bundle(rt::bundle_bytes(b), "t.spcc"), b);
}

TEST(Bundle, StreamedWithNoNonzerosKeepsAnEmptyValuesSection) {
  Bundle b = small_bundle();
  b.metadata.nnz = 0;
  b.values.clear();
  EXPECT_EQ(rt::parse_bundle(rt::bundle_bytes(b), "t.spcc"), b);
}

TEST(Bundle, BytesAreDeterministicAndFollowTheLayout) {
  const Raw a = rt::bundle_bytes(small_bundle());
  EXPECT_EQ(rt::bundle_bytes(small_bundle()), a);
  ASSERT_GE(a.size(), 32u);
  EXPECT_EQ(std::memcmp(a.data(), "SPCCBNDL", 8), 0);
  std::uint32_t version, count;
  std::uint64_t size, sum;
  std::memcpy(&version, &a[8], 4);
  std::memcpy(&count, &a[12], 4);
  std::memcpy(&size, &a[16], 8);
  std::memcpy(&sum, &a[24], 8);
  EXPECT_EQ(version, 3u);
  EXPECT_EQ(count, 5u);
  EXPECT_EQ(size, a.size());
  EXPECT_EQ(sum, rt::fnv1a64(std::span(a).subspan(32)));
  for (std::uint32_t i = 0; i < count; ++i) {
    std::uint32_t kind;
    std::uint64_t offset;
    std::memcpy(&kind, &a[32 + 24 * i], 4);
    std::memcpy(&offset, &a[32 + 24 * i + 8], 8);
    EXPECT_EQ(kind, i + 1);
    EXPECT_EQ(offset % 8, 0u);
  }
  EXPECT_EQ(a.size() % 8, 0u);
}

TEST(Bundle, Fnv1aMatchesKnownValues) {
  EXPECT_EQ(rt::fnv1a64({}), 0xcbf29ce484222325ull);
  EXPECT_EQ(rt::fnv1a64(text_bytes("a")), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(rt::fnv1a64(text_bytes("foobar")), 0x85944171f73967e8ull);
}

TEST(Bundle, TruncationAtEveryOffsetIsRejected) {
  const Raw full = rt::bundle_bytes(small_bundle());
  for (std::size_t len = 0; len < full.size(); ++len)
    expect_bundle_error(Raw(full.begin(), full.begin() + len), {"truncated", "byte "});
}

TEST(Bundle, EveryFlippedByteIsRejected) {
  const Raw full = rt::bundle_bytes(small_bundle());
  for (std::size_t i = 0; i < full.size(); ++i) {
    Raw r = full;
    r[i] ^= 0x20;
    if (i >= 24)
      expect_bundle_error(r, {"byte 24", "checksum mismatch"});
    else
      EXPECT_THROW(rt::parse_bundle(r, "t.spcc"), BundleError) << "byte " << i;
  }
}

TEST(Bundle, HeaderFieldsAreChecked) {
  Raw r = rt::bundle_bytes(small_bundle());
  r[0] = 'X';
  expect_bundle_error(r, {"byte 0", "magic"});
  r = rt::bundle_bytes(small_bundle());
  r[8] = 4;
  expect_bundle_error(r, {"byte 8: bundle format version 4 is newer than this runtime supports (3)"});
  r[8] = 2;  // version 2 carried no plan section: such bundles must be compiled again
  expect_bundle_error(r,
                      {"byte 8: bundle format version 2 is older than this runtime supports (3); compile the "
                       "executor again"});
  r[8] = 1;  // the grid order of version 1 differs: such bundles must be compiled again
  expect_bundle_error(r, {"byte 8: bundle format version 1 is older than this runtime supports (3)"});
  r[8] = 0;
  expect_bundle_error(r, {"byte 8", "version 0"});
  r = rt::bundle_bytes(small_bundle());
  r[12] = 0;
  expect_bundle_error(r, {"byte 12", "section count 0"});
  r[12] = 200;
  expect_bundle_error(r, {"byte 12", "section count 200"});
  r = rt::bundle_bytes(small_bundle());
  r.push_back(0);
  expect_bundle_error(r, {"byte 16", "but it is"});
}

TEST(Bundle, SectionTableIsChecked) {
  const Raw good = rt::bundle_bytes(small_bundle());
  std::uint64_t meta_offset;
  std::memcpy(&meta_offset, &good[32 + 8], 8);
  Raw r = good;
  patch_u64(r, 32 + 24 + 8, meta_offset);  // cubin starts inside the metadata
  expect_bundle_error(r, {"byte ", "overlaps section metadata"});
  r = good;
  patch_u64(r, 32 + 16, good.size());  // metadata runs past the end
  expect_bundle_error(r, {"byte 40", "outside the data area"});
  r = good;
  patch_u64(r, 32 + 8, ~std::uint64_t{0} - 7);  // offset + size overflows
  expect_bundle_error(r, {"byte 40", "outside the data area"});
  r = good;
  patch_u64(r, 32 + 8, meta_offset + 4);
  expect_bundle_error(r, {"byte 40", "misaligned"});
  r = good;
  patch_u64(r, 32 + 8, 32);  // inside the table
  expect_bundle_error(r, {"byte 40", "outside the data area"});
  r = good;
  patch_u64(r, 32, 12);  // kind 12, reserved 0
  expect_bundle_error(r, {"byte 32", "unknown section kind 12"});
  r = good;
  patch_u64(r, 32, 1 | (std::uint64_t{1} << 32));
  expect_bundle_error(r, {"byte 36", "reserved"});
  r = good;
  patch_u64(r, 32 + 24, 1);  // a second metadata section
  expect_bundle_error(r, {"byte 56", "second metadata section"});
}

TEST(Bundle, RequiredSectionsArePresent) {
  const Bundle b = small_bundle();
  const std::string meta = b.metadata.to_json().dump();
  const Raw m(meta.begin(), meta.end());
  expect_bundle_error(raw_bundle({{2, b.cubin}, {4, floats(b.values)}, {5, floats(b.bias)}}),
                      {"no metadata section"});
  expect_bundle_error(raw_bundle({{1, m}, {4, floats(b.values)}, {5, floats(b.bias)}}),
                      {"neither a cubin nor a PTX section"});
  expect_bundle_error(raw_bundle({{1, m}, {2, b.cubin}, {5, floats(b.bias)}}),
                      {"values_mode is \"streamed\" but the values section is missing"});
  expect_bundle_error(raw_bundle({{1, m}, {2, b.cubin}, {4, floats(b.values)}}),
                      {"metadata bias is true but the bias section is missing"});
  expect_bundle_error(raw_bundle({{1, m}, {2, {}}, {4, floats(b.values)}, {5, floats(b.bias)}}),
                      {"section cubin (byte ", "is empty"});
  expect_bundle_error(raw_bundle({{1, m}, {3, {'a', 0, 'b'}}, {4, floats(b.values)}, {5, floats(b.bias)}}),
                      {"section ptx (byte ", "NUL character at offset 1"});
  json baked = b.metadata.to_json();
  baked["values_mode"] = "baked";
  expect_bundle_error(with_metadata(baked), {"values_mode is \"baked\" but the values section is present"});
}

TEST(Bundle, SectionSizesMatchTheMetadata) {
  const Bundle b = small_bundle();
  const std::string meta = b.metadata.to_json().dump();
  const Raw m(meta.begin(), meta.end());
  Raw five = floats(b.values);
  five.resize(5 * 4);
  expect_bundle_error(raw_bundle({{1, m}, {2, b.cubin}, {4, five}, {5, floats(b.bias)}}),
                      {"section values (byte ", "holds 5 floats but metadata nnz - tile_nnz is 6"});
  Raw odd = floats(b.values);
  odd.push_back(0);
  expect_bundle_error(raw_bundle({{1, m}, {2, b.cubin}, {4, odd}, {5, floats(b.bias)}}),
                      {"section values (byte ", "not a multiple of 4"});
  expect_bundle_error(raw_bundle({{1, m}, {2, b.cubin}, {4, floats(b.values)}, {5, floats({1, 2})}}),
                      {"section bias (byte ", "holds 2 floats but metadata m is 3"});
  std::vector<float> nan = b.values;
  nan[2] = std::nanf("");
  expect_bundle_error(raw_bundle({{1, m}, {2, b.cubin}, {4, floats(nan)}, {5, floats(b.bias)}}),
                      {"section values (byte ", "entry 2 is not finite"});
}

TEST(Bundle, MetadataMustBeValidJson) {
  const Bundle b = small_bundle();
  const std::string bad = "{\"op\": \"spmm\", \"m\": 3,";
  expect_bundle_error(raw_bundle({{1, Raw(bad.begin(), bad.end())}, {2, b.cubin}}),
                      {"byte ", "not valid JSON"});
  const std::string array = "[1, 2]";
  expect_bundle_error(raw_bundle({{1, Raw(array.begin(), array.end())}, {2, b.cubin}}),
                      {"section metadata (byte ", "must be a JSON object, not array"});
  json deep = json::object();
  for (int i = 0; i < 100; ++i) deep = json::array({deep});
  json md = b.metadata.to_json();
  md["plan_summary"] = {{"x", deep}};
  expect_bundle_error(with_metadata(md), {"section metadata (byte ", "deeper than 64 levels"});
}

TEST(Bundle, EveryMetadataKeyIsRequiredAndTyped) {
  const json good = small_bundle().metadata.to_json();
  ASSERT_NO_THROW(rt::parse_bundle(with_metadata(good), "t.spcc"));
  for (const auto& [key, value] : good.items()) {
    json md = good;
    md.erase(key);
    expect_bundle_error(with_metadata(md), {"metadata key '" + key + "': missing"});
    md[key] = value.is_string() ? json(5) : json("5");
    const std::string kind = value.is_number_integer() ? "must be an integer"
                             : value.is_boolean()      ? "must be a boolean"
                             : value.is_string()       ? "must be a string"
                             : value.is_array()        ? "must be an array of strings"
                                                       : "must be an object";
    expect_bundle_error(with_metadata(md), {"metadata key '" + key + "': " + kind});
  }
}

TEST(Bundle, MetadataValuesAreChecked) {
  const json good = small_bundle().metadata.to_json();
  const std::vector<std::tuple<std::string, json, std::string>> cases{
      {"op", "spmv", "\"spmv\" is not one of \"spmm\""},
      {"m", 0, "value 0 out of range 1..2147483647"},
      {"k", -4, "value -4 out of range"},
      {"n", 1ull << 40, "is too large"},
      {"nnz", 13, "value 13 out of range 0..12"},
      {"n_mode", "dynamic", "is not one of \"fixed\", \"runtime\""},
      {"n_tile", 0, "out of range"},
      {"dtype", "f64", "is not one of \"f32\", \"f16\", \"bf16\""},
      {"layout", "col_major", "is not one of \"row_major\""},
      {"values_mode", "lazy", "is not one of \"baked\", \"streamed\""},
      {"arch", "compute_90", "is not an architecture"},
      {"arch", "sm_", "is not an architecture"},
      {"arch", "sm_90ab", "is not an architecture"},
      {"kernel", "9lives", "is not a C identifier"},
      {"kernel", "", "is not a C identifier"},
      {"block_rows", 0, "out of range"},
      {"block_rows", 65536, "out of range"},
      {"block_x", 2048, "value 2048 out of range 1..1024"},
      {"shared_bytes", -1, "out of range"},
      {"params", json::array({"B", "C"}), "must be [\"B\", \"C\", \"bias\", \"values\", \"n\"]"},
      {"params", json::array({1}), "must be an array of strings"},
      {"fingerprint", "XYZ", "lowercase hex"},
      {"plan_summary", json::array(), "must be an object"},
      {"m", 1.5, "must be an integer, not number"},
  };
  for (const auto& [key, value, message] : cases) {
    json md = good;
    md[key] = value;
    expect_bundle_error(with_metadata(md), {"metadata key '" + key + "': ", message});
  }
  json md = good;
  md["arch"] = "sm_90a";
  md["future_key"] = {1, 2, 3};
  EXPECT_EQ(rt::parse_bundle(with_metadata(md), "t.spcc").metadata.arch, "sm_90a");
}

// programmatic_launch: absent in bundles of earlier generators (false), a boolean, and only for an
// arch whose kernels can wait (sm_90 on); it survives the round trip.
TEST(Bundle, ProgrammaticLaunchKeyIsOptionalAndChecked) {
  for (const char* arch : {"sm_90", "sm_90a", "sm_100", "sm_120", "sm_100f"})
    EXPECT_TRUE(rt::arch_has_programmatic_launch(arch)) << arch;
  for (const char* arch : {"sm_80", "sm_86", "sm_89", "sm_", "compute_90", "", "sm_9"})
    EXPECT_FALSE(rt::arch_has_programmatic_launch(arch)) << arch;
  const json good = small_bundle().metadata.to_json();
  EXPECT_FALSE(good.contains("programmatic_launch"));
  EXPECT_FALSE(rt::parse_bundle(with_metadata(good), "t.spcc").metadata.programmatic_launch);
  Bundle b = small_bundle();
  b.metadata.programmatic_launch = true;
  EXPECT_EQ(b.metadata.to_json().at("programmatic_launch"), true);
  EXPECT_EQ(rt::parse_bundle(rt::bundle_bytes(b, "t.spcc"), "t.spcc"), b);
  json md = good;
  md["programmatic_launch"] = "yes";
  expect_bundle_error(with_metadata(md), {"metadata key 'programmatic_launch': must be a boolean"});
  md["programmatic_launch"] = true;
  md["arch"] = "sm_80";
  expect_bundle_error(with_metadata(md),
                      {"metadata key 'programmatic_launch': ", "needs an sm_90 or later arch"});
}

// An fp16 bundle with tensor-core fragments: 2 of its 6 nonzeros in the fragments, 4 streamed values.
Bundle small_half_bundle() {
  Bundle b = small_bundle();
  b.metadata.dtype = "f16";
  b.metadata.params = rt::kSpmmHalfParams;
  b.metadata.tile_nnz = 2;
  b.metadata.fragment_words = 64;
  b.values.resize(4);
  b.fragments.assign(64, 0x3c003c00u);
  return b;
}

TEST(Bundle, HalfPrecisionBundlesRoundTripAndAreChecked) {
  const Bundle good = small_half_bundle();
  const std::vector<unsigned char> bytes = rt::bundle_bytes(good, "h.spcc");
  EXPECT_EQ(rt::parse_bundle(bytes, "h.spcc"), good);
  const auto refused = [](Bundle b, const std::string& what) {
    try {
      rt::bundle_bytes(b, "h.spcc");
      ADD_FAILURE() << "accepted a bundle with " << what;
    } catch (const BundleError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  Bundle b = good;
  b.metadata.accumulate = "bf16";
  refused(b, "is neither \"f32\" nor the dtype");
  b = good;
  b.metadata.params = rt::kSpmmParams;
  refused(b, "for f16 / bf16");
  b = good;
  b.fragments.pop_back();
  refused(b, "holds 63 words but metadata fragment_words is 64");
  b = good;
  b.values.push_back(1.0f);
  refused(b, "nnz - tile_nnz is 4");
  b = good;
  b.metadata.tile_nnz = 7;
  refused(b, "tile_nnz");
  // fp32 bundles take neither fragments nor the extra keys.
  b = small_bundle();
  b.metadata.fragment_words = 64;
  b.fragments.assign(64, 0);
  refused(b, "fragment_words");
  // An fp32 bundle's metadata has none of the half keys (bundles of earlier generators stay equal).
  EXPECT_FALSE(small_bundle().metadata.to_json().contains("accumulate"));
  EXPECT_TRUE(good.metadata.to_json().contains("fragment_words"));
}

TEST(Bundle, WriterRefusesInconsistentBundles) {
  Bundle b = small_bundle();
  b.values.pop_back();
  EXPECT_THROW(rt::bundle_bytes(b), BundleError);
  b = small_bundle();
  b.cubin.clear();
  b.ptx.clear();
  EXPECT_THROW(rt::bundle_bytes(b), BundleError);
  b = small_bundle();
  b.metadata.bias = false;
  EXPECT_THROW(rt::bundle_bytes(b), BundleError);
  b = small_bundle();
  b.metadata.generator_version = "\xff";
  EXPECT_THROW(rt::bundle_bytes(b), BundleError);
}

TEST(RuntimeBundle, ReadsFilesAndNamesThem) {
  test::TempDir dir;
  const std::string path = dir.file("x.spcc");
  write_bundle(path, small_bundle());
  EXPECT_EQ(rt::read_bundle_file(path), small_bundle());
  EXPECT_EQ(read_file(path), rt::bundle_bytes(small_bundle()));
  try {
    rt::read_bundle_file(dir.file("absent.spcc"));
    FAIL();
  } catch (const BundleError& e) {
    EXPECT_NE(std::string(e.what()).find("absent.spcc: cannot open"), std::string::npos) << e.what();
  }
}

TEST(RuntimeBundle, OnlyRegularFilesAreRead) {
  test::TempDir dir;
  auto expect_refused = [](const std::string& path, const std::string& what) {
    try {
      rt::read_bundle_file(path);
      FAIL() << path;
    } catch (const BundleError& e) {
      EXPECT_NE(std::string(e.what()).find(path + ": is " + what + ", not a regular file"), std::string::npos)
          << e.what();
    }
  };
  expect_refused(dir.path().string(), "a directory");
  if (std::filesystem::exists("/dev/zero")) expect_refused("/dev/zero", "a character device");
  const std::string fifo = dir.file("pipe.sccb");
  if (::mkfifo(fifo.c_str(), 0600) == 0) expect_refused(fifo, "a FIFO (named pipe)");
}

TEST(RuntimeBundle, AtomicWriterLeavesNoPartialFile) {
  test::TempDir dir;
  const std::string path = dir.file("x.spcc");
  write_bundle(path, small_bundle());
  const Raw before = read_file(path);
  Bundle bad = small_bundle();
  bad.bias.clear();
  EXPECT_THROW(write_bundle(path, bad), BundleError);
  EXPECT_EQ(read_file(path), before);
  EXPECT_THROW(write_bundle(dir.file("missing/dir/x.spcc"), small_bundle()), std::exception);
  EXPECT_THROW(write_bundle(dir.file("x.spcc.gz"), small_bundle()), UsageError);
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) names.push_back(e.path().filename());
  EXPECT_EQ(names, std::vector<std::string>{"x.spcc"});
}
