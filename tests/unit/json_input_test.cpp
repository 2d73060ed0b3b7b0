// JSON from users' files: the nesting and size limits of common/json_input.hpp in every reader that
// parses JSON (safetensors headers, model manifests, tuning databases, predictors, bundle metadata),
// and the rule that a manifest's files stay inside its folder.
#include "sparsecc/common/json_input.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/paths.hpp"
#include "sparsecc/io/safetensors.hpp"
#include "sparsecc/model/manifest.hpp"
#include "sparsecc/runtime/bundle.hpp"
#include "sparsecc/tune/database.hpp"
#include "sparsecc/tune/predictor.hpp"
#include "test_support.hpp"

namespace sparsecc {
namespace {

namespace fs = std::filesystem;

constexpr int kDeep = 100'000;  // far past any stack a recursive walk of the parsed value could use

// `levels` nested arrays around `inner`.
std::string nested_arrays(int levels, const std::string& inner = "0") {
  return std::string(static_cast<std::size_t>(levels), '[') + inner +
         std::string(static_cast<std::size_t>(levels), ']');
}
// `levels` nested objects {"a": ...} around `inner`.
std::string nested_objects(int levels, const std::string& inner = "0") {
  std::string s;
  for (int i = 0; i < levels; ++i) s += "{\"a\":";
  s += inner;
  s += std::string(static_cast<std::size_t>(levels), '}');
  return s;
}

std::vector<unsigned char> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

// A file of `size` bytes that occupies no disk (a hole).
void write_sparse_file(const std::string& path, std::uint64_t size) {
  { std::ofstream(path, std::ios::binary); }
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(size)), 0) << std::strerror(errno);
}

TEST(JsonInput, NestingIsCountedOutsideStrings) {
  EXPECT_NO_THROW(check_json_input(nested_arrays(kMaxJsonDepth), "f.json", 1 << 20));
  EXPECT_NO_THROW(check_json_input(nested_objects(kMaxJsonDepth), "f.json", 1 << 20));
  // The 65th bracket is the byte named.
  test::expect_input_error([] { check_json_input(nested_arrays(kMaxJsonDepth + 1), "f.json", 1 << 20); },
                           {"f.json: byte 64: ", "deeper than 64 levels"});
  test::expect_input_error([] { check_json_input(nested_objects(kDeep), "f.json", 1 << 20, "manifest", 8); },
                           {"f.json: byte ", "manifest nests arrays and objects deeper than 64 levels"});
  // Brackets in strings (escaped quotes included) do not count; closing brackets undo opening ones.
  const std::string in_string = "[\"" + std::string(1000, '[') + "\\\"" + std::string(1000, '{') + "\"]";
  EXPECT_NO_THROW(check_json_input(in_string, "f.json", 1 << 20));
  std::string siblings;
  for (int i = 0; i < 1000; ++i) siblings += (i ? "," : "") + nested_arrays(kMaxJsonDepth - 1);
  EXPECT_NO_THROW(check_json_input("[" + siblings + "]", "f.json", 1 << 20));
}

TEST(JsonInput, SizeLimitNamesTheFile) {
  test::expect_input_error([] { check_json_input(std::string(101, ' '), "f.json", 100, "predictor"); },
                           {"f.json: byte 0: predictor is 101 bytes, over the 100 byte limit"});
  EXPECT_NO_THROW(check_json_input(std::string(100, ' '), "f.json", 100));
  test::expect_input_error([] { parse_json_input("{\"a\": [1,", "f.json", 100); },
                           {"f.json: byte ", "not valid JSON"});
  test::TempDir dir;
  write_sparse_file(dir.file("big.json"), 1001);
  test::expect_input_error(
      [&] { read_json_file(dir.file("big.json"), 1000, "predictor"); },
      {dir.file("big.json"), "byte 0: predictor is 1001 bytes, over the 1000 byte limit"});
}

// A safetensors file: 8-byte little-endian header length, the header, no data.
std::vector<unsigned char> safetensors_with_header(const std::string& header) {
  std::vector<unsigned char> out(8);
  for (int i = 0; i < 8; ++i)
    out[static_cast<std::size_t>(i)] = static_cast<unsigned char>(header.size() >> (8 * i));
  out.insert(out.end(), header.begin(), header.end());
  return out;
}

TEST(JsonInput, SafetensorsHeaderNestingIsRefused) {
  // A deep shape entry reaches the error message's dump() of the value.
  const std::vector<std::string> headers = {
      R"({"w": {"dtype": "F32", "shape": )" + nested_arrays(kDeep) + R"(, "data_offsets": [0, 0]}})",
      R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": )" + nested_arrays(kDeep) + "}}",
      R"({"__metadata__": )" + nested_objects(kDeep, "\"x\"") + "}", nested_arrays(kDeep)};
  for (const std::string& h : headers) {
    const auto file = safetensors_with_header(h);
    test::expect_input_error(
        [&] { list_safetensors(file, "deep.safetensors"); },
        {"deep.safetensors: byte ", "header JSON nests arrays and objects deeper than 64"});
    test::expect_input_error([&] { parse_safetensors(file, "deep.safetensors"); },
                             {"deep.safetensors: byte "});
  }
  // Within the limit, the header's own checks report the problem.
  test::expect_input_error(
      [] {
        list_safetensors(safetensors_with_header(R"({"w": {"dtype": "F32", "shape": )" + nested_arrays(60) +
                                                 R"(, "data_offsets": [0, 0]}})"),
                         "deep.safetensors");
      },
      {"deep.safetensors: tensor 'w': byte 8: shape entry"});
}

// --- manifests --------------------------------------------------------------------------------------

TEST(JsonInput, ManifestNestingAndSizeAreRefused) {
  test::TempDir dir;
  const std::string deep = dir.file("deep.json");
  test::write_text(deep, R"({"layers": [{"name": "a", "file": )" + nested_arrays(kDeep) + "}]}");
  test::expect_input_error([&] { read_model_manifest(deep); },
                           {deep + ": byte ", "manifest nests arrays and objects deeper than 64 levels"});
  const std::string big = dir.file("big.json");
  write_sparse_file(big, kMaxManifestBytes + 1);
  test::expect_input_error([&] { read_model_manifest(big); },
                           {big + ": byte 0: manifest is", "over the 16777216 byte limit"});
  std::string text = R"({"layers": [{"name": "a", "file": "a.sccb"}], "pad": ")";
  text += std::string(kMaxManifestBytes, ' ') + "\"}";
  test::expect_input_error([&] { parse_model_manifest(bytes_of(text), "m.json"); },
                           {"m.json: byte 0: manifest is", "over the 16777216 byte limit"});
}

std::string manifest_of(const std::vector<std::pair<std::string, std::string>>& layers) {
  std::string s = R"({"format": "sparsecc-model-manifest", "layers": [)";
  for (std::size_t i = 0; i < layers.size(); ++i)
    s +=
        (i ? ", " : "") + fmt::format(R"({{"name": "{}", "file": "{}"}})", layers[i].first, layers[i].second);
  return s + "]}";
}

TEST(JsonInput, ManifestFilesStayInsideItsFolder) {
  test::TempDir dir;
  const fs::path root = dir.path() / "model";
  fs::create_directories(root / "sub");
  fs::create_directories(dir.path() / "outside");
  test::write_text((root / "a.sccb").string(), "x");
  test::write_text((root / "sub" / "b.sccb").string(), "x");
  test::write_text((dir.path() / "outside" / "secret").string(), "x");
  fs::create_symlink(dir.path() / "outside" / "secret", root / "link_out.sccb");
  fs::create_directory_symlink(dir.path() / "outside", root / "dir_out");
  fs::create_symlink(root / "sub" / "b.sccb", root / "link_in.sccb");
  const std::string manifest = (root / "manifest.json").string();

  // Good: plain names, subfolders, '.' and '..' that stay inside, links that stay inside.
  test::write_text(
      manifest,
      manifest_of({{"a", "a.sccb"}, {"b", "sub/b.sccb"}, {"c", "./sub/../a.sccb"}, {"d", "link_in.sccb"}}));
  const std::vector<ManifestLayer> layers = read_model_manifest(manifest);
  ASSERT_EQ(layers.size(), 4u);
  EXPECT_EQ(layers[1].name, "b");
  EXPECT_EQ(layers[1].file, "sub/b.sccb");
  EXPECT_EQ(layers[1].path, (root / "sub/b.sccb").string());

  struct Case {
    std::string file, why;
  };
  const std::vector<Case> bad = {
      {"/etc/passwd", "is an absolute path"},
      {(root / "a.sccb").string(), "is an absolute path"},  // even one that points inside
      {"../outside/secret", "climbs out of the folder with '..'"},
      {"sub/../../outside/secret", "climbs out of the folder with '..'"},
      {"../model/a.sccb", "climbs out of the folder with '..'"},
      {"link_out.sccb", "leads outside the folder"},
      {"dir_out/secret", "leads outside the folder"},
      {"sub/..", "names the folder itself"},
  };
  for (const Case& c : bad) {
    test::write_text(manifest, manifest_of({{"first", "a.sccb"}, {"evil.layer", c.file}}));
    test::expect_input_error([&] { read_model_manifest(manifest); },
                             {manifest + ": layer 1 ('evil.layer'): file '" + c.file + "' " + c.why,
                              "a manifest's files must be inside its folder"});
  }
  // A NUL byte would cut the path short where the file is opened.
  test::write_text(manifest, R"({"layers": [{"name": "n", "file": "a.sccb\u0000/../../x"}]})");
  test::expect_input_error([&] { read_model_manifest(manifest); }, {"layer 0 ('n')", "contains a NUL byte"});
  // The manifest named by a relative path: its folder is the current one.
  const fs::path cwd = fs::current_path();
  fs::current_path(root);
  test::write_text("manifest.json", manifest_of({{"a", "a.sccb"}}));
  EXPECT_EQ(read_model_manifest("manifest.json").at(0).path, "a.sccb");
  test::write_text("manifest.json", manifest_of({{"a", "../outside/secret"}}));
  test::expect_input_error([] { read_model_manifest("manifest.json"); }, {"manifest.json: layer 0 ('a')"});
  fs::current_path(cwd);
}

TEST(JsonInput, ManifestStructureErrorsNameTheLayer) {
  test::expect_input_error([] { parse_model_manifest(bytes_of("[1]"), "m.json"); },
                           {"m.json: not a sparsecc manifest: no \"layers\" array"});
  test::expect_input_error([] { parse_model_manifest(bytes_of(R"({"layers": []})"), "m.json"); },
                           {"m.json: the manifest lists no layers"});
  test::expect_input_error(
      [] {
        parse_model_manifest(bytes_of(R"({"layers": [{"name": "a", "file": "a"}, {"file": "b"}]})"),
                             "m.json");
      },
      {"m.json: layer 1 of the manifest has no \"name\" string"});
  test::expect_input_error(
      [] { parse_model_manifest(bytes_of(R"({"layers": [{"name": "a", "file": 3}]})"), "m.json"); },
      {"m.json: layer 0 of the manifest has no \"file\" string"});
}

TEST(JsonInput, PathOutsideFolderRule) {
  test::TempDir dir;
  EXPECT_EQ(path_outside_folder(dir.path(), "x/y/z.bin"), "");
  EXPECT_EQ(path_outside_folder(dir.path(), "x/../y"), "");
  EXPECT_EQ(path_outside_folder(dir.path().string() + "/", "y"), "");
  EXPECT_NE(path_outside_folder(dir.path(), ""), "");
  EXPECT_NE(path_outside_folder(dir.path(), ".."), "");
  EXPECT_NE(path_outside_folder(dir.path(), "."), "");
  EXPECT_NE(path_outside_folder(dir.path(), "/x"), "");
  EXPECT_NE(path_outside_folder(dir.path(), "x/../../" + dir.path().filename().string() + "/y"), "");
}

// --- tuning databases -------------------------------------------------------------------------------

std::string database_with_params(const std::string& params) {
  return R"({"schema": 1, "records": [{"key": {"op": "spmm", "fingerprint": "ab", "params": )" + params +
         R"(, "gpu": "g", "compute_capability": "9.0", "generator_version": "v"}, "winner": "w", "timings": []}]})";
}

TEST(JsonInput, TuningDatabaseNestingIsRefused) {
  test::TempDir dir;
  const std::string path = dir.file("deep.json");
  test::write_text(path, database_with_params(nested_objects(kDeep)));
  std::vector<std::string> warnings;
  EXPECT_TRUE(tune::load_database(path, &warnings).records.empty());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find(path + ": byte "), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("tuning database nests arrays and objects deeper than 64 levels"),
            std::string::npos)
      << warnings[0];
  test::expect_input_error(
      [] { tune::parse_database(database_with_params(nested_arrays(kDeep)), "db.json"); },
      {"db.json: byte ", "deeper than 64 levels"});
  // Within the limit it reads.
  EXPECT_EQ(
      tune::parse_database(database_with_params(nested_objects(kMaxJsonDepth - 4)), "db.json").records.size(),
      1u);
}

TEST(JsonInput, TuningDatabaseOverTheSizeLimitIsNeitherReadNorReplaced) {
  test::TempDir dir;
  const std::string path = dir.file("big.json");
  write_sparse_file(path, kMaxTuningDatabaseBytes + 1);
  std::vector<std::string> warnings;
  EXPECT_TRUE(tune::load_database(path, &warnings).records.empty());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(
      warnings[0].find(path + ": byte 0: tuning database is 268435457 bytes, over the 268435456 byte limit"),
      std::string::npos)
      << warnings[0];
  test::expect_input_error([&] { tune::update_database(path, {}, &warnings); },
                           {path, "cannot update the tuning database", "over the 268435456 byte limit"});
  EXPECT_EQ(fs::file_size(path), kMaxTuningDatabaseBytes + 1);
}

// --- predictors -------------------------------------------------------------------------------------

TEST(JsonInput, PredictorNestingAndSizeAreRefused) {
  test::TempDir dir;
  const std::string deep = dir.file("deep.json");
  test::write_text(deep, R"({"version": 1, "features": )" + nested_arrays(kDeep) + "}");
  test::expect_input_error([&] { tune::load_predictor(deep); },
                           {deep + ": byte ", "predictor nests arrays and objects deeper than 64 levels"});
  const std::string big = dir.file("big.json");
  write_sparse_file(big, kMaxPredictorBytes + 1);
  test::expect_input_error([&] { tune::load_predictor(big); },
                           {big + ": byte 0: predictor is 16777217 bytes, over the 16777216 byte limit"});
  const std::string bad = dir.file("bad.json");
  test::write_text(bad, "{\"version\": ");
  test::expect_input_error([&] { tune::load_predictor(bad); }, {bad + ": byte ", "not valid JSON"});
}

// --- bundle metadata (the runtime's own check) ------------------------------------------------------

// A bundle of one metadata section holding `text` (the format of
// runtime/include/sparsecc/runtime/bundle.hpp).
std::vector<unsigned char> bundle_with_metadata(const std::string& text) {
  const auto put = [](std::vector<unsigned char>& out, std::size_t at, auto v) {
    std::memcpy(out.data() + at, &v, sizeof v);
  };
  std::vector<unsigned char> out(56, 0);
  put(out, 32, std::uint32_t(1));  // metadata
  put(out, 40, std::uint64_t(56));
  put(out, 48, std::uint64_t(text.size()));
  out.insert(out.end(), text.begin(), text.end());
  out.resize((out.size() + 7) / 8 * 8, 0);
  std::memcpy(out.data(), "SPCCBNDL", 8);
  put(out, 8, rt::kBundleFormatVersion);
  put(out, 12, std::uint32_t(1));
  put(out, 16, std::uint64_t(out.size()));
  put(out, 24, rt::fnv1a64(std::span(out).subspan(32)));
  return out;
}

TEST(JsonInput, BundleMetadataNestingIsRefused) {
  for (const std::string& md : {R"({"op": "spmm", "plan_summary": )" + nested_arrays(kDeep) + "}",
                                R"({"op": "spmm", "plan_summary": )" + nested_objects(kDeep) + "}",
                                nested_arrays(kDeep, ""), std::string(kDeep, '[')}) {
    try {
      rt::parse_bundle(bundle_with_metadata(md), "deep.sccb");
      ADD_FAILURE() << "a metadata section nesting " << kDeep << " levels was accepted";
    } catch (const rt::BundleError& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind("deep.sccb: ", 0), 0u) << what;
      EXPECT_NE(what.find("deeper than 64 levels"), std::string::npos) << what;
    }
  }
}

// A number beyond a double is an error nlohmann raises without a position; every reader reports it as
// bad input naming the file.
TEST(JsonInput, NumberOverflowIsBadInput) {
  try {
    rt::parse_bundle(bundle_with_metadata(R"({"op": "spmm", "m": 1e999})"), "huge.sccb");
    ADD_FAILURE() << "a metadata number of 1e999 was accepted";
  } catch (const rt::BundleError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("huge.sccb: section metadata (byte 56): is not valid JSON", 0), 0u) << what;
    EXPECT_NE(what.find("number overflow"), std::string::npos) << what;
  }
  test::expect_input_error([] { parse_model_manifest(bytes_of(R"({"layers": 1e999})"), "m.json"); },
                           {"m.json: byte 0: not valid JSON", "number overflow"});
  test::expect_input_error([] { tune::parse_database(R"({"schema": 1e999, "records": []})", "db.json"); },
                           {"db.json: not valid JSON", "number overflow"});
  test::expect_input_error(
      [] { list_safetensors(safetensors_with_header(R"({"__metadata__": {"a": 1e999}})"), "h.safetensors"); },
      {"h.safetensors: byte 8: header JSON", "number overflow"});
}

}  // namespace
}  // namespace sparsecc
