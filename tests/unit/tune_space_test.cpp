// The tuner's search space and search: enumeration and validity rules, the candidates' options round
// trip, neighbourhoods, and tune_spmm's strategy, budget and bookkeeping with fake compile and GPU
// stages (timings from a known function of the plan, so the best candidate is known).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <set>
#include <thread>

#include "sparsecc/common/error.hpp"
#include "sparsecc/matrix/dense.hpp"
#include "sparsecc/tune/space.hpp"
#include "sparsecc/tune/tuner.hpp"
#include "test_support.hpp"
#include "tune_support.hpp"

namespace sparsecc {
namespace {

SpmmProblem problem(const CsrMatrix& a, std::int64_t n, const std::string& dtype = "f32") {
  SpmmProblem p;
  p.m = a.rows;
  p.k = a.cols;
  p.n = n;
  p.dtype = *parse_dtype(dtype);
  return p;
}

TEST(TuneSpace, DefaultFirstAndEveryCandidateIsAValidDistinctPlan) {
  const CsrMatrix a = test::random_csr(64, 96, 0.1, 1);
  const tune::SpmmSpace space = tune::spmm_space(a, problem(a, 64), {}, KernelLanguage::ptx);
  ASSERT_GT(space.candidates.size(), 10u);
  EXPECT_TRUE(space.candidates.front().is_default);
  EXPECT_EQ(space.candidates.front().label,
            tune::spmm_label(plan_spmm(a, problem(a, 64)), KernelLanguage::ptx));
  std::set<std::string> labels;
  for (const tune::SpmmCandidate& c : space.candidates) {
    EXPECT_TRUE(check_plan(c.plan, a).empty()) << c.label;
    EXPECT_TRUE(labels.insert(c.label).second) << "duplicate " << c.label;
    EXPECT_LE(c.plan.layout.n_tile, 64) << c.label;  // no wider than N needs
    EXPECT_LE(std::int64_t{c.plan.layout.n_tile} * c.plan.layout.groups, 1024);
    if (c.emitter == KernelLanguage::cuda) {
      EXPECT_LE(a.nnz(), tune::SpmmSpaceDims{}.cuda_max_nnz);
    }
  }
  EXPECT_EQ(std::count_if(space.candidates.begin(), space.candidates.end(),
                          [](const tune::SpmmCandidate& c) { return c.is_default; }),
            1);
  // The rules say why points were left out.
  bool wide = false, threads = false;
  for (const auto& [point, rule] : space.rejected) wide |= rule.find("wider than") != std::string::npos;
  for (const auto& [point, rule] : tune::spmm_space(a, problem(a, 256), {}, KernelLanguage::ptx).rejected)
    threads |= rule.find("exceed 1024") != std::string::npos;
  EXPECT_TRUE(wide);
  EXPECT_TRUE(threads);
  // Every point is a candidate, a rejection, or a repeat of a candidate's plan.
  EXPECT_GE(space.points, static_cast<std::int64_t>(space.candidates.size() + space.rejected.size()));
  const nlohmann::json j = tune::to_json(space, {});
  EXPECT_EQ(j["candidates"].size(), space.candidates.size());
  EXPECT_EQ(j["dimensions"]["n_tile"].size(), 4u);
}

TEST(TuneSpace, RulesLeaveOutWhatCannotRun) {
  const CsrMatrix a = test::random_csr(48, 64, 0.2, 2);
  tune::SpmmSpaceDims dims;
  dims.cuda_max_nnz = 10;  // below this matrix: no CUDA C++ candidates for fp32
  const tune::SpmmSpace f32 = tune::spmm_space(a, problem(a, 300), {}, KernelLanguage::ptx, dims);
  for (const tune::SpmmCandidate& c : f32.candidates) {
    EXPECT_EQ(c.emitter, KernelLanguage::ptx) << c.label;
    EXPECT_LE(c.plan.layout.rows_per_block, 48) << c.label;
  }
  // Half precision: CUDA C++ only, blocklet settings in the space.
  SpmmOptions half_base;
  set_blocklets(half_base, "auto");
  const tune::SpmmSpace f16 = tune::spmm_space(a, problem(a, 64, "f16"), half_base, KernelLanguage::cuda);
  ASSERT_FALSE(f16.candidates.empty());
  for (const tune::SpmmCandidate& c : f16.candidates) {
    EXPECT_EQ(c.emitter, KernelLanguage::cuda) << c.label;
    EXPECT_NE(c.label.find("/bl:"), std::string::npos) << c.label;
  }
  // A default that breaks a rule is an error, not a silent candidate.
  EXPECT_THROW(tune::spmm_space(a, problem(a, 64, "f16"), half_base, KernelLanguage::ptx), UsageError);
}

TEST(TuneSpace, RolledPointsOnlyAtSmallNInFp32) {
  const CsrMatrix a = test::random_csr(48, 300, 0.1, 4);
  tune::SpmmSpaceDims dims;
  dims.cuda_max_nnz = 10;  // unrolled CUDA C++ ruled out: rolled points still compile as CUDA C++
  const tune::SpmmSpace small_n = tune::spmm_space(a, problem(a, 49), {}, KernelLanguage::ptx, dims);
  std::size_t rolled = 0;
  for (const tune::SpmmCandidate& c : small_n.candidates) {
    if (c.plan.value_mode() != SpmmValueMode::rolled) continue;
    ++rolled;
    EXPECT_EQ(c.emitter, KernelLanguage::cuda) << c.label;
    EXPECT_EQ(c.plan.layout.row_split, SpmmRowSplit::equal) << c.label;
    EXPECT_LE(c.plan.layout.rows_per_block, dims.rolled_max_rows) << c.label;
    EXPECT_NE(c.label.find("/rolled/cuda"), std::string::npos) << c.label;
    const auto [options, emitter] = tune::spmm_options_from_json(tune::candidate_json(c), {});
    EXPECT_EQ(to_json(plan_spmm(a, problem(a, 49), options)), to_json(c.plan)) << c.label;
  }
  EXPECT_GT(rolled, 10u);
  bool ptx_rule = false, rows_rule = false;
  for (const auto& [point, rule] : small_n.rejected) {
    ptx_rule |= rule == "rolled plans compile as CUDA C++";
    rows_rule |= rule.find("rolled plans take at most") != std::string::npos;
  }
  EXPECT_TRUE(ptx_rule);
  EXPECT_TRUE(rows_rule);
  for (const auto& [n, dtype] : {std::pair<std::int64_t, std::string>{65, "f32"}, {49, "f16"}}) {
    SpmmOptions base;
    if (dtype != "f32") set_blocklets(base, "off");
    const auto language = dtype == "f32" ? KernelLanguage::ptx : KernelLanguage::cuda;
    for (const tune::SpmmCandidate& c : tune::spmm_space(a, problem(a, n, dtype), base, language).candidates)
      EXPECT_NE(c.plan.value_mode(), SpmmValueMode::rolled) << n << " " << dtype << " " << c.label;
  }
}

TEST(TuneSpace, OptionsRoundTripToTheSamePlan) {
  const CsrMatrix a = test::random_csr(40, 70, 0.15, 3);
  const tune::SpmmSpace space = tune::spmm_space(a, problem(a, 100), {}, KernelLanguage::ptx);
  for (const tune::SpmmCandidate& c : space.candidates) {
    const auto [options, emitter] = tune::spmm_options_from_json(tune::candidate_json(c), {});
    EXPECT_EQ(to_json(plan_spmm(a, problem(a, 100), options)), to_json(c.plan)) << c.label;
    EXPECT_EQ(emitter, c.emitter);
  }
  EXPECT_THROW(tune::spmm_options_from_json({{"rows_per_block", "4"}}, {}), UsageError);
  nlohmann::json bad = tune::candidate_json(space.candidates.front());
  bad["row_split"] = "diagonal";
  EXPECT_THROW(tune::spmm_options_from_json(bad, {}), UsageError);
}

// At N = 1 the default of a large layer is rolled with step lanes, and so is every rolled point (an
// n tile of 32, the only one N = 1 allows); every candidate's options replay its plan (the database
// keeps step_lanes).
TEST(TuneSpace, StepLanesAtSmallNRoundTrip) {
  const CsrMatrix a = test::random_csr(300, 800, 0.1, 7);  // 24k nonzeros, 80 a row
  const tune::SpmmSpace space = tune::spmm_space(a, problem(a, 1), {}, KernelLanguage::ptx);
  const tune::SpmmCandidate& def = space.candidates.front();
  ASSERT_TRUE(def.is_default);
  EXPECT_EQ(def.plan.step_lanes(), 32);
  EXPECT_NE(def.label.find("/rolled/cuda/L32"), std::string::npos) << def.label;
  EXPECT_EQ(tune::candidate_json(def).at("step_lanes"), 32);
  std::size_t rolled = 0;
  for (const tune::SpmmCandidate& c : space.candidates) {
    const auto [options, emitter] = tune::spmm_options_from_json(tune::candidate_json(c), {});
    EXPECT_EQ(to_json(plan_spmm(a, problem(a, 1), options)), to_json(c.plan)) << c.label;
    if (c.plan.value_mode() != SpmmValueMode::rolled) continue;
    EXPECT_EQ(c.plan.step_lanes(), 32) << c.label;
    ++rolled;
  }
  EXPECT_GT(rolled, 4u);
  // At N = 16 (one step a warp by default) the rolled points of an n tile of 32 come both ways.
  const CsrMatrix big = test::random_csr(700, 1000, 0.1, 8);  // 70k nonzeros: rolled by default
  const tune::SpmmSpace wide = tune::spmm_space(big, problem(big, 16), {}, KernelLanguage::ptx);
  EXPECT_EQ(wide.candidates.front().plan.step_lanes(), 1);
  std::size_t with = 0, without = 0;
  for (const tune::SpmmCandidate& c : wide.candidates) {
    if (c.plan.value_mode() != SpmmValueMode::rolled || c.plan.layout.n_tile != 32) continue;
    (c.plan.step_lanes() == 2 ? with : without) += 1;
    const auto [options, emitter] = tune::spmm_options_from_json(tune::candidate_json(c), {});
    EXPECT_EQ(plan_spmm(big, problem(big, 16), options).step_lanes(), c.plan.step_lanes()) << c.label;
  }
  EXPECT_GT(with, 0u);
  EXPECT_LE(with, without);  // without: the default too
}

TEST(TuneSpace, NeighboursDifferInOneDimensionByOneStep) {
  const CsrMatrix a = test::random_csr(64, 64, 0.1, 4);
  const tune::SpmmSpace space = tune::spmm_space(a, problem(a, 256), {}, KernelLanguage::ptx);
  for (std::size_t i = 0; i < space.candidates.size(); i += 7) {
    const SpmmPlan& p = space.candidates[i].plan;
    for (const std::size_t j : tune::spmm_neighbours(space, i, {})) {
      const SpmmPlan& q = space.candidates[j].plan;
      const int differing =
          (space.candidates[i].options.rows_per_block != space.candidates[j].options.rows_per_block) +
          (p.layout.n_tile != q.layout.n_tile) + (p.layout.groups != q.layout.groups) +
          (p.layout.row_split != q.layout.row_split) + (p.value_mode() != q.value_mode()) +
          (space.candidates[i].emitter != space.candidates[j].emitter);
      EXPECT_EQ(differing, 1) << space.candidates[i].label << " vs " << space.candidates[j].label;
      if (p.layout.n_tile != q.layout.n_tile) {
        EXPECT_TRUE(p.layout.n_tile == 2 * q.layout.n_tile || q.layout.n_tile == 2 * p.layout.n_tile);
      }
    }
  }
}

// A GPU stand-in: the time is a bowl around R8/T64/G2/baked, so the best candidate is known.
class FakeMeasurer : public tune::SpmmMeasurer {
 public:
  std::vector<std::string> order;
  std::string fail_verification;  // a label whose check fails
  tune::Measurement measure(const tune::SpmmCandidate& c, const rt::Bundle& bundle) override {
    order.push_back(c.label);
    EXPECT_EQ(bundle.metadata.kernel, c.label);  // the builder's bundle reaches the measurer
    tune::Measurement m;
    if (c.label == fail_verification) {
      m.error = "verification failed";
      return m;
    }
    m.verified = true;
    m.median_us = time_of(c.plan);
    return m;
  }
  static double time_of(const SpmmPlan& p) {
    const auto d = [](double x, double at) { return std::fabs(std::log2(x) - std::log2(at)); };
    return 10 + 3 * d(p.layout.rows_per_block, 8) + 2 * d(p.layout.n_tile, 64) + d(p.layout.groups, 2) +
           (p.value_mode() == SpmmValueMode::streamed ? 0.5 : 0) +
           (p.layout.row_split == SpmmRowSplit::balanced ? 0.25 : 0);
  }
};

tune::SpmmBuilder fake_builder(std::atomic<int>* calls = nullptr, const std::string& fail = {}) {
  return [calls, fail](const tune::SpmmCandidate& c) {
    if (calls) ++*calls;
    if (c.label == fail) throw std::runtime_error("ptxas died");
    rt::Bundle b;
    b.metadata.kernel = c.label;
    return b;
  };
}

TEST(TuneSearch, ExhaustiveSmallSpaceMeasuresEverythingAndPicksTheFastest) {
  const CsrMatrix a = test::random_csr(64, 64, 0.1, 5);
  const tune::SpmmSpaceDims dims = test::small_tune_dims();
  const tune::SpmmSpace space = tune::spmm_space(a, problem(a, 128), {}, KernelLanguage::ptx, dims);
  ASSERT_LE(space.candidates.size(), 24u);
  FakeMeasurer gpu;
  std::size_t calls = 0;
  tune::TuneOptions options;
  options.jobs = 3;
  const tune::TuningRecord r =
      tune::tune_spmm(a, space, dims, tune::spmm_tuning_key(a, problem(a, 128), "Fake GPU", "9.0"),
                      fake_builder(), gpu, options, [&](const tune::TuneProgress& p) {
                        ++calls;
                        EXPECT_EQ(p.done, calls);
                        EXPECT_LE(p.done, p.planned);
                      });
  double best = INFINITY;
  std::size_t best_index = 0;
  for (std::size_t i = 0; i < space.candidates.size(); ++i)
    if (FakeMeasurer::time_of(space.candidates[i].plan) < best) {
      best = FakeMeasurer::time_of(space.candidates[i].plan);
      best_index = i;
    }
  // Every candidate, then the best one's register-cap variants, its two-column variant, its
  // clustered-rows variant and its staged-steps variants (timed alike here: the winner stays).
  const auto variants = tune::spmm_register_variants(a, space.candidates[best_index], dims);
  ASSERT_EQ(variants.size(), 2u);
  const auto staged = tune::spmm_stage_variants(a, space.candidates[best_index], dims);
  ASSERT_EQ(staged.size(), 2u);
  EXPECT_EQ(r.strategy,
            "exhaustive + the winner at 2 higher register caps + the winner with two columns a thread + the "
            "winner with clustered rows + the winner with staged steps (2)");
  const std::size_t n = space.candidates.size();
  ASSERT_EQ(r.timings.size(), n + 6);
  EXPECT_EQ(calls, n + 6);
  EXPECT_EQ(r.timings[n].label, variants[0].label);
  EXPECT_EQ(r.timings[n + 1].label, variants[1].label);
  EXPECT_EQ(r.timings[n + 2].label, space.candidates[best_index].label + "/c2");
  EXPECT_EQ(r.timings[n + 3].label, space.candidates[best_index].label + "/clu");
  EXPECT_EQ(r.timings[n + 4].label, space.candidates[best_index].label + "/st1");
  EXPECT_EQ(r.timings.back().label, space.candidates[best_index].label + "/st2");
  EXPECT_EQ(gpu.order.front(), space.candidates.front().label);  // the default first
  EXPECT_EQ(r.winner, space.candidates[best_index].label);
  EXPECT_DOUBLE_EQ(r.winner_us, best);
  EXPECT_DOUBLE_EQ(r.default_us, FakeMeasurer::time_of(space.candidates.front().plan));
  for (const tune::CandidateTiming& t : r.timings) EXPECT_FALSE(t.features.empty());
  EXPECT_EQ(r.key.op, "spmm");
  EXPECT_EQ(r.key.gpu, "Fake GPU");
}

// The register cap is tried last, on the winner: the variants re-plan with a higher cap and nothing
// else, only for unrolled fp32 PTX plans, and a variant that wins is what the database replays.
TEST(TuneSearch, TheWinnersRegisterCapIsRaisedLast) {
  const CsrMatrix a = test::random_csr(64, 64, 0.1, 5);
  const tune::SpmmSpaceDims dims = test::small_tune_dims();
  const tune::SpmmSpace space = tune::spmm_space(a, problem(a, 128), {}, KernelLanguage::ptx, dims);
  const tune::SpmmCandidate& c = space.candidates.front();
  const auto variants = tune::spmm_register_variants(a, c, dims);
  ASSERT_EQ(variants.size(), dims.register_headroom.size());
  for (std::size_t i = 0; i < variants.size(); ++i) {
    const std::int32_t cap = c.plan.hints.max_registers + dims.register_headroom[i];
    EXPECT_EQ(variants[i].plan.hints.max_registers, cap);
    EXPECT_EQ(variants[i].label, c.label + "/r" + std::to_string(cap));
    SpmmPlan same = variants[i].plan;
    same.hints.max_registers = c.plan.hints.max_registers;
    EXPECT_EQ(to_json(same).dump(), to_json(c.plan).dump());  // nothing else changes
  }
  // No variants where the emitter does not cap registers, or for rolled plans.
  tune::SpmmCandidate cuda = c;
  cuda.emitter = KernelLanguage::cuda;
  EXPECT_TRUE(tune::spmm_register_variants(a, cuda, dims).empty());
  SpmmOptions rolled_options;
  rolled_options.value_mode = SpmmValueMode::rolled;
  const tune::SpmmSpace rolled =
      tune::spmm_space(a, problem(a, 49), rolled_options, KernelLanguage::ptx, dims);
  EXPECT_TRUE(tune::spmm_register_variants(a, rolled.candidates.front(), dims).empty());
  // Caps past 255 are left out.
  tune::SpmmSpaceDims high = dims;
  high.register_headroom = {255};
  EXPECT_TRUE(tune::spmm_register_variants(a, c, high).empty());

  // A GPU on which every register helps: the highest cap of the best plan wins, and its options
  // rebuild that plan.
  class MoreRegisters : public FakeMeasurer {
   public:
    tune::Measurement measure(const tune::SpmmCandidate& x, const rt::Bundle& b) override {
      tune::Measurement m = FakeMeasurer::measure(x, b);
      m.median_us -= 0.001 * x.plan.hints.max_registers;
      return m;
    }
  } gpu;
  tune::SpmmSpaceDims caps_only = dims;
  caps_only.try_column_pairs = false;
  caps_only.try_clustered_rows = false;
  caps_only.stage_min_entries.clear();
  const tune::TuningRecord r = tune::tune_spmm(a, space, caps_only, {}, fake_builder(), gpu, {});
  ASSERT_EQ(r.timings.size(), space.candidates.size() + 2);
  EXPECT_EQ(r.winner, r.timings.back().label);
  const auto [options, emitter] = tune::spmm_options_from_json(r.winner_options, {});
  EXPECT_EQ(emitter, KernelLanguage::ptx);
  EXPECT_EQ(plan_spmm(a, problem(a, 128), options).hints.max_registers, options.max_registers);
  EXPECT_EQ(r.winner.substr(r.winner.rfind("/r") + 2), std::to_string(options.max_registers));
}

// The winner with two columns a thread: the same rows, n tile, groups and split, only for unrolled
// fp32 plans at a fixed even N; a pair variant that wins is what the database replays.
TEST(TuneSearch, TheWinnerIsTriedWithTwoColumnsAThread) {
  const CsrMatrix a = test::random_csr(200, 96, 0.2, 3);
  const tune::SpmmSpaceDims dims = test::small_tune_dims();
  for (const SpmmRowSplit split : {SpmmRowSplit::equal, SpmmRowSplit::balanced}) {
    SpmmOptions base;
    base.row_split = split;
    const tune::SpmmSpace space = tune::spmm_space(a, problem(a, 130), base, KernelLanguage::ptx, dims);
    for (const tune::SpmmCandidate& c : space.candidates) {
      const auto v = tune::spmm_pair_variant(a, c, dims);
      ASSERT_TRUE(v) << c.label;
      EXPECT_EQ(v->label, c.label + "/c2");
      EXPECT_TRUE(v->plan.fp32_pairs());
      EXPECT_EQ(v->plan.block_columns(), 2 * c.plan.block_columns());
      EXPECT_EQ(to_json(v->plan).at("blocks"), to_json(c.plan).at("blocks"))
          << c.label;  // same rows and steps
      const auto [o, emitter] = tune::spmm_options_from_json(tune::candidate_json(*v), {});
      EXPECT_EQ(to_json(plan_spmm(a, problem(a, 130), o)).dump(), to_json(v->plan).dump()) << c.label;
    }
  }
  const tune::SpmmSpace space = tune::spmm_space(a, problem(a, 128), {}, KernelLanguage::ptx, dims);
  const tune::SpmmCandidate& c = space.candidates.front();
  tune::SpmmSpaceDims off = dims;
  off.try_column_pairs = false;
  EXPECT_FALSE(tune::spmm_pair_variant(a, c, off));
  // Odd N, runtime N, f16 and rolled plans have none.
  EXPECT_FALSE(tune::spmm_pair_variant(
      a, tune::spmm_space(a, problem(a, 49), {}, KernelLanguage::ptx, dims).candidates.front(), dims));
  SpmmProblem runtime = problem(a, 128);
  runtime.n_mode = SpmmNMode::runtime;
  EXPECT_FALSE(tune::spmm_pair_variant(
      a, tune::spmm_space(a, runtime, {}, KernelLanguage::ptx, dims).candidates.front(), dims));
  SpmmProblem half = problem(a, 128);
  half.dtype = DType::f16;
  EXPECT_FALSE(tune::spmm_pair_variant(
      a, tune::spmm_space(a, half, {}, KernelLanguage::cuda, dims).candidates.front(), dims));
  SpmmOptions rolled_options;
  rolled_options.value_mode = SpmmValueMode::rolled;
  EXPECT_FALSE(tune::spmm_pair_variant(
      a, tune::spmm_space(a, problem(a, 48), rolled_options, KernelLanguage::ptx, dims).candidates.front(),
      dims));

  // A GPU on which pairs are faster: the pair variant of the best plan wins and replays as pairs.
  class PairsFaster : public FakeMeasurer {
   public:
    tune::Measurement measure(const tune::SpmmCandidate& x, const rt::Bundle& b) override {
      tune::Measurement m = FakeMeasurer::measure(x, b);
      if (x.plan.fp32_pairs()) m.median_us *= 0.9;
      return m;
    }
  } gpu;
  const tune::TuningRecord r = tune::tune_spmm(a, space, dims, {}, fake_builder(), gpu, {});
  EXPECT_EQ(r.winner.substr(r.winner.size() - 3), "/c2");
  const auto [options, emitter] = tune::spmm_options_from_json(r.winner_options, {});
  EXPECT_EQ(plan_spmm(a, problem(a, 128), options).layout.cols_per_thread, 2);
}

// The whole space of PTX plans for a 128 x 128 matrix at N = 256: too large to search exhaustively.
struct LargePtxSpace {
  CsrMatrix a = test::random_csr(128, 128, 0.08, 6);
  tune::SpmmSpaceDims dims = [] {
    tune::SpmmSpaceDims d;
    d.emitter = {KernelLanguage::ptx};
    return d;
  }();
  tune::SpmmSpace space = tune::spmm_space(a, problem(a, 256), {}, KernelLanguage::ptx, dims);
};

TEST(TuneSearch, LocalSearchReachesTheBestOfALargeSpace) {
  const LargePtxSpace large;
  const CsrMatrix& a = large.a;
  const tune::SpmmSpaceDims& dims = large.dims;
  const tune::SpmmSpace& space = large.space;
  ASSERT_GT(space.candidates.size(), 24u);
  FakeMeasurer gpu;
  tune::TuneOptions options;
  options.jobs = 2;
  options.shortlist = 4;
  const tune::TuningRecord r = tune::tune_spmm(a, space, dims, {}, fake_builder(), gpu, options);
  EXPECT_NE(r.strategy.find("local search"), std::string::npos);
  EXPECT_LT(r.timings.size(), space.candidates.size());  // not exhaustive
  double best = INFINITY;
  for (const tune::SpmmCandidate& c : space.candidates) best = std::min(best, FakeMeasurer::time_of(c.plan));
  EXPECT_DOUBLE_EQ(r.winner_us, best);  // the bowl has no local minimum besides the best
  std::set<std::string> measured(gpu.order.begin(), gpu.order.end());
  EXPECT_EQ(measured.size(), gpu.order.size());  // nothing measured twice
}

// A search that settles with budget to spare goes on with wider rounds: here the fastest plan is
// the one the predictor ranks last, far from the bowl that local search settles in. Without a budget
// the search stops in the bowl; with one it times the rest of the space (the fake compiles are
// instant), each candidate once, and finds it.
TEST(TuneSearch, BudgetLeftAfterSettlingGoesToWiderRounds) {
  const LargePtxSpace large;
  const CsrMatrix& a = large.a;
  const tune::SpmmSpaceDims& dims = large.dims;
  const tune::SpmmSpace& space = large.space;
  ASSERT_GT(space.candidates.size(), 24u);
  std::vector<std::vector<double>> features;
  for (const tune::SpmmCandidate& c : space.candidates) features.push_back(tune::spmm_features(c.plan, a));
  const std::string spike =
      space.candidates[tune::rank_candidates(tune::shipped_predictor(), features).back()].label;
  struct SpikeMeasurer : FakeMeasurer {
    std::string spike;
    tune::Measurement measure(const tune::SpmmCandidate& c, const rt::Bundle& bundle) override {
      tune::Measurement m = FakeMeasurer::measure(c, bundle);
      if (c.label == spike) m.median_us = 1;
      return m;
    }
  };
  tune::TuneOptions options;
  options.jobs = 2;
  options.shortlist = 2;
  SpikeMeasurer settled;
  settled.spike = spike;
  const tune::TuningRecord r0 = tune::tune_spmm(a, space, dims, {}, fake_builder(), settled, options);
  ASSERT_NE(r0.winner, spike) << "the local search should not reach the predictor's last pick";
  EXPECT_EQ(r0.strategy.find("wider"), std::string::npos) << r0.strategy;
  EXPECT_LT(r0.timings.size(), space.candidates.size());

  options.budget_seconds = 600;
  SpikeMeasurer wide;
  wide.spike = spike;
  const tune::TuningRecord r = tune::tune_spmm(a, space, dims, {}, fake_builder(), wide, options);
  EXPECT_EQ(r.winner, spike);
  EXPECT_DOUBLE_EQ(r.winner_us, 1);
  EXPECT_NE(r.strategy.find("wider round"), std::string::npos) << r.strategy;
  const std::set<std::string> measured(wide.order.begin(), wide.order.end());
  EXPECT_EQ(measured.size(), wide.order.size());  // nothing measured twice
  for (const tune::SpmmCandidate& c : space.candidates) EXPECT_TRUE(measured.contains(c.label)) << c.label;
  // Up to where it settled, the search is the one without a budget (whose last timings are its
  // winner's variants).
  const auto rounds = static_cast<std::ptrdiff_t>(
      std::count_if(settled.order.begin(), settled.order.end(),
                    [](const std::string& label) { return tune::spmm_variant_base_label(label) == label; }));
  ASSERT_GT(rounds, 2);
  EXPECT_TRUE(std::equal(settled.order.begin(), settled.order.begin() + rounds, wide.order.begin()));
}

TEST(TuneSearch, FailuresAreRecordedAndNeverWin) {
  const CsrMatrix a = test::random_csr(64, 64, 0.1, 7);
  tune::SpmmSpaceDims dims;
  dims.rows_per_block = {4, 8};
  dims.n_tile = {64};
  dims.groups = {2};
  dims.row_split = {SpmmRowSplit::equal};
  dims.value_mode = {SpmmValueMode::baked, SpmmValueMode::streamed};
  dims.emitter = {KernelLanguage::ptx};
  const tune::SpmmSpace space = tune::spmm_space(a, problem(a, 64), {}, KernelLanguage::ptx, dims);
  // The bowl's best and runner-up fail: one in compilation, one in verification.
  const std::string best = "R8/T64/G2/equal/baked/ptx", second = "R8/T64/G2/equal/streamed/ptx";
  FakeMeasurer gpu;
  gpu.fail_verification = second;
  const tune::TuningRecord r = tune::tune_spmm(a, space, dims, {}, fake_builder(nullptr, best), gpu, {});
  EXPECT_NE(r.winner, best);
  EXPECT_NE(r.winner, second);
  int failed = 0;
  for (const tune::CandidateTiming& t : r.timings)
    if (t.label == best || t.label == second) {
      ++failed;
      EXPECT_FALSE(t.verified);
      EXPECT_TRUE(std::isnan(t.median_us));
      EXPECT_NE(t.error.find(t.label == best ? "ptxas died" : "verification"), std::string::npos) << t.error;
    }
  EXPECT_EQ(failed, 2);
}

TEST(TuneSearch, TheBudgetStopsNewCompiles) {
  const CsrMatrix a = test::random_csr(64, 64, 0.1, 8);
  const tune::SpmmSpace space = tune::spmm_space(a, problem(a, 128), {}, KernelLanguage::ptx);
  std::atomic<int> calls{0};
  const tune::SpmmBuilder slow = [&](const tune::SpmmCandidate& c) {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    return fake_builder(&calls)(c);
  };
  FakeMeasurer gpu;
  tune::TuneOptions options;
  options.jobs = 2;
  options.budget_seconds = 0.05;
  options.exhaustive_limit = 1000;
  const tune::TuningRecord r = tune::tune_spmm(a, space, {}, {}, slow, gpu, options);
  EXPECT_LT(static_cast<std::size_t>(calls.load()), space.candidates.size());
  EXPECT_EQ(r.timings.size(), static_cast<std::size_t>(calls.load()));  // what started was measured
  EXPECT_NE(r.strategy.find("budget"), std::string::npos) << r.strategy;
  EXPECT_EQ(r.timings.front().label, space.candidates.front().label);
}

// Unrolled compiles that would overrun the budget are passed over, not the cheap rolled ones behind them.
TEST(TuneSearch, TheBudgetStillStartsRolledCandidates) {
  const CsrMatrix a = test::random_csr(64, 300, 0.1, 10);
  const tune::SpmmSpace space = tune::spmm_space(a, problem(a, 49), {}, KernelLanguage::ptx);
  ASSERT_NE(space.candidates.front().plan.value_mode(), SpmmValueMode::rolled);
  const auto is_rolled = [](const tune::SpmmCandidate& c) {
    return c.plan.value_mode() == SpmmValueMode::rolled;
  };
  const auto rolled = std::count_if(space.candidates.begin(), space.candidates.end(), is_rolled);
  ASSERT_GT(rolled, 0);
  FakeMeasurer gpu;
  tune::TuneOptions options;
  options.jobs = 2;
  options.budget_seconds = 30;
  options.expected_compile_seconds = 100;  // no unrolled compile fits after the default's
  options.exhaustive_limit = 1000;
  const tune::TuningRecord r = tune::tune_spmm(a, space, {}, {}, fake_builder(), gpu, options);
  ASSERT_EQ(r.timings.size(), static_cast<std::size_t>(rolled) + 1);
  EXPECT_EQ(r.timings.front().label, space.candidates.front().label);  // the default, unrolled
  for (std::size_t i = 1; i < r.timings.size(); ++i)
    EXPECT_NE(r.timings[i].label.find("/rolled/"), std::string::npos) << r.timings[i].label;
  EXPECT_NE(r.strategy.find("budget"), std::string::npos) << r.strategy;

  // A rolled default in a large space: the predictor's (unrolled) shortlist cannot start, the local
  // search around the default still walks its rolled neighbours (the fake time falls towards R8/T64/G2).
  SpmmOptions base;
  base.value_mode = SpmmValueMode::rolled;
  const tune::SpmmSpace from_rolled = tune::spmm_space(a, problem(a, 49), base, KernelLanguage::ptx);
  ASSERT_EQ(from_rolled.candidates.front().plan.value_mode(), SpmmValueMode::rolled);
  options.exhaustive_limit = 4;
  FakeMeasurer gpu2;
  const tune::TuningRecord walked = tune::tune_spmm(a, from_rolled, {}, {}, fake_builder(), gpu2, options);
  ASSERT_GT(walked.timings.size(), 2u);
  for (const auto& t : walked.timings) EXPECT_NE(t.label.find("/rolled/"), std::string::npos) << t.label;
  EXPECT_LT(walked.winner_us, walked.default_us);
  // Once the local search settles, the budget left goes to every other rolled point: all of them
  // are timed, and the strategy says so and why it stopped.
  const auto rolled_points =
      std::count_if(from_rolled.candidates.begin(), from_rolled.candidates.end(), is_rolled);
  EXPECT_EQ(walked.timings.size(), static_cast<std::size_t>(rolled_points));
  EXPECT_NE(walked.strategy.find("more rolled points"), std::string::npos) << walked.strategy;
  EXPECT_NE(walked.strategy.find("would end past it"), std::string::npos) << walked.strategy;
}

// Besides the shortlist, two plans of the other kind than the default (rolled or unrolled) are timed
// from the start, whatever the shortlist holds: the rules' plan of that kind (the space's second
// candidate) and the predictor's first of that kind.
TEST(TuneSearch, BothKindsAreTimedFromTheStart) {
  const CsrMatrix a = test::random_csr(64, 300, 0.1, 10);
  const auto is_rolled = [](const std::string& label) { return label.find("/rolled/") != std::string::npos; };
  for (const bool rolled_default : {false, true}) {
    SpmmOptions base;
    if (rolled_default) base.value_mode = SpmmValueMode::rolled;
    const tune::SpmmSpace space = tune::spmm_space(a, problem(a, 49), base, KernelLanguage::ptx);
    ASSERT_EQ(is_rolled(space.candidates.front().label), rolled_default);
    ASSERT_GT(space.candidates.size(), 24u);
    // The rules' plan of the other kind comes second.
    SpmmOptions other_rule = base;
    other_rule.value_mode = rolled_default ? SpmmValueMode::baked : SpmmValueMode::rolled;
    EXPECT_EQ(to_json(space.candidates[1].plan), to_json(plan_spmm(a, problem(a, 49), other_rule)));
    EXPECT_EQ(space.candidates[1].emitter, rolled_default ? KernelLanguage::ptx : KernelLanguage::cuda);
    // The predictor's first plan of the other kind.
    std::vector<std::vector<double>> features;
    for (const tune::SpmmCandidate& c : space.candidates) features.push_back(tune::spmm_features(c.plan, a));
    std::string predicted;
    for (const std::size_t i : tune::rank_candidates(tune::shipped_predictor(), features))
      if (is_rolled(space.candidates[i].label) != rolled_default) {
        predicted = space.candidates[i].label;
        break;
      }
    ASSERT_FALSE(predicted.empty());
    FakeMeasurer gpu;
    tune::TuneOptions options;
    options.jobs = 1;
    options.shortlist = 1;
    options.exhaustive_limit = 4;
    tune::tune_spmm(a, space, {}, {}, fake_builder(), gpu, options);
    ASSERT_GE(gpu.order.size(), 4u);
    EXPECT_EQ(gpu.order[0], space.candidates.front().label);  // the default, then the shortlist of one
    const auto first4 = [&](const std::string& label) {
      return std::find(gpu.order.begin(), gpu.order.begin() + 4, label) != gpu.order.begin() + 4;
    };
    EXPECT_TRUE(first4(space.candidates[1].label)) << rolled_default << " " << space.candidates[1].label;
    EXPECT_TRUE(first4(predicted)) << rolled_default << " " << predicted;
  }
  // Without the other kind in the dimensions, no such plan.
  tune::SpmmSpaceDims baked_only;
  baked_only.value_mode = {SpmmValueMode::baked};
  const tune::SpmmSpace unrolled = tune::spmm_space(a, problem(a, 49), {}, KernelLanguage::ptx, baked_only);
  for (const tune::SpmmCandidate& c : unrolled.candidates) EXPECT_FALSE(is_rolled(c.label)) << c.label;
}

// Searches that run at once (`tune --matrices-at-once`) share their compile threads: each keeps one
// compile of its own in flight and takes shared slots for more. With no shared slot, never more than
// two compiles are in flight over both searches, though each may keep three, and each search still
// measures every candidate and finds what it finds alone.
TEST(TuneSearch, SearchesAtOnceShareTheirCompileSlots) {
  const tune::SpmmSpaceDims dims = test::small_tune_dims();
  const CsrMatrix a = test::random_csr(64, 64, 0.1, 5), b = test::random_csr(96, 64, 0.1, 6);
  const tune::SpmmSpace space_a = tune::spmm_space(a, problem(a, 128), {}, KernelLanguage::ptx, dims);
  const tune::SpmmSpace space_b = tune::spmm_space(b, problem(b, 128), {}, KernelLanguage::ptx, dims);
  std::atomic<int> in_flight{0}, most{0};
  const tune::SpmmBuilder counting = [&](const tune::SpmmCandidate& c) {
    const int now = ++in_flight;
    for (int seen = most.load(); now > seen && !most.compare_exchange_weak(seen, now);) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    --in_flight;
    rt::Bundle bundle;
    bundle.metadata.kernel = c.label;
    return bundle;
  };
  tune::CompileSlots slots(0);
  tune::TuneOptions options;
  options.jobs = 3;
  options.slots = &slots;
  std::mutex gpu_lock;  // the fakes record their order: one measurement at a time, as the CLI does
  class Serial : public FakeMeasurer {
   public:
    explicit Serial(std::mutex& m) : m_(m) {}
    tune::Measurement measure(const tune::SpmmCandidate& c, const rt::Bundle& bundle) override {
      const std::lock_guard<std::mutex> lock(m_);
      return FakeMeasurer::measure(c, bundle);
    }

   private:
    std::mutex& m_;
  } gpu_a(gpu_lock), gpu_b(gpu_lock);
  tune::TuningRecord ra, rb;
  {
    std::jthread other([&] { rb = tune::tune_spmm(b, space_b, dims, {}, counting, gpu_b, options); });
    ra = tune::tune_spmm(a, space_a, dims, {}, counting, gpu_a, options);
  }
  EXPECT_LE(most.load(), 2);
  EXPECT_EQ(in_flight.load(), 0);
  FakeMeasurer alone_a, alone_b;
  const tune::TuningRecord sa = tune::tune_spmm(a, space_a, dims, {}, fake_builder(), alone_a, {});
  const tune::TuningRecord sb = tune::tune_spmm(b, space_b, dims, {}, fake_builder(), alone_b, {});
  EXPECT_EQ(ra.timings.size(), sa.timings.size());
  EXPECT_EQ(rb.timings.size(), sb.timings.size());
  EXPECT_EQ(ra.winner, sa.winner);
  EXPECT_EQ(rb.winner, sb.winner);
  // One shared slot: three at most. Without shared slots, the same two searches keep more in flight.
  most = 0;
  tune::CompileSlots one(1);
  options.slots = &one;
  {
    std::jthread other([&] { rb = tune::tune_spmm(b, space_b, dims, {}, counting, gpu_b, options); });
    ra = tune::tune_spmm(a, space_a, dims, {}, counting, gpu_a, options);
  }
  EXPECT_LE(most.load(), 3);
  most = 0;
  options.slots = nullptr;
  {
    std::jthread other([&] { rb = tune::tune_spmm(b, space_b, dims, {}, counting, gpu_b, options); });
    ra = tune::tune_spmm(a, space_a, dims, {}, counting, gpu_a, options);
  }
  EXPECT_GT(most.load(), 3);
}

TEST(TuneSearch, EmptySpaceIsAnError) {
  const CsrMatrix a = test::random_csr(8, 8, 0.5, 9);
  FakeMeasurer gpu;
  EXPECT_THROW(tune::tune_spmm(a, {}, {}, {}, fake_builder(), gpu, {}), UsageError);
}

}  // namespace
}  // namespace sparsecc
