// The tuner of CPU SpMM executors (sparsecc/llvm/cpu_tune.hpp): its space, a tuning run on a small
// matrix with a tiny budget, the record in a database file and the lookup `compile --target --db`
// makes.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "sparsecc/common/error.hpp"
#include "sparsecc/inspector/spmm_cpu_planner.hpp"
#include "sparsecc/plan/spmm_cpu_plan.hpp"
#include "sparsecc/reference/spmm.hpp"
#include "sparsecc/tune/database.hpp"
#include "test_support.hpp"
#if SPARSECC_HAVE_LLVM
#include "sparsecc/llvm/cpu_pipeline.hpp"
#include "sparsecc/llvm/cpu_tune.hpp"
#endif

using namespace sparsecc;

#if SPARSECC_HAVE_LLVM

namespace {

bool same_plan(const SpmmCpuPlan& x, const SpmmCpuPlan& y) {
  return x.column_tile == y.column_tile && x.rolled == y.rolled && x.panels == y.panels;
}

}  // namespace

TEST(CpuTune, SpaceHoldsDistinctValidPlansDefaultFirst) {
  const CsrMatrix a = round_values(test::random_csr(600, 300, 0.05, 7), DType::f32);
  for (const std::string isa : {"x86-64-avx512", "x86-64-avx2"})
    for (const std::int64_t n : {1, 7, 16, 33, 300}) {
      SCOPED_TRACE(isa + ", N = " + std::to_string(n));
      const CpuTarget t = cpu_target(isa);
      const SpmmProblem pr = test::problem_for(a, n, n % 2 == 1, n > 16);
      const std::vector<CpuSpmmCandidate> space = cpu_spmm_space(a, pr, t);
      ASSERT_FALSE(space.empty());
      EXPECT_TRUE(space[0].is_default);
      EXPECT_TRUE(same_plan(space[0].plan, plan_spmm_cpu(a, pr, t)));
      std::set<std::string> labels;
      for (std::size_t i = 0; i < space.size(); ++i) {
        const CpuSpmmCandidate& c = space[i];
        EXPECT_EQ(c.is_default, i == 0);
        EXPECT_TRUE(check_cpu_plan(c.plan, a).empty()) << c.label;
        EXPECT_TRUE(labels.insert(c.label).second) << "label twice: " << c.label;
        // The options reproduce the plan, also through their JSON.
        const SpmmCpuOptions o = spmm_cpu_options_from_json(to_json(c.options), "test");
        EXPECT_TRUE(same_plan(plan_spmm_cpu(a, pr, t, o), c.plan)) << c.label;
        EXPECT_LE(c.plan.column_tile, n);
        if (!c.plan.rolled && !c.is_default) {
          EXPECT_LE(c.options.panel_nnz, spmm_rules::kCpuMaxPanelNnz) << c.label;
        }
        for (std::size_t j = 0; j < i; ++j) EXPECT_FALSE(same_plan(space[j].plan, c.plan)) << c.label;
      }
      // Both code kinds where straight-line code fits the compile budget (this matrix is small).
      EXPECT_TRUE(std::any_of(space.begin(), space.end(), [](const auto& c) { return c.plan.rolled; }));
      EXPECT_TRUE(std::any_of(space.begin(), space.end(), [](const auto& c) { return !c.plan.rolled; }));
      if (n == 1) {
        EXPECT_TRUE(
            std::all_of(space.begin(), space.end(), [](const auto& c) { return c.plan.column_tile == 1; }));
      }
    }
  EXPECT_THROW(spmm_cpu_options_from_json({{"column_tile", "wide"}}, "db.json"), UsageError);
  EXPECT_THROW(spmm_cpu_options_from_json({{"rolled", 1}}, "db.json"), UsageError);
}

TEST(CpuTune, TunesASmallMatrixIntoADatabaseAndCompileTakesTheWinner) {
  const CpuTarget t = cpu_target("native");
  const CsrMatrix a = round_values(test::random_csr(400, 200, 0.04, 11), DType::f32);
  const SpmmProblem pr = test::problem_for(a, 24, true, true);
  std::vector<double> bias;
  for (std::int64_t r = 0; r < a.rows; ++r) bias.push_back(0.01 * static_cast<double>(r % 7) - 0.03);
  CpuTuneOptions options;
  options.threads = 1;
  options.budget_seconds = 3;
  options.seconds_per_timing = 0.02;
  std::size_t reports = 0;
  options.progress = [&](const tune::TuneProgress& p) {
    ++reports;
    EXPECT_EQ(p.done, reports);
    EXPECT_LE(p.done, p.planned);
  };
  const tune::TuningRecord record = tune_spmm_cpu(a, pr, bias, t, options);
  EXPECT_EQ(reports, record.timings.size());
  ASSERT_FALSE(record.winner.empty());
  ASSERT_FALSE(record.timings.empty());
  EXPECT_TRUE(record.timings[0].verified) << record.timings[0].error;
  EXPECT_EQ(record.timings[0].median_us, record.default_us);
  EXPECT_LE(record.winner_us, record.default_us);
  for (const tune::CandidateTiming& c : record.timings)
    if (c.verified) {
      EXPECT_GE(c.median_us, record.winner_us) << c.label;
    }
  EXPECT_EQ(record.key.op, "spmm_cpu");
  EXPECT_EQ(record.key.gpu, cpu_model_name(t));
  EXPECT_EQ(record.key.compute_capability, cpu_isa_name(t));
  EXPECT_EQ(record.key.params["threads"], 1);
  EXPECT_EQ(record.key.params["dtype"], "f32");
  EXPECT_EQ(record.key.params["n"], 24);

  // The winner's options reproduce a plan whose code checks.
  CpuSpmmRequest request;
  request.problem = pr;
  request.options = spmm_cpu_options_from_json(record.winner_options, "record");
  request.bias = bias;
  const CpuSpmmArtifact art = compile_spmm_cpu(a, request, t);
  EXPECT_TRUE(check_spmm_cpu(art, a, bias).ok());

  // Through a database file, beside a GPU record.
  test::TempDir dir;
  const std::string db = (dir.path() / "tuning.json").string();
  tune::TuningRecord gpu = record;
  gpu.key.op = "spmm";
  gpu.key.gpu = "NVIDIA H200";
  gpu.key.compute_capability = "9.0";
  tune::update_database(db, {gpu, record});
  const tune::TuningDatabase loaded = tune::read_database_file(db);
  ASSERT_EQ(loaded.records.size(), 2u);
  const tune::TuningRecord* back = loaded.find(record.key);
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(tune::to_json(*back), tune::to_json(record));

  // compile --db on this CPU model takes the winner (timed on 1 thread: the only record);
  CpuTunedChoice choice = choose_tuned_cpu_plan(db, a, pr, t);
  EXPECT_TRUE(choice.tuned) << choice.how;
  EXPECT_NE(choice.how.find(record.winner), std::string::npos) << choice.how;
  EXPECT_EQ(to_json(choice.options), record.winner_options);
  // on another CPU model, another ISA or another problem, it misses and plans automatically.
  choice = choose_tuned_cpu_plan(db, a, pr, t, "Some Other CPU");
  EXPECT_FALSE(choice.tuned);
  EXPECT_NE(choice.how.find("no record"), std::string::npos) << choice.how;
  EXPECT_EQ(to_json(choice.options), to_json(SpmmCpuOptions{}));
  const CpuTarget other = cpu_target(cpu_isa_name(t) == "x86-64-avx2" ? "x86-64-avx512" : "x86-64-avx2");
  EXPECT_FALSE(choose_tuned_cpu_plan(db, a, pr, other).tuned);
  EXPECT_FALSE(choose_tuned_cpu_plan(db, a, test::problem_for(a, 25, true, true), t).tuned);
}

TEST(CpuTune, LookupPrefersTheTargetsCoresAndTakesANonDefaultWinner) {
  const CpuTarget t = cpu_target("x86-64-avx2");
  const CsrMatrix a = round_values(test::random_csr(300, 100, 0.05, 5), DType::f32);
  const SpmmProblem pr = test::problem_for(a, 40);
  const std::vector<CpuSpmmCandidate> space = cpu_spmm_space(a, pr, t);
  ASSERT_GE(space.size(), 3u);
  const auto record_of = [&](const CpuSpmmCandidate& c, int threads) {
    tune::TuningRecord r;
    r.key = cpu_spmm_tuning_key(a, pr, t, threads, "Test CPU");
    r.winner = c.label;
    r.winner_options = to_json(c.options);
    r.winner_us = 1;
    r.default_us = 2;
    return r;
  };
  test::TempDir dir;
  const std::string db = (dir.path() / "tuning.json").string();
  // Records at other thread counts than the target's cores: the most threads.
  const int cores = t.cores;
  tune::update_database(db, {record_of(space[1], cores + 1), record_of(space[2], cores + 3)});
  CpuTunedChoice choice = choose_tuned_cpu_plan(db, a, pr, t, "Test CPU");
  EXPECT_TRUE(choice.tuned);
  EXPECT_EQ(to_json(choice.options), to_json(space[2].options)) << choice.how;
  // The target's cores win over more.
  tune::update_database(db, {record_of(space[1], cores)});
  choice = choose_tuned_cpu_plan(db, a, pr, t, "Test CPU");
  EXPECT_EQ(to_json(choice.options), to_json(space[1].options)) << choice.how;
  // What compile builds: the winner's plan, not the default's.
  EXPECT_TRUE(same_plan(plan_spmm_cpu(a, pr, t, choice.options), space[1].plan));
  EXPECT_FALSE(same_plan(plan_spmm_cpu(a, pr, t, choice.options), space[0].plan));
}

#else

TEST(CpuTune, NotBuilt) {
  GTEST_SKIP() << "the CPU backend needs LLVM 14 (tools/setup.sh --llvm); not built";
}

#endif
