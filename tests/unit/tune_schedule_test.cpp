// The multi-matrix tune scheduler (tune/schedule.hpp) with fake compile and GPU stages: the budget
// shared by weight, the searches at once, one measurement at a time, every record in the database and
// in the jobs' order, the first failure stopping the run; refreshing features and collecting the
// predictor's samples of databases.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <thread>

#include "sparsecc/bundle/spmm_bundle.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/tune/schedule.hpp"
#include "test_support.hpp"
#include "tune_support.hpp"

namespace sparsecc {
namespace {

// Times by rows per block and groups (the best is R8, one group); checks that no two measurements
// overlap (the scheduler times one candidate at a time).
class FakeGpu : public tune::SpmmMeasurer {
 public:
  explicit FakeGpu(std::atomic<int>& running, std::atomic<int>& overlaps, std::atomic<int>& measured)
      : running_(running), overlaps_(overlaps), measured_(measured) {}
  tune::Measurement measure(const tune::SpmmCandidate& c, const rt::Bundle& bundle) override {
    if (++running_ > 1) ++overlaps_;
    EXPECT_EQ(bundle.metadata.kernel, c.label);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    tune::Measurement m;
    m.verified = true;
    m.median_us = 10 + std::fabs(std::log2(c.plan.layout.rows_per_block) - 3) + (c.plan.layout.groups - 1);
    ++measured_;
    --running_;
    return m;
  }

 private:
  std::atomic<int>& running_;
  std::atomic<int>& overlaps_;
  std::atomic<int>& measured_;
};

rt::Bundle fake_bundle(const tune::TuneJob&, const tune::SpmmCandidate& c) {
  rt::Bundle b;
  b.metadata.kernel = c.label;
  return b;
}

std::vector<tune::TuneJob> make_jobs(std::size_t count) {
  std::vector<tune::TuneJob> jobs;
  for (std::size_t i = 0; i < count; ++i) {
    tune::TuneJob job;
    job.name = "m" + std::to_string(i);
    job.a = test::random_csr(64 + 16 * static_cast<std::int64_t>(i), 48, 0.1, 11 + i);
    job.problem = test::problem_for(job.a, 32);
    jobs.push_back(std::move(job));
  }
  return jobs;
}

tune::TuneManyOptions options_for(const std::string& db) {
  tune::TuneManyOptions o;
  o.search.jobs = 4;
  o.dims = test::small_tune_dims();
  o.gpu = "Fake GPU";
  o.compute_capability = "9.0";
  o.database = db;
  return o;
}

TEST(TuneSchedule, WeightsAndBudgetShares) {
  const CsrMatrix a = test::random_csr(32, 32, 0.25, 3);
  EXPECT_DOUBLE_EQ(tune::tune_weight(a), static_cast<double>(a.nnz()) + 20000.0);

  // Each matrix's weight's part of what is left, times the searches beside it, within [0.1, left].
  const std::vector<double> w = {1, 1, 2};
  EXPECT_DOUBLE_EQ(tune::budget_share(100, w, 0, 1), 25);
  EXPECT_DOUBLE_EQ(tune::budget_share(100, w, 0, 2), 50);
  EXPECT_DOUBLE_EQ(tune::budget_share(100, w, 0, 3), 75);
  EXPECT_DOUBLE_EQ(tune::budget_share(90, w, 1, 3), 60);  // 90 * 1/3 * 2 beside
  EXPECT_DOUBLE_EQ(tune::budget_share(40, w, 2, 3), 40);  // the last: all that is left
  EXPECT_DOUBLE_EQ(tune::budget_share(100, {1, 100}, 0, 4), 100 * 2.0 / 101);
  EXPECT_DOUBLE_EQ(tune::budget_share(0.01, w, 0, 1), 0.1);  // never below 0.1 s
  EXPECT_DOUBLE_EQ(tune::budget_share(-5, w, 2, 1), 0.1);
}

TEST(TuneSchedule, SearchesAtOnceAreBoundedByMatricesAndThreads) {
  EXPECT_EQ(tune::searches_at_once(3, 10, 16), 3u);
  EXPECT_EQ(tune::searches_at_once(3, 2, 16), 2u);
  EXPECT_EQ(tune::searches_at_once(3, 10, 2), 2u);
  EXPECT_EQ(tune::searches_at_once(1, 10, 16), 1u);
  EXPECT_EQ(tune::searches_at_once(0, 10, 16), 1u);
  EXPECT_EQ(tune::searches_at_once(8, 0, 16), 1u);
}

TEST(TuneSchedule, TunesEveryMatrixOneMeasurementAtATimeAndRecordsThemAll) {
  test::TempDir dir;
  const std::string db = dir.file("tuning.json");
  const std::vector<tune::TuneJob> jobs = make_jobs(4);
  tune::TuneManyOptions o = options_for(db);
  o.matrices_at_once = 3;
  std::atomic<int> running{0}, overlaps{0}, measured{0}, made{0};
  std::mutex seen_mutex;
  std::set<std::size_t> progressed;
  std::vector<std::size_t> finished;
  tune::TuneManyCallbacks callbacks;
  callbacks.progress = [&](std::size_t i, const tune::TuneProgress& p) {
    EXPECT_GE(p.done, 1u);
    const std::lock_guard<std::mutex> lock(seen_mutex);
    progressed.insert(i);
  };
  callbacks.tuned = [&](const tune::TunedJob& t) {
    ASSERT_NE(t.record, nullptr);
    EXPECT_TRUE(t.warnings.empty());
    EXPECT_GE(t.record->timings.size(), t.space_size);  // exhaustive, and the winner's variants
    // Already in the database when reported.
    EXPECT_NE(tune::read_database_file(db).find(t.record->key), nullptr);
    finished.push_back(t.index);
  };
  const tune::TuneManyResult r = tune::tune_many(
      jobs, o,
      [&](const tune::TuneJob&) {
        ++made;
        return std::make_unique<FakeGpu>(running, overlaps, measured);
      },
      callbacks, fake_bundle);
  EXPECT_EQ(made.load(), 4);
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(progressed.size(), 4u);
  EXPECT_EQ(finished.size(), 4u);
  ASSERT_EQ(r.records.size(), 4u);
  std::size_t timings = 0;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const tune::TuningRecord& rec = r.records[i];
    EXPECT_EQ(rec.key, tune::spmm_tuning_key(jobs[i].a, jobs[i].problem, "Fake GPU", "9.0")) << i;
    EXPECT_EQ(rec.winner_us, 10);  // R8, one group
    EXPECT_GE(rec.default_us, rec.winner_us);
    timings += rec.timings.size();
  }
  EXPECT_EQ(measured.load(), static_cast<int>(timings));
  EXPECT_EQ(r.compared, 4u);
  EXPECT_GE(r.geomean_speedup, 1.0);
  EXPECT_GT(r.seconds, 0);
  EXPECT_EQ(tune::read_database_file(db).records.size(), 4u);
}

TEST(TuneSchedule, ColdL2KeysAndNoDatabase) {
  const std::vector<tune::TuneJob> jobs = make_jobs(2);
  tune::TuneManyOptions o = options_for("");
  o.cold_l2 = true;
  o.budget_seconds = 1000;
  std::atomic<int> running{0}, overlaps{0}, measured{0};
  const tune::TuneManyResult r = tune::tune_many(
      jobs, o, [&](const tune::TuneJob&) { return std::make_unique<FakeGpu>(running, overlaps, measured); },
      {}, fake_bundle);
  ASSERT_EQ(r.records.size(), 2u);
  for (const tune::TuningRecord& rec : r.records) EXPECT_TRUE(tune::tuned_cold_l2(rec.key));
}

TEST(TuneSchedule, TheFirstFailureStopsTheRunAndIsRethrown) {
  test::TempDir dir;
  const std::string db = dir.file("tuning.json");
  const std::vector<tune::TuneJob> jobs = make_jobs(3);
  tune::TuneManyOptions o = options_for(db);
  o.matrices_at_once = 1;  // one after another: m0 is tuned, m1 fails, m2 never starts
  std::atomic<int> running{0}, overlaps{0}, measured{0};
  std::vector<std::string> made;
  EXPECT_THROW(tune::tune_many(
                   jobs, o,
                   [&](const tune::TuneJob& job) -> std::unique_ptr<tune::SpmmMeasurer> {
                     made.push_back(job.name);
                     if (job.name == "m1") throw std::runtime_error("no device memory");
                     return std::make_unique<FakeGpu>(running, overlaps, measured);
                   },
                   {}, fake_bundle),
               std::runtime_error);
  EXPECT_EQ(made, (std::vector<std::string>{"m0", "m1"}));
  EXPECT_EQ(tune::read_database_file(db).records.size(), 1u);
}

TEST(TuneSchedule, RefreshFeaturesOfTheMatricesGiven) {
  test::TempDir dir;
  const std::string db = dir.file("tuning.json");
  const std::vector<tune::TuneJob> jobs = make_jobs(2);
  std::atomic<int> running{0}, overlaps{0}, measured{0};
  const tune::TuneManyResult tuned = tune::tune_many(
      jobs, options_for(db),
      [&](const tune::TuneJob&) { return std::make_unique<FakeGpu>(running, overlaps, measured); }, {},
      fake_bundle);
  // Forget the features of every timing, as a database of another feature set would have them.
  tune::TuningDatabase stale = tune::read_database_file(db);
  for (tune::TuningRecord& r : stale.records)
    for (tune::CandidateTiming& t : r.timings) t.features = nlohmann::json::object();
  tune::update_database(db, stale.records);

  // Only m0 given (twice: counted once): its record is refreshed, m1's left alone.
  const tune::RefreshResult r = tune::refresh_features(db, {jobs[0].a, jobs[0].a});
  EXPECT_TRUE(r.damaged.empty());
  EXPECT_EQ(r.database_records, 2u);
  EXPECT_EQ(r.matrices, 1u);
  EXPECT_EQ(r.refreshed, 1u);
  EXPECT_EQ(r.other, 1u);
  EXPECT_EQ(r.timings, tuned.records[0].timings.size());
  EXPECT_EQ(r.unplanned, 0u);
  const tune::TuningDatabase after = tune::read_database_file(db);
  for (const tune::TuningRecord& rec : after.records)
    for (const tune::CandidateTiming& t : rec.timings)
      EXPECT_EQ(t.features.empty(), rec.key.fingerprint != matrix_fingerprint(jobs[0].a)) << t.label;

  // A matrix of no record: nothing refreshed, nothing written.
  const auto before = std::filesystem::last_write_time(db);
  const tune::RefreshResult none = tune::refresh_features(db, {test::random_csr(8, 8, 0.5, 99)});
  EXPECT_EQ(none.refreshed, 0u);
  EXPECT_EQ(none.other, 2u);
  EXPECT_EQ(std::filesystem::last_write_time(db), before);

  // A damaged database is reported, not refreshed.
  test::write_text(db, "{ not json");
  const tune::RefreshResult damaged = tune::refresh_features(db, {jobs[0].a});
  ASSERT_EQ(damaged.damaged.size(), 1u);
  EXPECT_NE(damaged.damaged[0].find("tuning.json"), std::string::npos) << damaged.damaged[0];
  EXPECT_EQ(damaged.refreshed, 0u);
}

TEST(TuneSchedule, SamplesOfTheShippedDatabases) {
  const std::string dir = (test::source_dir() / "tests" / "data" / "tuning").string();
  const std::vector<std::string> files = {dir + "/h100_sparsert90_b1_exhaustive_tune.json",
                                          dir + "/h100_sparsert90_b1_cold_tune.json"};
  for (const bool cold : {false, true}) {
    const tune::DatabaseSamples s = tune::database_samples(files, cold);
    std::size_t expected = 0, stale = 0;
    for (const std::string& f : files) {
      std::size_t n = 0;
      expected += tune::predictor_samples(tune::read_database_file(f), &n, cold).size();
      stale += n > 0 ? 1 : 0;
    }
    EXPECT_EQ(s.samples.size(), expected) << cold;
    EXPECT_EQ(s.warnings.size(), stale) << cold;
    for (const std::string& w : s.warnings) EXPECT_NE(w.find("--refresh-features"), std::string::npos) << w;
  }
  EXPECT_GT(tune::database_samples({files[0]}, false).samples.size(), 0u);
  EXPECT_GT(tune::database_samples({files[1]}, true).samples.size(), 0u);
  EXPECT_TRUE(tune::database_samples({dir + "/no_such.json"}, false).samples.empty());  // missing: empty
}

}  // namespace
}  // namespace sparsecc
