// The tuning database: JSON round trips, key matching, tolerance of damaged files, and updates that
// stay whole under concurrent writers (threads and processes) and failed writes.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <set>
#include <thread>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/file.hpp"
#include "sparsecc/common/version.hpp"
#include "sparsecc/tune/database.hpp"
#include "test_support.hpp"

using namespace sparsecc;
using namespace sparsecc::tune;
using nlohmann::json;

namespace {

TuningKey make_key(const std::string& fingerprint = "00ff00ff") {
  TuningKey k;
  k.op = "spmm";
  k.fingerprint = fingerprint;
  k.params = {{"m", 512},       {"k", 1024},    {"n", 64},      {"n_mode", "fixed"},
              {"dtype", "f16"}, {"bias", true}, {"relu", false}};
  k.gpu = "NVIDIA H100 80GB HBM3";
  k.compute_capability = "9.0";
  k.generator_version = kVersion;
  return k;
}

TuningRecord make_record(const std::string& fingerprint = "00ff00ff",
                         const std::string& winner = "R4/T64/G1") {
  TuningRecord r;
  r.key = make_key(fingerprint);
  r.winner = winner;
  r.winner_options = {{"rows_per_block", 4}, {"n_tile", 64}, {"groups", 1}};
  r.winner_us = 12.5;
  r.default_us = 20.25;
  r.strategy = "exhaustive";
  r.tuning_seconds = 3.5;
  r.recorded_at = "2025-01-02T03:04:05Z";
  CandidateTiming good;
  good.label = winner;
  good.options = r.winner_options;
  good.features = {{"nnz", 4096}, {"rows", 512}, {"mean_row", 8.0}};
  good.median_us = 12.5;
  good.rel_error = 1e-4;
  good.verified = true;
  good.compile_seconds = 0.75;
  CandidateTiming bad;
  bad.label = "R8/T128/G2";
  bad.options = {{"rows_per_block", 8}};
  bad.compile_seconds = 0.5;
  bad.error = "ptxas: too many resources requested for launch";
  r.timings = {good, bad};
  return r;
}

std::string slurp(const std::string& path) {
  const Bytes b = read_file(path);
  return std::string(b.begin(), b.end());
}

// Every record of the file at `path`, parsed strictly (throws if the file is not a valid database).
TuningDatabase strict_load(const std::string& path) {
  return database_from_json(json::parse(slurp(path)), path);
}

// Only the database and its lock file: no temporaries left behind.
void expect_no_leftovers(const test::TempDir& dir) {
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    const std::string name = e.path().filename().string();
    EXPECT_TRUE(name == "db.json" || name == "db.json.lock") << "left behind: " << name;
  }
}

}  // namespace

TEST(TuneDatabase, JsonRoundTripKeepsEveryFieldAndNaN) {
  TuningDatabase db;
  TuningRecord a = make_record("aa");
  a.key.params["nested"] = {{"tile", {{"x", 2}, {"y", json::array({1, 2, 3})}}}, {"name", "q"}};
  TuningRecord b = make_record("bb");
  b.timings.clear();
  b.default_us = std::nan("");
  b.winner_us = INFINITY;  // non-finite reads back as NaN
  db.put(a);
  db.put(b);

  const std::string text = to_json(db).dump(1);
  EXPECT_EQ(text.find("NaN"), std::string::npos);
  const json j = json::parse(text);
  EXPECT_EQ(j.at("schema"), kTuningDbSchema);
  EXPECT_EQ(j.at("generator"), kVersion);
  EXPECT_TRUE(j.at("records")[1].at("default_us").is_null());
  EXPECT_TRUE(j.at("records")[0].at("timings")[1].at("median_us").is_null());

  const TuningDatabase back = database_from_json(j, "db.json");
  ASSERT_EQ(back.records.size(), 2u);
  const TuningRecord& ra = back.records[0];
  EXPECT_EQ(ra.key, a.key);
  EXPECT_EQ(ra.key.params.at("nested").at("tile").at("y")[2], 3);
  EXPECT_EQ(ra.winner, a.winner);
  EXPECT_EQ(ra.winner_options, a.winner_options);
  EXPECT_EQ(ra.winner_us, 12.5);
  EXPECT_EQ(ra.default_us, 20.25);
  EXPECT_EQ(ra.strategy, "exhaustive");
  EXPECT_EQ(ra.tuning_seconds, 3.5);
  EXPECT_EQ(ra.recorded_at, a.recorded_at);
  ASSERT_EQ(ra.timings.size(), 2u);
  EXPECT_EQ(ra.timings[0].label, a.timings[0].label);
  EXPECT_EQ(ra.timings[0].options, a.timings[0].options);
  EXPECT_EQ(ra.timings[0].features, a.timings[0].features);
  EXPECT_EQ(ra.timings[0].median_us, 12.5);
  EXPECT_EQ(ra.timings[0].rel_error, 1e-4);
  EXPECT_TRUE(ra.timings[0].verified);
  EXPECT_EQ(ra.timings[0].compile_seconds, 0.75);
  EXPECT_TRUE(ra.timings[0].error.empty());
  EXPECT_TRUE(std::isnan(ra.timings[1].median_us));
  EXPECT_TRUE(std::isnan(ra.timings[1].rel_error));
  EXPECT_FALSE(ra.timings[1].verified);
  EXPECT_EQ(ra.timings[1].error, a.timings[1].error);
  const TuningRecord& rb = back.records[1];
  EXPECT_TRUE(rb.timings.empty());
  EXPECT_TRUE(std::isnan(rb.default_us));
  EXPECT_TRUE(std::isnan(rb.winner_us));

  // Writing what was read gives the same text.
  EXPECT_EQ(to_json(back).dump(1), text);
}

TEST(TuneDatabase, OptionalFieldsDefaultAndUnknownFieldsAreIgnored) {
  const json j = {
      {"schema", 1},
      {"future_field", 7},
      {"records",
       {{{"key", to_json(make_key())}, {"winner", "w"}, {"timings", {{{"label", "w"}}}}, {"extra", 1}}}}};
  const TuningDatabase db = database_from_json(j, "db.json");
  ASSERT_EQ(db.records.size(), 1u);
  const TuningRecord& r = db.records[0];
  EXPECT_TRUE(std::isnan(r.winner_us));
  EXPECT_TRUE(std::isnan(r.default_us));
  EXPECT_EQ(r.winner_options, json::object());
  ASSERT_EQ(r.timings.size(), 1u);
  EXPECT_TRUE(std::isnan(r.timings[0].median_us));
  EXPECT_FALSE(r.timings[0].verified);
  EXPECT_EQ(r.timings[0].compile_seconds, 0);
}

TEST(TuneDatabase, BadFieldsAreReportedWithTheirJsonPath) {
  json j = to_json(TuningDatabase{{make_record("a"), make_record("b")}});
  json bad = j;
  bad["records"][1]["key"]["gpu"] = 3;
  test::expect_input_error([&] { database_from_json(bad, "tune.json"); },
                           {"tune.json", "records[1].key.gpu", "expected a string", "number"});
  bad = j;
  bad["records"][0]["key"].erase("compute_capability");
  test::expect_input_error([&] { database_from_json(bad, "tune.json"); },
                           {"records[0].key.compute_capability", "missing"});
  bad = j;
  bad["records"][0]["timings"][1]["median_us"] = "fast";
  test::expect_input_error([&] { database_from_json(bad, "tune.json"); },
                           {"records[0].timings[1].median_us", "expected a number"});
  bad = j;
  bad["records"][1]["timings"][0]["features"]["nnz"] = "many";
  test::expect_input_error([&] { database_from_json(bad, "tune.json"); },
                           {"records[1].timings[0].features.nnz", "expected a number"});
  bad = j;
  bad["records"][0]["key"]["params"] = json::array();
  test::expect_input_error([&] { database_from_json(bad, "tune.json"); },
                           {"records[0].key.params", "expected an object"});
  bad = j;
  bad["schema"] = 0;
  test::expect_input_error([&] { database_from_json(bad, "tune.json"); }, {"schema", "unsupported"});
  test::expect_input_error([&] { database_from_json(json::array(), "tune.json"); },
                           {"tune.json", "top level"});
}

TEST(TuneDatabase, KeysMatchOnlyWhenEveryFieldIsEqual) {
  const TuningKey base = make_key();
  TuningDatabase db;
  db.put(make_record());
  ASSERT_NE(db.find(base), nullptr);
  EXPECT_EQ(key_string(base), key_string(make_key()));

  std::vector<TuningKey> others(7, base);
  others[0].op = "hines";
  others[1].fingerprint = "00ff00fe";
  others[2].params["n"] = 128;
  others[3].gpu = "NVIDIA H200";
  others[4].compute_capability = "8.0";
  others[5].generator_version = "0.0.1";
  others[6].params.erase("relu");
  std::set<std::string> strings{key_string(base)};
  for (const TuningKey& k : others) {
    EXPECT_FALSE(k == base) << key_string(k);
    EXPECT_EQ(db.find(k), nullptr) << key_string(k);
    strings.insert(key_string(k));
  }
  EXPECT_EQ(strings.size(), others.size() + 1);

  // Parameter order is irrelevant, to matching and to the canonical text.
  TuningKey reordered = base;
  reordered.params =
      json::parse(R"({"relu":false,"bias":true,"dtype":"f16","n_mode":"fixed","n":64,"k":1024,"m":512})");
  EXPECT_TRUE(reordered == base);
  EXPECT_NE(db.find(reordered), nullptr);
  EXPECT_EQ(key_string(reordered), key_string(base));
  EXPECT_EQ(key_string(base).find('\n'), std::string::npos);
}

TEST(TuneDatabase, PutReplacesTheRecordWithTheSameKey) {
  TuningDatabase db;
  db.put(make_record("a", "first"));
  db.put(make_record("b", "other"));
  db.put(make_record("a", "second"));
  ASSERT_EQ(db.records.size(), 2u);
  EXPECT_EQ(db.find(make_key("a"))->winner, "second");
  EXPECT_EQ(db.find(make_key("b"))->winner, "other");
  EXPECT_EQ(db.records[0].key, make_key("a"));  // replaced in place
}

TEST(TuneDatabase, MissingFileIsEmptyWithoutWarnings) {
  test::TempDir dir;
  std::vector<std::string> warnings;
  const TuningDatabase db = load_database(dir.file("absent.json"), &warnings);
  EXPECT_TRUE(db.records.empty());
  EXPECT_TRUE(warnings.empty());
  EXPECT_TRUE(load_database(dir.file("absent.json")).records.empty());
}

TEST(TuneDatabase, CorruptFilesAreReportedAndIgnored) {
  test::TempDir dir;
  const std::string good = to_json(TuningDatabase{{make_record()}}).dump(1);
  json wrong_type = json::parse(good);
  wrong_type["records"][0]["verified_typo"] = 1;  // ignored
  wrong_type["records"][0]["timings"][0]["verified"] = "yes";
  json records_not_array = json::parse(good);
  records_not_array["records"] = json::object();
  struct Case {
    std::string name, text, detail;
  };
  const std::vector<Case> cases = {
      {"truncated.json", good.substr(0, good.size() / 2), "byte "},
      {"empty.json", "", "not valid JSON"},
      {"array.json", "[1, 2]", "top level"},
      {"schema0.json", R"({"schema": 0, "records": []})", "schema"},
      {"schema_text.json", R"({"schema": "1", "records": []})", "schema"},
      {"no_records.json", R"({"schema": 1})", "records"},
      {"records_object.json", records_not_array.dump(), "records: expected an array"},
      {"wrong_type.json", wrong_type.dump(1), "records[0].timings[0].verified"},
      {"newer.json", R"({"schema": 2, "generator": "9.9.9", "records": [{"anything": 1}]})", "schema 2"},
  };
  for (const Case& c : cases) {
    const std::string path = dir.file(c.name);
    test::write_text(path, c.text);
    // A command that only reads the database refuses it, naming the file and the problem.
    try {
      read_database_file(path);
      ADD_FAILURE() << c.name << ": read_database_file accepted it";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.detail), std::string::npos) << e.what();
    }
    std::vector<std::string> warnings;
    TuningDatabase db;
    EXPECT_NO_THROW(db = load_database(path, &warnings)) << c.name;
    EXPECT_TRUE(db.records.empty()) << c.name;
    ASSERT_EQ(warnings.size(), 1u) << c.name;
    EXPECT_NE(warnings[0].find(path), std::string::npos) << warnings[0];
    EXPECT_NE(warnings[0].find(c.detail), std::string::npos) << warnings[0];
    EXPECT_NO_THROW(load_database(path)) << c.name;  // no warning sink: still quiet
  }
  // A directory where the file should be is unreadable, not fatal either.
  std::vector<std::string> warnings;
  EXPECT_TRUE(load_database(dir.path().string(), &warnings).records.empty());
  EXPECT_EQ(warnings.size(), 1u);
  // So are a device and a FIFO, refused at once instead of read until memory runs out.
  const std::string fifo = dir.file("pipe.json");
  for (const std::string& special : {std::string("/dev/zero"), fifo}) {
    if (special == fifo ? ::mkfifo(fifo.c_str(), 0600) != 0 : !std::filesystem::exists(special)) continue;
    warnings.clear();
    EXPECT_THROW(read_database_file(special), InputError) << special;
    EXPECT_TRUE(load_database(special, &warnings).records.empty());
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("not a regular file"), std::string::npos) << warnings[0];
  }
  // The good text itself loads.
  test::write_text(dir.file("good.json"), good);
  warnings.clear();
  EXPECT_EQ(load_database(dir.file("good.json"), &warnings).records.size(), 1u);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(read_database_file(dir.file("good.json")).records.size(), 1u);
  EXPECT_TRUE(read_database_file(dir.file("absent.json")).records.empty());
}

TEST(TuneDatabase, UpdateCreatesMergesAndReplaces) {
  test::TempDir dir;
  const std::string path = dir.file("db.json");
  std::vector<std::string> warnings;
  update_database(path, {make_record("a", "first"), make_record("b", "b1")}, &warnings);
  update_database(path, {make_record("a", "second"), make_record("c", "c1")}, &warnings);
  EXPECT_TRUE(warnings.empty());
  const TuningDatabase db = strict_load(path);
  ASSERT_EQ(db.records.size(), 3u);
  EXPECT_EQ(db.find(make_key("a"))->winner, "second");
  EXPECT_EQ(db.find(make_key("b"))->winner, "b1");
  EXPECT_EQ(db.find(make_key("c"))->winner, "c1");
  EXPECT_EQ(load_database(path).records.size(), 3u);
  expect_no_leftovers(dir);
  const std::string text = slurp(path);
  EXPECT_EQ(text.back(), '\n');
  EXPECT_NE(text.find("\n"), text.size() - 1);  // pretty-printed
}

TEST(TuneDatabase, ConcurrentThreadsLoseNoRecords) {
  test::TempDir dir;
  const std::string path = dir.file("db.json");
  constexpr int kThreads = 8, kEach = 5;
  std::vector<std::thread> threads;
  std::vector<std::string> errors(kThreads);
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      try {
        for (int i = 0; i < kEach; ++i) update_database(path, {make_record(fmt::format("t{}-{}", t, i))});
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  for (std::thread& th : threads) th.join();
  for (const std::string& e : errors) EXPECT_TRUE(e.empty()) << e;
  const TuningDatabase db = strict_load(path);
  EXPECT_EQ(db.records.size(), std::size_t{kThreads * kEach});
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i < kEach; ++i) EXPECT_NE(db.find(make_key(fmt::format("t{}-{}", t, i))), nullptr);
  expect_no_leftovers(dir);
}

TEST(TuneDatabase, ConcurrentProcessesLoseNoRecords) {
  test::TempDir dir;
  const std::string path = dir.file("db.json");
  update_database(path, {make_record("parent")});
  constexpr int kChildren = 4, kEach = 6;
  std::vector<pid_t> children;
  for (int c = 0; c < kChildren; ++c) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int status = 0;
      try {
        for (int i = 0; i < kEach; ++i)
          update_database(
              path, {make_record(fmt::format("p{}-{}", c, i)), make_record("parent", fmt::format("c{}", c))});
      } catch (...) {
        status = 1;
      }
      ::_exit(status);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  const TuningDatabase db = strict_load(path);
  EXPECT_EQ(db.records.size(), std::size_t{kChildren * kEach + 1});
  for (int c = 0; c < kChildren; ++c)
    for (int i = 0; i < kEach; ++i) EXPECT_NE(db.find(make_key(fmt::format("p{}-{}", c, i))), nullptr);
  ASSERT_NE(db.find(make_key("parent")), nullptr);
  EXPECT_EQ(db.find(make_key("parent"))->winner.front(), 'c');  // replaced by some child, never duplicated
  expect_no_leftovers(dir);
}

TEST(TuneDatabase, UpdateRefusesToReplaceACorruptFile) {
  test::TempDir dir;
  const std::string path = dir.file("db.json");
  const std::string text = R"({"schema": 1, "records": [{"key": )";
  test::write_text(path, text);
  std::vector<std::string> warnings;
  try {
    update_database(path, {make_record("new")}, &warnings);
    ADD_FAILURE() << "a corrupt database was replaced";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not a tuning database"), std::string::npos) << e.what();
  }
  EXPECT_EQ(slurp(path), text);  // the user's file as it was
}

TEST(TuneDatabase, UpdateRefusesToReplaceANewerSchema) {
  test::TempDir dir;
  const std::string path = dir.file("db.json");
  const std::string newer = R"({"schema": 2, "generator": "9.0.0", "records": []})";
  test::write_text(path, newer);
  test::expect_input_error([&] { update_database(path, {make_record()}); }, {path, "schema 2"});
  EXPECT_EQ(slurp(path), newer);
}

TEST(TuneDatabase, FailedWritesThrowAndKeepTheOriginal) {
  test::TempDir dir;
  const std::string path = dir.file("db.json");
  update_database(path, {make_record("kept")});
  const std::string before = slurp(path);

  // The path is a directory.
  const std::string as_dir = dir.file("dir.json");
  std::filesystem::create_directory(as_dir);
  EXPECT_THROW(update_database(as_dir, {make_record()}), std::runtime_error);
  EXPECT_TRUE(std::filesystem::is_directory(as_dir));
  EXPECT_TRUE(std::filesystem::is_empty(as_dir));
  std::filesystem::remove(as_dir);
  std::filesystem::remove(as_dir + ".lock");

  // The write itself fails half way (file size limit), in a child so the limit stays there.
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{256, 256};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    int status = 3;
    try {
      update_database(path, {make_record("big")});
      status = 1;
    } catch (const std::runtime_error& e) {
      status = std::string(e.what()).find(path) != std::string::npos ? 0 : 2;
    }
    ::_exit(status);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(slurp(path), before);
  expect_no_leftovers(dir);

  // The directory is not writable (meaningless for root, who may write anyway).
  ::chmod(dir.path().c_str(), 0555);
  const bool enforced = ::access(dir.path().c_str(), W_OK) != 0;
  if (enforced) {
    EXPECT_THROW(update_database(path, {make_record("new")}), std::runtime_error);
    EXPECT_EQ(slurp(path), before);
  }
  ::chmod(dir.path().c_str(), 0755);
  expect_no_leftovers(dir);
  EXPECT_EQ(strict_load(path).records.size(), 1u);
  RecordProperty("unwritable_directory_checked", enforced ? "yes" : "no (root)");
}
