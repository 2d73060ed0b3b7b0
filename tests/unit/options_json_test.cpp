// The planners' options codec (sparsecc/inspector/options_json.hpp): round trips, the errors, and the
// recorded tuning databases of tests/data/tuning, whose every candidate's options still read.
#include "sparsecc/inspector/options_json.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sparsecc/common/error.hpp"
#include "sparsecc/tune/database.hpp"
#include "sparsecc/tune/hines_tuner.hpp"
#include "sparsecc/tune/space.hpp"
#include "test_support.hpp"

namespace sparsecc {
namespace {

void expect_usage_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected UsageError containing '" << parts.front() << "'";
  } catch (const UsageError& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(OptionsJson, SpmmOptionsRoundTrip) {
  SpmmOptions o;
  EXPECT_EQ(to_json(o),
            nlohmann::json::parse(R"({"rows_per_block":0,"n_tile":0,"groups":0,"max_registers":0})"));
  EXPECT_EQ(to_json(spmm_options_from_json(to_json(o), "t")), to_json(o));
  o.rows_per_block = 4;
  o.n_tile = 64;
  o.groups = 2;
  o.cols_per_thread = 2;
  o.step_lanes = 8;
  o.max_registers = 96;
  o.stage_min_entries = 3;
  o.assembler_opt_level = 1;
  o.row_split = SpmmRowSplit::balanced;
  o.value_mode = SpmmValueMode::streamed;
  o.baked_instruction_budget = 1000;
  o.kernel_name = "layer_3";
  o.accumulate = DType::f16;
  set_blocklets(o, "16x8:0.75");
  o.programmatic = SpmmProgrammatic::wait;
  const nlohmann::json j = to_json(o);
  EXPECT_EQ(j.at("blocklets"), "16x8:0.75");
  EXPECT_EQ(j.at("programmatic"), "wait");
  const SpmmOptions back = spmm_options_from_json(j, "t");
  EXPECT_EQ(to_json(back), j);
  EXPECT_EQ(back.blocklet_shape, (BlockShape{16, 8}));
  EXPECT_EQ(back.blocklet_fill, 0.75);
  EXPECT_EQ(back.row_split, SpmmRowSplit::balanced);
  EXPECT_EQ(back.assembler_opt_level, 1);
  // Keys absent keep the base's values.
  SpmmOptions base;
  base.kernel_name = "kept";
  EXPECT_EQ(spmm_options_from_json({{"n_tile", 32}}, "t", base).kernel_name, "kept");
}

TEST(OptionsJson, SpmmOptionsErrorsNameTheContextAndTheKey) {
  expect_usage_error(
      [] {
        spmm_options_from_json({{"n_tile", "wide"}}, "opts");
      },
      {"opts: 'n_tile' must be an integer"});
  expect_usage_error(
      [] {
        spmm_options_from_json({{"value_mode", 3}}, "opts");
      },
      {"opts: 'value_mode' must be a string"});
  expect_usage_error(
      [] {
        spmm_options_from_json({{"row_split", "diagonal"}}, "opts");
      },
      {"opts: 'row_split'"});
  expect_usage_error([] { spmm_options_from_json({{"blocklets", "3x3"}}, "opts"); }, {"3x3"});
  expect_usage_error([] { spmm_options_from_json(nlohmann::json::array(), "opts"); },
                     {"opts: expected an object"});
}

TEST(OptionsJson, HinesOptionsRoundTrip) {
  HinesOptions o;
  o.decomposition = HinesDecomposition::minimal;
  o.k = 5;
  o.k_large = 9;
  o.depth = 3;
  o.block_threads = 128;
  o.code = "unrolled";
  const HinesOptions back = hines_options_from_json(to_json(o), "db");
  EXPECT_EQ(to_json(back), to_json(o));
  EXPECT_EQ(tune::hines_options_json(o), to_json(o));
  EXPECT_THROW(hines_options_from_json({{"depth", 1.5}}, "db"), InputError);
}

// Every candidate and winner of the recorded tuning databases reads through the codec.
TEST(OptionsJson, RecordedTuningDatabasesRead) {
  const auto dir = test::source_dir() / "tests/data/tuning";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "no recorded tuning databases in " << dir.string();
  std::size_t files = 0, options = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    ++files;
    const tune::TuningDatabase db = tune::read_database_file(entry.path().string());
    for (const tune::TuningRecord& r : db.records) {
      if (r.key.op != "spmm") continue;
      for (const tune::CandidateTiming& t : r.timings) {
        if (t.options.empty()) continue;
        const auto [o, emitter] = tune::spmm_options_from_json(t.options, {});
        // Written again, the options are the recorded ones (the codec's keys, and the emitter).
        nlohmann::json again = to_json(o);
        again["emitter"] = to_string(emitter);
        EXPECT_EQ(again, t.options) << entry.path().filename().string() << ": " << t.label;
        ++options;
      }
      if (!r.winner_options.empty()) EXPECT_NO_THROW(tune::spmm_options_from_json(r.winner_options, {}));
    }
  }
  EXPECT_GT(files, 0u);
  EXPECT_GT(options, 0u);
}

}  // namespace
}  // namespace sparsecc
