// The no-GPU performance predictor: features of real plans and the terms derived from them, JSON round
// trips and errors, the shipped coefficients, the fit (recovery of a known model, determinism,
// ranking despite per-problem constants), ranking and evaluation, and, when timings recorded on a
// Hopper GPU are checked in, how well the shipped model ranks them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/random.hpp"
#include "sparsecc/inspector/spmm_inspector.hpp"
#include "sparsecc/target/target.hpp"
#include "sparsecc/tune/predictor.hpp"
#include "sparsecc/tune/tuner.hpp"
#include "test_support.hpp"

namespace sparsecc::tune {
namespace {

using json = nlohmann::json;

// A random m x k matrix of the given density, with a dense 16 x 8 block at the origin when `block`.
CsrMatrix random_csr(std::int64_t m, std::int64_t k, double density, std::uint64_t seed, bool block = false) {
  SplitMix64 rng(seed);
  DenseMatrix d(m, k);
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t c = 0; c < k; ++c)
      if ((block && r < 16 && c < 8) || (rng.next() >> 11) * 0x1p-53 < density) {
        double v = rng.uniform_pm1();
        d(r, c) = v == 0.0 ? 0.5 : v;
      }
  return csr_from_dense(d, DType::f32);
}

SpmmOptions options(std::int32_t ny, std::int32_t tile, std::int32_t groups,
                    SpmmRowSplit split = SpmmRowSplit::equal, SpmmValueMode mode = SpmmValueMode::baked) {
  SpmmOptions o;
  o.rows_per_block = ny;
  o.n_tile = tile;
  o.groups = groups;
  o.row_split = split;
  o.value_mode = mode;
  return o;
}

// Plans of several shapes for one matrix: tilings, groups, balanced rows, streamed values, a half
// plan and a tensor-core plan.
std::vector<SpmmPlan> sample_plans(const CsrMatrix& a) {
  const SpmmProblem f32{a.rows, a.cols, 100, SpmmNMode::fixed, false, false, DType::f32};
  SpmmProblem f16 = f32;
  f16.dtype = DType::f16;
  std::vector<SpmmPlan> plans;
  plans.push_back(plan_spmm(a, f32));
  plans.push_back(plan_spmm(a, f32, options(1, 32, 1)));
  plans.push_back(plan_spmm(a, f32, options(4, 64, 2)));
  plans.push_back(plan_spmm(a, f32, options(16, 128, 4, SpmmRowSplit::balanced)));
  plans.push_back(plan_spmm(a, f32, options(8, 32, 8, SpmmRowSplit::equal, SpmmValueMode::streamed)));
  SpmmProblem bias_relu = f32;
  bias_relu.bias = bias_relu.relu = true;
  bias_relu.n = 1000;
  plans.push_back(plan_spmm(a, bias_relu, options(2, 256, 1)));
  plans.push_back(plan_spmm(a, f16, options(4, 32, 2)));
  SpmmOptions tc;
  set_blocklets(tc, "16x8:0.5");
  tc.n_tile = 32;
  plans.push_back(plan_spmm(a, f16, tc));
  EXPECT_EQ(plans.back().fragment_k(), 8);
  return plans;
}

std::size_t index_of(const std::string& name) {
  const auto names = spmm_feature_names();
  const auto it = std::find(names.begin(), names.end(), name);
  EXPECT_NE(it, names.end()) << name;
  return static_cast<std::size_t>(it - names.begin());
}

TEST(TunePredictor, FeaturesAreFiniteAndDeterministic) {
  const CsrMatrix a = random_csr(96, 80, 0.1, 11, true);
  const auto names = spmm_feature_names();
  ASSERT_FALSE(names.empty());
  for (std::size_t i = 0; i < names.size(); ++i)
    for (std::size_t j = i + 1; j < names.size(); ++j) EXPECT_NE(names[i], names[j]);
  for (const SpmmPlan& p : sample_plans(a)) {
    const std::vector<double> f = spmm_features(p, a);
    ASSERT_EQ(f.size(), names.size());
    for (std::size_t i = 0; i < f.size(); ++i) {
      EXPECT_TRUE(std::isfinite(f[i])) << names[i];
      EXPECT_GE(f[i], 0.0) << names[i];
    }
    const std::vector<double> again = spmm_features(p, a);
    ASSERT_EQ(again.size(), f.size());
    EXPECT_EQ(std::memcmp(again.data(), f.data(), f.size() * sizeof(double)), 0);
    EXPECT_EQ(f[index_of("launch")], 1.0);
    EXPECT_GT(f[index_of("bound_us")], 0.0);
    EXPECT_GT(f[index_of("issue_us")], 0.0);
    EXPECT_GT(f[index_of("dram_us")], 0.0);
    EXPECT_GT(f[index_of("l2_us")], 0.0);
    // Only plans whose groups hand over partial sums pay for the reduction.
    bool reduces = false;
    for (const SpmmBlockRow& b : p.layout.blocks)
      reduces = reduces || (p.layout.groups > 1 && spmm_block_reduces(p, b));
    EXPECT_EQ(f[index_of("reduce_us")] > 0.0, reduces);
  }
  // Equal panels of a matrix with one dense corner are imbalanced; one block row is not.
  const SpmmProblem pr{a.rows, a.cols, 64, SpmmNMode::fixed, false, false, DType::f32};
  EXPECT_GT(spmm_features(plan_spmm(a, pr, options(4, 64, 1)), a)[index_of("imbalance")], 0.0);
  const CsrMatrix small = random_csr(8, 40, 0.3, 3);
  EXPECT_EQ(spmm_features(
                plan_spmm(small, {8, 40, 64, SpmmNMode::fixed, false, false, DType::f32}, options(8, 64, 1)),
                small)[index_of("imbalance")],
            0.0);
  // A plan for another matrix shape is refused.
  EXPECT_THROW(spmm_features(plan_spmm(a, pr), small), UsageError);
  SpmmPlan empty;
  empty.problem = pr;
  EXPECT_THROW(spmm_features(empty, a), UsageError);
}

// The features of the default target (sm_90's row) are those of the H100 constants the predictor had
// before targets (recorded with that build, printed to 17 digits), and an A100 target changes them.
TEST(TunePredictor, FeaturesComeFromTheTargetAndSm90KeepsTheH100Figures) {
  const CsrMatrix small = random_csr(96, 80, 0.1, 11, true);
  const CsrMatrix big = random_csr(3000, 256, 0.05, 5, false);
  const std::vector<std::vector<double>> small_before = {
      {1, 0.25103276353276355, 0.11095571095571095, 0.017930911680911682, 0.023466666666666667, 0,
       1.0021953896816682, 0.066254545454545455},
      {1, 0.25103276353276355, 0.44382284382284382, 0.013448183760683761, 0.023466666666666667, 0,
       1.0021953896816682, 0.066254545454545455},
      {1, 0.55940170940170941, 0.21279461279461279, 0.035434472934472931, 0.023466666666666667,
       0.041025641025641026, 0.7124039517014269, 0.050981818181818184},
      {1, 1.6792022792022792, 0.1097125097125097, 0.29715099715099713, 0.023466666666666667,
       0.10142450142450142, 0.073545554335894492, 0.028290909090909092},
      {1, 1.3401709401709401, 0.84344297677631008, 0.070204178537511874, 0.024681333333333333,
       0.10028490028490028, 0.686059275521405, 0.040581818181818184},
      {1, 0.51502849002849005, 0.44133644133644129, 0.14715099715099716, 0.23466666666666666, 0,
       0.89681668496158062, 0.58618181818181814},
      {1, 0.71396011396011394, 0.27571440904774236, 0.023124406457739794, 0.011733333333333333,
       0.041025641025641026, 0.7124039517014269, 0.025490909090909092},
      {1, 3.5511870845204183, 0.18530605197271863, 0.063414055080721746, 0.011818666666666667, 0,
       0.59385290889132802, 0.013818181818181818}};
  const std::vector<std::vector<double>> big_before = {
      {1, 4.3104503849184708, 3.5210567210567207, 0.61577862641692438, 0.43413333333333332, 0,
       0.20216428922774221, 1.9621090909090908},
      {1, 2.1584370370370367, 18.079046879046878, 0.53960925925925929, 0.43413333333333332, 0,
       1.0969787972143834, 2.8092363636363635},
      {1, 2.3942017094017092, 9.2761460761460768, 0.59855042735042729, 0.43413333333333332,
       0.082051282051282051, 0.33973645377585626, 2.6065454545454547},
      {1, 4.2825725889555679, 4.8048001381334711, 0.83427895981087474, 0.43413333333333332,
       0.20284900284900284, 0.095088927434178183, 1.9637818181818181},
      {1, 5.9280653371320033, 33.319174652507982, 1.0721823361823362, 0.48563600000000001,
       0.40113960113960112, 0.26207057239754561, 2.3620363636363635},
      {1, 11.223655080721747, 18.634619701286368, 4.609715479582146, 4.341333333333333, 0,
       0.66981644963367581, 27.373090909090909}};
  // sample_plans' fp32 options on a larger matrix (its grid exceeds one wave of 132 SMs).
  const SpmmProblem f32{big.rows, big.cols, 100, SpmmNMode::fixed, false, false, DType::f32};
  SpmmProblem bias_relu = f32;
  bias_relu.bias = bias_relu.relu = true;
  bias_relu.n = 1000;
  const std::vector<SpmmPlan> big_plans = {
      plan_spmm(big, f32),
      plan_spmm(big, f32, options(1, 32, 1)),
      plan_spmm(big, f32, options(4, 64, 2)),
      plan_spmm(big, f32, options(16, 128, 4, SpmmRowSplit::balanced)),
      plan_spmm(big, f32, options(8, 32, 8, SpmmRowSplit::equal, SpmmValueMode::streamed)),
      plan_spmm(big, bias_relu, options(2, 256, 1))};
  const GpuTarget sm90 = gpu_target("sm_90"), sm80 = gpu_target("sm_80");
  const auto check = [&](const CsrMatrix& a, const std::vector<SpmmPlan>& plans,
                         const std::vector<std::vector<double>>& before) {
    ASSERT_EQ(plans.size(), before.size());
    std::size_t differ = 0;
    for (std::size_t i = 0; i < plans.size(); ++i) {
      EXPECT_EQ(spmm_features(plans[i], a), before[i]) << "plan " << i;
      EXPECT_EQ(spmm_features(plans[i], a, sm90), before[i]) << "plan " << i;
      differ += spmm_features(plans[i], a, sm80) != before[i];
    }
    EXPECT_EQ(differ, plans.size());  // a slower clock and DRAM: every plan's times change
  };
  check(small, sample_plans(small), small_before);
  check(big, big_plans, big_before);
  // Fewer SMs: the busiest SM of a large grid runs more blocks, so the issue bound grows by more
  // than the clock alone explains.
  const SpmmPlan& p = big_plans[1];
  const double issue90 = spmm_features(p, big, sm90)[index_of("issue_us")];
  const double issue80 = spmm_features(p, big, sm80)[index_of("issue_us")];
  EXPECT_GT(issue80, issue90 * sm90.clock_mhz / sm80.clock_mhz);
}

TEST(TunePredictor, TermsAreTheFeaturesAndTheDerivedTerms) {
  const auto features = spmm_feature_names();
  const auto terms = spmm_predictor_term_names();
  ASSERT_GT(terms.size(), features.size());
  EXPECT_TRUE(std::equal(features.begin(), features.end(), terms.begin()));
  for (std::size_t i = 0; i < terms.size(); ++i)
    for (std::size_t j = i + 1; j < terms.size(); ++j) EXPECT_NE(terms[i], terms[j]);
  const auto derived = std::find(terms.begin(), terms.end(), "bound_imbalance_us");
  ASSERT_NE(derived, terms.end());
  const CsrMatrix a = random_csr(96, 80, 0.1, 11, true);
  const SpmmProblem pr{a.rows, a.cols, 64, SpmmNMode::fixed, false, false, DType::f32};
  const std::vector<double> f = spmm_features(plan_spmm(a, pr, options(4, 64, 1)), a);
  ASSERT_GT(f[index_of("imbalance")], 0.0);
  const std::vector<double> x = spmm_predictor_terms(f);
  ASSERT_EQ(x.size(), terms.size());
  for (std::size_t i = 0; i < f.size(); ++i) EXPECT_EQ(x[i], f[i]) << terms[i];
  EXPECT_DOUBLE_EQ(x[static_cast<std::size_t>(derived - terms.begin())],
                   f[index_of("bound_us")] * f[index_of("imbalance")]);
  // Fetch past 10 us: 0 below, the excess above.
  const auto excess = std::find(terms.begin(), terms.end(), "fetch_excess_us");
  ASSERT_NE(excess, terms.end());
  std::vector<double> g = f;
  g[index_of("fetch_us")] = 4.0;
  EXPECT_EQ(spmm_predictor_terms(g)[static_cast<std::size_t>(excess - terms.begin())], 0.0);
  g[index_of("fetch_us")] = 31.5;
  EXPECT_DOUBLE_EQ(spmm_predictor_terms(g)[static_cast<std::size_t>(excess - terms.begin())], 21.5);
  EXPECT_THROW(spmm_predictor_terms({1.0, 2.0}), UsageError);
}

TEST(TunePredictor, MoreWorkCostsMore) {
  // The same tiling over twice the columns (a grid of more blocks than SMs either way): more issue
  // slots, DRAM traffic and code fetched.
  const CsrMatrix a = random_csr(1024, 256, 0.05, 5);
  const SpmmPlan narrow =
      plan_spmm(a, {a.rows, a.cols, 64, SpmmNMode::fixed, false, false, DType::f32}, options(4, 64, 1));
  const SpmmPlan wide =
      plan_spmm(a, {a.rows, a.cols, 128, SpmmNMode::fixed, false, false, DType::f32}, options(4, 64, 1));
  const auto fn = spmm_features(narrow, a), fw = spmm_features(wide, a);
  for (const char* name : {"issue_us", "dram_us", "fetch_us"})
    EXPECT_GT(fw[index_of(name)], fn[index_of(name)]) << name;
  EXPECT_GT(shipped_predictor().predict_us(fw), shipped_predictor().predict_us(fn));
}

TEST(TunePredictor, L2TrafficIsEveryStepsRowOfBAcrossN) {
  // Every step of every group reads its row of B across all N columns (4 bytes each for fp32, 2 for
  // f16) at 5.5 TB/s; block rows of one row share no row of B, so they read more than taller ones.
  const CsrMatrix a = random_csr(256, 192, 0.05, 9);
  const auto l2_of = [&](const SpmmPlan& p) { return spmm_features(p, a)[index_of("l2_us")]; };
  for (const std::string dtype : {"f32", "f16"}) {
    const SpmmProblem pr{a.rows, a.cols, 200, SpmmNMode::fixed, false, false, *parse_dtype(dtype)};
    for (const SpmmOptions& o :
         {options(1, 64, 1), options(16, 64, 2), options(8, 128, 4, SpmmRowSplit::balanced)}) {
      const SpmmPlan p = plan_spmm(a, pr, o);
      double steps = 0;
      for (const SpmmBlockRow& b : p.layout.blocks)
        for (const SpmmGroup& g : b.groups) steps += static_cast<double>(g.steps.size());
      EXPECT_NEAR(l2_of(p), steps * 200 * (dtype == "f32" ? 4 : 2) / 5.5e6, 1e-12) << dtype;
    }
    EXPECT_GT(l2_of(plan_spmm(a, pr, options(1, 64, 1))), 1.2 * l2_of(plan_spmm(a, pr, options(16, 64, 1))));
  }
}

TEST(TunePredictor, FeaturesJsonRoundTrip) {
  const CsrMatrix a = random_csr(64, 48, 0.2, 7);
  const std::vector<double> f =
      spmm_features(plan_spmm(a, {a.rows, a.cols, 33, SpmmNMode::fixed, false, false, DType::f32}), a);
  const json j = features_json(f);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j.size(), spmm_feature_names().size());
  for (const std::string& name : spmm_feature_names()) EXPECT_TRUE(j.contains(name)) << name;
  EXPECT_EQ(features_from_json(j), f);
  EXPECT_EQ(features_from_json(json::parse(j.dump())), f);  // through text, bit for bit

  json extra = j;
  extra["not_a_feature"] = 3;  // ignored
  EXPECT_EQ(features_from_json(extra), f);
  json missing = j;
  missing.erase("fetch_us");
  try {
    features_from_json(missing);
    ADD_FAILURE() << "no UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("fetch_us"), std::string::npos) << e.what();
  }
  json text = j;
  text["issue_us"] = "fast";
  EXPECT_THROW(features_from_json(text), UsageError);
  EXPECT_THROW(features_from_json(json::array()), UsageError);
  EXPECT_THROW(features_json({1.0, 2.0}), UsageError);
}

Predictor example_predictor() {
  Predictor p;
  p.fitted_on = "unit test";
  p.samples = 12;
  p.features = spmm_feature_names();
  for (std::size_t i = 0; i < p.features.size(); ++i)
    p.coefficients.push_back(0.25 * static_cast<double>(i + 1));
  return p;
}

TEST(TunePredictor, PredictorJsonRoundTripAndErrors) {
  const Predictor p = example_predictor();
  const json j = to_json(p);
  const Predictor q = predictor_from_json(json::parse(j.dump()), "p.json");
  EXPECT_EQ(q.version, p.version);
  EXPECT_EQ(q.fitted_on, p.fitted_on);
  EXPECT_EQ(q.samples, p.samples);
  EXPECT_EQ(q.features, p.features);
  EXPECT_EQ(q.coefficients, p.coefficients);

  // A subset of the features, in another order, predicts by name.
  Predictor sub;
  sub.features = {"issue_us", "launch"};
  sub.coefficients = {2.0, 0.5};
  const Predictor sub2 = predictor_from_json(to_json(sub), "sub.json");
  EXPECT_EQ(sub2.features, sub.features);
  std::vector<double> f(spmm_feature_names().size(), 0.0);
  f[index_of("launch")] = 1.0;
  f[index_of("issue_us")] = 3.0;
  f[index_of("fetch_us")] = 100.0;  // not in the predictor
  EXPECT_DOUBLE_EQ(sub2.predict_us(f), 6.5);
  EXPECT_THROW(sub2.predict_us({1.0}), UsageError);
  // A derived term is computed from the features it is named after.
  Predictor derived;
  derived.features = {"bound_imbalance_us", "launch"};
  derived.coefficients = {2.0, 0.5};
  const Predictor derived2 = predictor_from_json(to_json(derived), "derived.json");
  f[index_of("bound_us")] = 3.0;
  f[index_of("imbalance")] = 0.25;
  EXPECT_DOUBLE_EQ(derived2.predict_us(f), 2.0 * 3.0 * 0.25 + 0.5);
  // The term values themselves are not accepted in place of the features.
  EXPECT_THROW(derived2.predict_us(spmm_predictor_terms(f)), UsageError);

  const auto broken = [&](const std::function<void(json&)>& edit, const std::string& field) {
    json k = j;
    edit(k);
    test::expect_input_error([&] { predictor_from_json(k, "model.json"); }, {"model.json", field});
  };
  broken([](json& k) { k.erase("coefficients"); }, "coefficients");
  broken([](json& k) { k.erase("fitted_on"); }, "fitted_on");
  broken([](json& k) { k["version"] = kSpmmFeatureVersion + 1; }, "version");
  broken([](json& k) { k["version"] = "one"; }, "version");
  broken([](json& k) { k["samples"] = -3; }, "samples");
  broken([](json& k) { k["features"] = json::array(); }, "features");
  broken([](json& k) { k["features"].push_back("warp_speed"); }, "warp_speed");
  broken([](json& k) { k["features"].push_back("launch"); }, "launch");
  broken([](json& k) { k["coefficients"]["issue_us"] = -1.0; }, "coefficients.issue_us");
  broken([](json& k) { k["coefficients"]["issue_us"] = "x"; }, "coefficients.issue_us");
  broken([](json& k) { k["coefficients"].erase("fetch_us"); }, "coefficients.fetch_us");
  broken([](json& k) { k["coefficients"]["bogus"] = 1.0; }, "coefficients.bogus");
  test::expect_input_error([] { predictor_from_json(json::array(), "list.json"); }, {"list.json"});
}

TEST(TunePredictor, ShippedPredictorParsesAndPredictsPositiveTimes) {
  const Predictor& p = shipped_predictor();
  EXPECT_EQ(&p, &shipped_predictor());  // parsed once
  EXPECT_EQ(p.version, kSpmmFeatureVersion);
  EXPECT_FALSE(p.fitted_on.empty());
  EXPECT_FALSE(p.features.empty());
  ASSERT_EQ(p.features.size(), p.coefficients.size());
  EXPECT_EQ(p.features, spmm_predictor_term_names());
  const Predictor again = predictor_from_json(json::parse(shipped_predictor_json()), "shipped");
  EXPECT_EQ(again.coefficients, p.coefficients);
  // The shipped file is the one in the source tree.
  const auto source = test::source_dir() / "generator/tune/data/spmm_predictor.json";
  if (std::filesystem::exists(source)) {
    std::ifstream in(source);
    EXPECT_EQ(predictor_from_json(json::parse(in), source.string()).coefficients, p.coefficients);
  }
  const CsrMatrix a = random_csr(128, 96, 0.1, 13, true);
  for (const SpmmPlan& plan : sample_plans(a)) {
    const double t = p.predict_us(spmm_features(plan, a));
    EXPECT_TRUE(std::isfinite(t));
    EXPECT_GT(t, 0.0);
    EXPECT_LT(t, 1e6);
  }
  EXPECT_GT(p.predict_us(std::vector<double>(spmm_feature_names().size(), 0.0)), 0.0);
}

// Synthetic problems whose times follow a known non-negative linear model of the terms, plus a
// constant a problem (offset x its index) that no term explains.
std::vector<PredictorSample> synthetic_samples(const std::vector<double>& truth, int problems, int candidates,
                                               std::uint64_t seed, double offset = 0.0) {
  SplitMix64 rng(seed);
  const std::size_t d = spmm_feature_names().size();
  std::vector<PredictorSample> out;
  for (int p = 0; p < problems; ++p) {
    const double scale = 1.0 + static_cast<double>(p);  // problems of different sizes
    for (int c = 0; c < candidates; ++c) {
      PredictorSample s;
      s.problem = "problem " + std::to_string(p);
      s.features.assign(d, 0.0);
      for (std::size_t i = 0; i < d; ++i)
        s.features[i] = i == 0 ? 1.0 : scale * (0.5 + 0.5 * (rng.uniform_pm1() + 1.0));
      const std::vector<double> x = spmm_predictor_terms(s.features);
      s.median_us = offset * static_cast<double>(p);
      for (std::size_t i = 0; i < x.size(); ++i) s.median_us += truth[i] * x[i];
      out.push_back(std::move(s));
    }
  }
  return out;
}

std::vector<double> truth_coefficients() {
  std::vector<double> truth(spmm_predictor_term_names().size(), 0.0);
  for (std::size_t i = 0; i < truth.size(); ++i)
    truth[i] = i % 3 == 1 ? 0.0 : 0.3 + 0.2 * static_cast<double>(i);
  return truth;
}

TEST(TunePredictor, FitRecoversAKnownLinearModel) {
  const std::vector<double> truth = truth_coefficients();
  const auto samples = synthetic_samples(truth, 12, 16, 99);
  const Predictor p = fit_predictor(samples, "synthetic");
  EXPECT_EQ(p.version, kSpmmFeatureVersion);
  EXPECT_EQ(p.fitted_on, "synthetic");
  EXPECT_EQ(p.samples, static_cast<std::int64_t>(samples.size()));
  EXPECT_EQ(p.features, spmm_predictor_term_names());
  ASSERT_EQ(p.coefficients.size(), truth.size());
  EXPECT_GT(truth.back(), 0.0);  // the derived term is part of the model
  for (std::size_t i = 0; i < truth.size(); ++i) {
    EXPECT_GE(p.coefficients[i], 0.0);
    EXPECT_NEAR(p.coefficients[i], truth[i], 0.02 * (1.0 + truth[i])) << p.features[i];
  }
  for (const auto& s : samples) EXPECT_NEAR(p.predict_us(s.features), s.median_us, 0.01 * s.median_us);
  const PredictorEvaluation e = evaluate_predictor(p, samples);
  EXPECT_EQ(e.problems, 12);
  EXPECT_EQ(e.top1_within_10pct, 1.0);
  EXPECT_EQ(e.top3_contains_best, 1.0);
  EXPECT_LT(e.geomean_top1_over_best, 1.01);
  ASSERT_EQ(e.per_problem.size(), 12u);
  for (const json& row : e.per_problem) EXPECT_EQ(row["best_rank"], 1) << row.dump();
}

TEST(TunePredictor, FitRanksDespiteConstantsNoTermExplains) {
  // Every problem's times are shifted by a constant of its own that no term explains, so no
  // coefficients fit the times exactly: the fit's within-problem part still picks a candidate within
  // 5 % of each problem's best, with the best in the top 3. (Fitted on the times alone, the top choice
  // of one of these problems is 15 % slow, of two others 5 and 10 %.)
  const auto samples = synthetic_samples(truth_coefficients(), 12, 16, 21, 4.0);
  const Predictor p = fit_predictor(samples, "offsets");
  for (double c : p.coefficients) {
    EXPECT_GE(c, 0.0);
    EXPECT_TRUE(std::isfinite(c));
  }
  const PredictorEvaluation e = evaluate_predictor(p, samples);
  EXPECT_EQ(e.problems, 12);
  EXPECT_EQ(e.top1_within_10pct, 1.0) << e.per_problem.dump(1);
  EXPECT_EQ(e.top3_contains_best, 1.0) << e.per_problem.dump(1);
  EXPECT_LT(e.geomean_top1_over_best, 1.01);
  for (const json& row : e.per_problem) EXPECT_LT(row["ratio"].get<double>(), 1.05) << row.dump();
}

TEST(TunePredictor, FitIsDeterministicAndChecksItsInput) {
  const auto samples = synthetic_samples(truth_coefficients(), 5, 9, 4);
  const Predictor a = fit_predictor(samples, "x");
  const Predictor b = fit_predictor(samples, "x");
  ASSERT_EQ(a.coefficients.size(), b.coefficients.size());
  EXPECT_EQ(std::memcmp(a.coefficients.data(), b.coefficients.data(), a.coefficients.size() * sizeof(double)),
            0);
  // Noisy times still give non-negative coefficients.
  auto noisy = samples;
  SplitMix64 rng(8);
  for (auto& s : noisy) s.median_us *= 1.0 + 0.2 * rng.uniform_pm1();
  for (double c : fit_predictor(noisy, "noisy").coefficients) {
    EXPECT_GE(c, 0.0);
    EXPECT_TRUE(std::isfinite(c));
  }

  EXPECT_THROW(fit_predictor({}, "none"), UsageError);
  auto short_features = samples;
  short_features[3].features.pop_back();
  EXPECT_THROW(fit_predictor(short_features, "x"), UsageError);
  auto zero_time = samples;
  zero_time[2].median_us = 0;
  EXPECT_THROW(fit_predictor(zero_time, "x"), UsageError);
  auto nan_feature = samples;
  nan_feature[1].features[1] = std::nan("");
  EXPECT_THROW(fit_predictor(nan_feature, "x"), UsageError);
}

TEST(TunePredictor, RankCandidatesIsStableOnTies) {
  Predictor p;
  p.features = {"issue_us"};
  p.coefficients = {1.0};
  const std::size_t d = spmm_feature_names().size(), issue = index_of("issue_us");
  std::vector<std::vector<double>> f;
  for (double t : {3.0, 1.0, 3.0, 1.0, 2.0, 1.0}) {
    f.emplace_back(d, 0.0);
    f.back()[issue] = t;
  }
  EXPECT_EQ(rank_candidates(p, f), (std::vector<std::size_t>{1, 3, 5, 4, 0, 2}));
  EXPECT_TRUE(rank_candidates(p, {}).empty());
  // All tied: input order.
  std::vector<std::vector<double>> same(5, std::vector<double>(d, 0.0));
  EXPECT_EQ(rank_candidates(p, same), (std::vector<std::size_t>{0, 1, 2, 3, 4}));
}

TEST(TunePredictor, EvaluateScoresEachProblemWithTwoOrMoreSamples) {
  Predictor p;
  p.features = {"issue_us"};
  p.coefficients = {1.0};
  const std::size_t d = spmm_feature_names().size(), issue = index_of("issue_us");
  const auto sample = [&](const std::string& problem, double predicted, double measured) {
    PredictorSample s;
    s.problem = problem;
    s.features.assign(d, 0.0);
    s.median_us = measured;
    s.features[issue] = predicted;
    return s;
  };
  // a: the predicted best (10.5) is within 10 % of the best (10) and the best is ranked second.
  // b: the predicted best is 30 % slow and the best is ranked fourth. c: one sample, not scored.
  const std::vector<PredictorSample> samples{sample("a", 1, 10.5), sample("a", 2, 10.0), sample("a", 3, 20.0),
                                             sample("b", 1, 13.0), sample("b", 2, 14.0), sample("c", 1, 5.0),
                                             sample("b", 3, 15.0), sample("b", 4, 10.0)};
  const PredictorEvaluation e = evaluate_predictor(p, samples);
  EXPECT_EQ(e.problems, 2);
  EXPECT_DOUBLE_EQ(e.top1_within_10pct, 0.5);
  EXPECT_DOUBLE_EQ(e.top3_contains_best, 0.5);
  EXPECT_NEAR(e.geomean_top1_over_best, std::sqrt(1.05 * 1.3), 1e-12);
  ASSERT_EQ(e.per_problem.size(), 2u);
  EXPECT_EQ(e.per_problem[0]["problem"], "a");
  EXPECT_EQ(e.per_problem[0]["best_rank"], 2);
  EXPECT_EQ(e.per_problem[0]["candidates"], 3);
  EXPECT_EQ(e.per_problem[1]["problem"], "b");
  EXPECT_EQ(e.per_problem[1]["best_rank"], 4);
  EXPECT_DOUBLE_EQ(e.per_problem[1]["chosen_us"].get<double>(), 13.0);
  EXPECT_DOUBLE_EQ(e.per_problem[1]["best_us"].get<double>(), 10.0);

  // The tuner's variants of a plan (register caps, two columns a thread) are not ranked: the best is
  // the fastest of all samples, and the plan it varies holds it.
  std::vector<PredictorSample> v{sample("v", 1, 10.0), sample("v", 2, 9.5), sample("v", 3, 9.8)};
  v[0].plan = "A";
  v[1].plan = "B";
  v[2].plan = "C";
  v.push_back(sample("v", 0.5, 12.0));  // predicted fastest of all, but a variant of A
  v.back().plan = "A";
  v.back().variant = true;
  v.push_back(sample("v", 9, 8.0));  // the best: a variant of B, ranked second
  v.back().plan = "B";
  v.back().variant = true;
  const PredictorEvaluation folded = evaluate_predictor(p, v);
  ASSERT_EQ(folded.problems, 1);
  EXPECT_EQ(folded.per_problem[0]["candidates"], 3);
  EXPECT_DOUBLE_EQ(folded.per_problem[0]["chosen_us"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(folded.per_problem[0]["best_us"].get<double>(), 8.0);
  EXPECT_EQ(folded.per_problem[0]["best_rank"], 2);
  EXPECT_DOUBLE_EQ(folded.top3_contains_best, 1.0);
  EXPECT_DOUBLE_EQ(folded.top1_within_10pct, 0.0);  // 10 against 8
  const PredictorEvaluation unfolded = evaluate_predictor(p, v, false);
  EXPECT_EQ(unfolded.per_problem[0]["candidates"], 5);
  EXPECT_DOUBLE_EQ(unfolded.per_problem[0]["chosen_us"].get<double>(), 12.0);
  EXPECT_EQ(unfolded.per_problem[0]["best_rank"], 5);
  v.back().plan = "Z";  // the best varies no ranked plan: no rank holds it
  EXPECT_EQ(evaluate_predictor(p, v).per_problem[0]["best_rank"], 4);
  EXPECT_DOUBLE_EQ(evaluate_predictor(p, v).top3_contains_best, 0.0);

  const PredictorEvaluation none = evaluate_predictor(p, {sample("only", 1, 1.0)});
  EXPECT_EQ(none.problems, 0);
  EXPECT_EQ(none.top1_within_10pct, 0.0);
  EXPECT_TRUE(none.per_problem.empty());
}

TEST(TunePredictor, RefreshRecomputesTheFeaturesOfARecord) {
  // A record as an older build wrote it: every timing's features of another feature set.
  const CsrMatrix a = random_csr(64, 48, 0.2, 7);
  // N above rolled_max_n: every candidate unrolled (rolled timings are never fitted).
  const SpmmProblem pr{a.rows, a.cols, 80, SpmmNMode::fixed, false, true, DType::f32};
  const SpmmSpace space = spmm_space(a, pr, SpmmOptions{}, KernelLanguage::ptx);
  ASSERT_GE(space.candidates.size(), 4u);
  TuningRecord r;
  r.key = spmm_tuning_key(a, pr, "NVIDIA H100 80GB HBM3", "9.0");
  for (std::size_t i = 0; i < 4; ++i) {
    CandidateTiming t;
    t.label = space.candidates[i].label;
    t.options = candidate_json(space.candidates[i]);
    t.features = {{"launch", 1.0}, {"bound_us", 2.0}};
    t.median_us = 3.0 + static_cast<double>(i);
    t.verified = true;
    r.timings.push_back(t);
  }
  CandidateTiming bad = r.timings[0];  // options that no longer plan: more rows than accumulators
  bad.options["rows_per_block"] = 100000;
  r.timings.push_back(bad);
  TuningDatabase db;
  db.put(r);
  std::size_t stale = 0;
  EXPECT_TRUE(predictor_samples(db, &stale).empty());
  EXPECT_EQ(stale, 5u);

  EXPECT_EQ(refresh_spmm_features(r, a), 1u);
  for (std::size_t i = 0; i < 4; ++i)
    EXPECT_EQ(r.timings[i].features, features_json(spmm_features(space.candidates[i].plan, a)))
        << r.timings[i].label;
  EXPECT_TRUE(r.timings[4].features.empty());
  db.put(r);
  stale = 0;
  const std::vector<PredictorSample> samples = predictor_samples(db, &stale);
  EXPECT_EQ(stale, 0u);
  ASSERT_EQ(samples.size(), 4u);
  EXPECT_EQ(samples[2].problem, key_string(r.key));
  EXPECT_EQ(samples[2].median_us, 5.0);
  EXPECT_EQ(samples[2].features, spmm_features(space.candidates[2].plan, a));

  // Timings taken with cold L2 are keyed apart, and fitted or scored only when asked for.
  TuningRecord cold = r;
  cold.key = spmm_tuning_key(a, pr, "NVIDIA H100 80GB HBM3", "9.0", true);
  EXPECT_TRUE(tuned_cold_l2(cold.key));
  EXPECT_FALSE(tuned_cold_l2(r.key));
  TuningKey odd = cold.key;
  odd.params["l2"] = 5;  // a hand-edited database: not a cold record, and no exception
  EXPECT_FALSE(tuned_cold_l2(odd));
  EXPECT_NE(key_string(cold.key), key_string(r.key));
  EXPECT_FALSE(cold.key == r.key);
  EXPECT_EQ(spmm_problem_of_key(cold.key, a).n, 80);
  db.put(cold);
  EXPECT_EQ(db.records.size(), 2u);
  EXPECT_EQ(predictor_samples(db).size(), 4u);
  for (const PredictorSample& s : predictor_samples(db)) EXPECT_EQ(s.problem, key_string(r.key));
  const std::vector<PredictorSample> cold_samples = predictor_samples(db, nullptr, true);  // `--cold-l2`
  ASSERT_EQ(cold_samples.size(), 4u);
  for (const PredictorSample& s : cold_samples) EXPECT_EQ(s.problem, key_string(cold.key));

  // The key must describe an SpMM problem of the matrix's shape.
  TuningRecord other = r;
  other.key.params["m"] = 65;
  EXPECT_THROW(refresh_spmm_features(other, a), UsageError);
  other = r;
  other.key.params.erase("relu");
  EXPECT_THROW(refresh_spmm_features(other, a), UsageError);
  other = r;
  other.key.op = "hines";
  EXPECT_THROW(refresh_spmm_features(other, a), UsageError);
}

// Tuning databases recorded on an H100 (tests/data/tuning): `sparsecc tune --suite rn50` over the 54
// DLMC ResNet-50 90 % layers at batch 1, a rerun of the 15 layers whose share of that run's budget
// timed one plan, a run over the 54 ResNet-50 95 % layers, the 96 DLMC Transformer 90 % layers at
// N = 256 (their features refreshed with `tune --refresh-features`), and two runs over the 95 %
// Transformer layers (attention, feed-forward). The shipped predictor is the fit of the three
// ResNet-50 files (the test refits them and compares) and is scored on the Transformer files, which
// it never saw: regression floors a little under what it reaches there (see
// docs/performance/2026-11-24-tuning-predictor.md).
TEST(TunePredictor, ShippedModelIsTheResNetFitAndRanksTheTransformerLayers) {
  const auto dir = test::source_dir() / "tests/data/tuning";
  const std::vector<std::filesystem::path> rn50_paths{dir / "h100_dlmc_rn50_b1_tune.json",
                                                      dir / "h100_dlmc_rn50_b1_rerun_tune.json",
                                                      dir / "h100_dlmc_rn50_95_b1_tune.json"};
  const auto transformer_path = dir / "h100_dlmc_transformer_b1_tune.json";
  for (const auto& p : {rn50_paths[0], rn50_paths[1], rn50_paths[2], transformer_path})
    if (!std::filesystem::exists(p))
      GTEST_SKIP() << "no recorded tuning database (" << p.string()
                   << "); record one on a Hopper GPU to run this";
  std::vector<std::string> warnings;
  std::size_t stale = 0;
  std::vector<PredictorSample> rn50;
  for (const auto& p : rn50_paths)
    for (PredictorSample& s : predictor_samples(load_database(p.string(), &warnings), &stale))
      rn50.push_back(std::move(s));
  const std::vector<PredictorSample> transformer =
      predictor_samples(load_database(transformer_path.string(), &warnings), &stale);
  ASSERT_TRUE(warnings.empty()) << warnings.front();
  EXPECT_EQ(stale, 0u);
  ASSERT_GT(rn50.size(), 1100u);
  ASSERT_GT(transformer.size(), 900u);

  const Predictor fitted = fit_predictor(rn50, "ResNet-50");
  const Predictor& shipped = shipped_predictor();
  EXPECT_EQ(shipped.samples, static_cast<std::int64_t>(rn50.size()));
  ASSERT_EQ(fitted.features, shipped.features);
  for (std::size_t i = 0; i < fitted.coefficients.size(); ++i)
    EXPECT_NEAR(fitted.coefficients[i], shipped.coefficients[i], 1e-12 * (1 + shipped.coefficients[i]))
        << shipped.features[i];

  const PredictorEvaluation e = evaluate_predictor(shipped, transformer);
  const PredictorEvaluation every = evaluate_predictor(shipped, transformer, false);
  std::cout << "shipped predictor on " << e.problems << " Transformer layers: top-1 within 10 % "
            << e.top1_within_10pct << ", top-3 holds the best " << e.top3_contains_best
            << ", geomean top-1 / best " << e.geomean_top1_over_best
            << "; variants ranked as plans: " << every.top1_within_10pct << ", " << every.top3_contains_best
            << "\n";
  ASSERT_EQ(e.problems, 96);
  EXPECT_GE(e.top1_within_10pct, 0.95) << e.per_problem.dump(1);
  EXPECT_GE(e.top3_contains_best, 0.9) << e.per_problem.dump(1);
  EXPECT_LE(e.geomean_top1_over_best, 1.03);
  EXPECT_GE(every.top1_within_10pct, 0.85);
  EXPECT_GE(every.top3_contains_best, 0.8);
  // The 95 % attention layers, recorded after the features were fixed (the ResNet-50 fit at 90 %
  // alone held their top choice but put the best in its top 3 on 35 %).
  const auto later_path = dir / "h100_dlmc_transformer95_attn_b1_tune.json";
  ASSERT_TRUE(std::filesystem::exists(later_path));
  const PredictorEvaluation later =
      evaluate_predictor(shipped, predictor_samples(load_database(later_path.string(), &warnings)));
  ASSERT_TRUE(warnings.empty());
  EXPECT_EQ(later.problems, 17);
  EXPECT_GE(later.top1_within_10pct, 0.95) << later.per_problem.dump(1);
  EXPECT_GE(later.top3_contains_best, 0.9) << later.per_problem.dump(1);
  EXPECT_LE(later.geomean_top1_over_best, 1.02);
  // The 95 % feed-forward layers, recorded after the predictor was shipped (its own shortlists).
  const auto ffn_path = dir / "h100_dlmc_transformer95_ffn_b1_tune.json";
  ASSERT_TRUE(std::filesystem::exists(ffn_path));
  const PredictorEvaluation ffn =
      evaluate_predictor(shipped, predictor_samples(load_database(ffn_path.string(), &warnings)));
  ASSERT_TRUE(warnings.empty());
  EXPECT_EQ(ffn.problems, 24);
  EXPECT_GE(ffn.top1_within_10pct, 0.9) << ffn.per_problem.dump(1);
  EXPECT_GE(ffn.top3_contains_best, 0.95) << ffn.per_problem.dump(1);
  EXPECT_LE(ffn.geomean_top1_over_best, 1.06);
  // In sample, on the ResNet-50 problems.
  const PredictorEvaluation own = evaluate_predictor(shipped, rn50);
  EXPECT_EQ(own.problems, 86);
  EXPECT_GE(own.top1_within_10pct, 0.85);
}

// Whole spaces timed on an H100 (`sparsecc tune --suite sparsert --batch 1 --first 11 --limit 5
// --exhaustive-limit 100000`): the five smallest SparseRT 90 % problems, 498-690 plans each (the two
// largest stopped at their budget share, in the predictor's order). Ranked over every plan of the
// space rather than over a tuner's shortlist, the shipped predictor's top choice is still within
// 10 % of the best; the best itself is seldom in its top 3 (plans within a few per cent of each
// other are many there).
TEST(TunePredictor, RanksWholeSpacesTimedExhaustively) {
  const auto path = test::source_dir() / "tests/data/tuning/h100_sparsert90_b1_exhaustive_tune.json";
  if (!std::filesystem::exists(path))
    GTEST_SKIP() << "no recorded tuning database (" << path.string()
                 << "); record one on a Hopper GPU to run this";
  std::vector<std::string> warnings;
  const TuningDatabase db = load_database(path.string(), &warnings);
  ASSERT_TRUE(warnings.empty()) << warnings.front();
  ASSERT_EQ(db.records.size(), 5u);
  double log_gain = 0;
  for (const TuningRecord& r : db.records) {
    EXPECT_EQ(r.strategy.rfind("exhaustive", 0), 0u) << r.strategy;
    EXPECT_GE(r.timings.size(), 490u);
    log_gain += std::log(r.default_us / r.winner_us);
  }
  const std::vector<PredictorSample> samples = predictor_samples(db);
  ASSERT_GT(samples.size(), 2900u);
  const PredictorEvaluation e = evaluate_predictor(shipped_predictor(), samples);
  std::cout << "whole spaces: " << samples.size() << " timings, the best plan " << std::exp(log_gain / 5)
            << "x the automatic one (geomean); shipped predictor: top-1 within 10 % " << e.top1_within_10pct
            << ", top-3 holds the best " << e.top3_contains_best << ", top-1 / best "
            << e.geomean_top1_over_best << "\n";
  EXPECT_EQ(e.problems, 5);
  EXPECT_GE(e.top1_within_10pct, 0.8) << e.per_problem.dump(1);
  EXPECT_LE(e.geomean_top1_over_best, 1.06) << e.per_problem.dump(1);
}

// Cold-L2 tuning databases recorded on an H100 (`sparsecc tune --suite ... --cold-l2`): SparseRT 90 %
// and 95 % at batch 1, 90 % at batch 16, and the 54 DLMC ResNet-50 90 % layers at batch 1. They are
// why `compile --db FILE --cold-l2` keeps the automatic plan without a cold record: timed cold, the
// shipped (warm) predictor's top choice ran slower than the automatic plan, and a refit on the cold
// ResNet-50 timings, though it ranks better out of sample, did not beat the automatic plan either
// (docs/performance/2026-11-25-tuning-cold-l2.md gives the figures these floors sit under).
TEST(TunePredictor, ColdTimingsKeepTheAutomaticPlanForColdLookups) {
  const auto dir = test::source_dir() / "tests/data/tuning";
  const std::vector<std::filesystem::path> sparsert{dir / "h100_sparsert90_b1_cold_tune.json",
                                                    dir / "h100_sparsert95_b1_cold_tune.json",
                                                    dir / "h100_sparsert90_b16_cold_tune.json"};
  const auto rn50_path = dir / "h100_dlmc_rn50_b1_cold_tune.json";
  for (const auto& p : {sparsert[0], sparsert[1], sparsert[2], rn50_path})
    if (!std::filesystem::exists(p))
      GTEST_SKIP() << "no recorded tuning database (" << p.string()
                   << "); record one on a Hopper GPU to run this";
  std::vector<std::string> warnings;
  // The predictor's top choice among each problem's timings against the automatic plan (the
  // record's default): geomean of default / chosen, over problems with two or more ranked plans.
  const auto against_default = [](const TuningDatabase& db, const PredictorEvaluation& e) {
    double log_sum = 0;
    int n = 0;
    for (const json& problem : e.per_problem)
      for (const TuningRecord& r : db.records)
        if (key_string(r.key) == problem["problem"].get<std::string>()) {
          log_sum += std::log(r.default_us / problem["chosen_us"].get<double>());
          ++n;
        }
    EXPECT_EQ(n, e.problems);
    return n ? std::exp(log_sum / n) : 0.0;
  };
  const TuningDatabase rn50_db = load_database(rn50_path.string(), &warnings);
  ASSERT_TRUE(warnings.empty()) << warnings.front();
  EXPECT_EQ(rn50_db.records.size(), 54u);
  for (const TuningRecord& r : rn50_db.records) EXPECT_TRUE(tuned_cold_l2(r.key));
  EXPECT_TRUE(predictor_samples(rn50_db).empty());  // no warm records
  const std::vector<PredictorSample> rn50 = predictor_samples(rn50_db, nullptr, true);
  ASSERT_GT(rn50.size(), 400u);
  const Predictor cold = fit_predictor(rn50, "ResNet-50, cold L2");
  const PredictorEvaluation warm_on_rn50 = evaluate_predictor(shipped_predictor(), rn50);
  EXPECT_LE(against_default(rn50_db, warm_on_rn50), 0.95);
  EXPECT_LE(against_default(rn50_db, evaluate_predictor(cold, rn50)), 1.0);

  const double cold_top1_floor[] = {0.55, 0.8, 0.8};
  const double warm_default_ceiling[] = {0.9, 1.05, 1.02};
  for (std::size_t i = 0; i < sparsert.size(); ++i) {
    const TuningDatabase db = load_database(sparsert[i].string(), &warnings);
    ASSERT_TRUE(warnings.empty()) << warnings.front();
    const std::vector<PredictorSample> samples = predictor_samples(db, nullptr, true);
    const PredictorEvaluation warm = evaluate_predictor(shipped_predictor(), samples);
    const PredictorEvaluation refit = evaluate_predictor(cold, samples);
    const double warm_vs_default = against_default(db, warm), refit_vs_default = against_default(db, refit);
    std::cout << sparsert[i].filename().string() << ": shipped top-1 " << warm.top1_within_10pct << ", "
              << warm_vs_default << "x the automatic plan; cold refit top-1 " << refit.top1_within_10pct
              << ", " << refit_vs_default << "x\n";
    EXPECT_GE(warm.problems, 17);
    EXPECT_GT(refit.top1_within_10pct, warm.top1_within_10pct - 1e-9);
    EXPECT_GE(refit.top1_within_10pct, cold_top1_floor[i]);
    EXPECT_LE(warm_vs_default, warm_default_ceiling[i]);
    if (i == 0) {
      EXPECT_LT(refit_vs_default, 1.0);  // SparseRT 90 %, batch 1: slower than the automatic plan
    }
  }
}

}  // namespace
}  // namespace sparsecc::tune
