// The tuning-database lookup of `compile --db`, `compile-model --db`, `hines --db` and
// `sparsecc_bench --db` (tune/lookup.hpp): a record whose key matches gives its winner; without one the
// predictor chooses (warm) or the automatic plan stays (cold L2); a GPU name left empty matches any
// GPU of the compute capability; a database that cannot be read is an error naming it.
#include <gtest/gtest.h>

#include "sparsecc/common/error.hpp"
#include "sparsecc/neuron/hines.hpp"
#include "sparsecc/neuron/morphology.hpp"
#include "sparsecc/tune/database.hpp"
#include "sparsecc/tune/hines_tuner.hpp"
#include "sparsecc/tune/lookup.hpp"
#include "sparsecc/tune/tuner.hpp"
#include "test_support.hpp"

namespace sparsecc {
namespace {

constexpr const char* kGpu = "NVIDIA H100 80GB HBM3";

std::string shipped(const std::string& name) {
  return (test::source_dir() / "tests" / "data" / "tuning" / name).string();
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// A database holding one record of a shipped file, re-keyed for `key`, with winner options that differ
// from the automatic plan (rows per block 2).
tune::TuningRecord record_for(const tune::TuningKey& key) {
  tune::TuningRecord r =
      tune::read_database_file(shipped("h100_sparsert90_b1_exhaustive_tune.json")).records.at(0);
  r.key = key;
  r.winner = "R2/test";
  r.winner_options["rows_per_block"] = 2;  // the shipped winner had 32
  r.winner_us = 3;
  r.default_us = 6;
  return r;
}

TEST(TuneLookup, ARecordOfTheMatrixGivesItsWinner) {
  test::TempDir dir;
  const std::string db = dir.file("tuning.json");
  const CsrMatrix a = test::random_csr(96, 64, 0.1, 4);
  const SpmmProblem p = test::problem_for(a, 128);
  tune::update_database(db, {record_for(tune::spmm_tuning_key(a, p, kGpu, "9.0"))});

  const tune::TunedChoice c =
      tune::choose_tuned_plan(db, a, p, {}, KernelLanguage::ptx, gpu_target("sm_90"), kGpu);
  EXPECT_TRUE(starts_with(c.how, "tuned plan R2/test from " + db)) << c.how;
  EXPECT_NE(c.how.find("3.00 us; the default plan 6.00 us"), std::string::npos) << c.how;
  EXPECT_EQ(c.options.rows_per_block, 2);

  // Another GPU of the same name does not match; a cold-L2 lookup does not take a warm record.
  const tune::TunedChoice other =
      tune::choose_tuned_plan(db, a, p, {}, KernelLanguage::ptx, gpu_target("sm_90"), "Other GPU");
  EXPECT_TRUE(starts_with(other.how, "no record in " + db +
                                         " for this matrix and problem on Other GPU: the "
                                         "predictor's choice"))
      << other.how;
  SpmmOptions base;
  base.rows_per_block = 16;
  const tune::TunedChoice cold =
      tune::choose_tuned_plan(db, a, p, base, KernelLanguage::ptx, gpu_target("sm_90"), kGpu, true);
  EXPECT_TRUE(starts_with(cold.how, "no cold-L2 record in " + db)) << cold.how;
  EXPECT_EQ(cold.options.rows_per_block, 16);  // the automatic plan: `base` as given
  EXPECT_EQ(cold.emitter, KernelLanguage::ptx);

  // A cold record answers the cold lookup only.
  tune::update_database(db, {record_for(tune::spmm_tuning_key(a, p, kGpu, "9.0", true))});
  const tune::TunedChoice cold2 =
      tune::choose_tuned_plan(db, a, p, base, KernelLanguage::ptx, gpu_target("sm_90"), kGpu, true);
  EXPECT_TRUE(starts_with(cold2.how, "tuned plan R2/test")) << cold2.how;
  EXPECT_NE(cold2.how.find(", cold L2"), std::string::npos) << cold2.how;
}

TEST(TuneLookup, WithoutARecordThePredictorRanksTheSpace) {
  // A shipped database of other matrices: no record of this one.
  const std::string db = shipped("h100_sparsert90_b1_exhaustive_tune.json");
  const CsrMatrix a = test::random_csr(128, 96, 0.1, 6);
  const tune::TunedChoice c = tune::choose_tuned_plan(db, a, test::problem_for(a, 64), {},
                                                      KernelLanguage::ptx, gpu_target("sm_90"), kGpu);
  EXPECT_TRUE(starts_with(c.how, "no record in " + db + " for this matrix and problem on " + kGpu)) << c.how;
  EXPECT_NE(c.how.find("unrolled candidates"), std::string::npos) << c.how;
  // The choice plans.
  EXPECT_NO_THROW(plan_spmm(a, test::problem_for(a, 64), c.options));
  // The same inputs, the same choice.
  EXPECT_EQ(tune::choose_tuned_plan(db, a, test::problem_for(a, 64), {}, KernelLanguage::ptx,
                                    gpu_target("sm_90"), kGpu)
                .how,
            c.how);
}

TEST(TuneLookup, AnUnreadableDatabaseIsAnErrorNamingIt) {
  test::TempDir dir;
  const std::string db = dir.file("broken.json");
  test::write_text(db, "[1, 2");
  const CsrMatrix a = test::random_csr(32, 32, 0.2, 1);
  test::expect_input_error(
      [&] {
        tune::choose_tuned_plan(db, a, test::problem_for(a, 8), {}, KernelLanguage::ptx, gpu_target("sm_90"),
                                kGpu);
      },
      {"broken.json"});
  // A missing database is an empty one.
  EXPECT_TRUE(starts_with(tune::choose_tuned_plan(dir.file("none.json"), a, test::problem_for(a, 8), {},
                                                  KernelLanguage::ptx, gpu_target("sm_90"), kGpu)
                              .how,
                          "no record in"));
}

TEST(TuneLookup, HinesRecordOrTheRules) {
  test::TempDir dir;
  const std::string db = dir.file("tuning.json");
  const HinesSystem s = assemble_hines(make_demo_neuron());
  HinesOptions base;
  base.k = 4;
  const tune::TunedHines none = tune::choose_tuned_hines(db, s, 1, "f64", base, gpu_target("sm_90"), kGpu);
  EXPECT_EQ(none.how, "no record in " + db + " for this forest and problem on " + std::string(kGpu) +
                          ": the planner's rules");
  EXPECT_EQ(none.options.k, 4);

  HinesOptions tuned = base;
  tuned.k = 8;
  tuned.depth = 2;
  tune::TuningRecord r;
  r.key = tune::hines_tuning_key(s, 1, "f64", kGpu, "9.0");
  r.winner = "K8/D2";
  r.winner_options = tune::hines_options_json(tuned);
  r.winner_us = 5;
  r.default_us = 7.5;
  tune::update_database(db, {r});
  const tune::TunedHines found = tune::choose_tuned_hines(db, s, 1, "f64", base, gpu_target("sm_90"), kGpu);
  EXPECT_EQ(found.how,
            "tuned plan K8/D2 from " + db + " (" + kGpu + ", 5.00 us per step; the default plan 7.50 us)");
  EXPECT_EQ(found.options.k, 8);
  EXPECT_EQ(found.options.depth, 2);
  // Another R is another problem.
  EXPECT_EQ(tune::choose_tuned_hines(db, s, 2, "f64", base, gpu_target("sm_90"), kGpu).options.k, 4);
}

}  // namespace
}  // namespace sparsecc
