// The Hines tuner with fake compile and GPU stages: every candidate measured (the default first),
// the fastest verified one wins, failures are recorded and never win, the budget stops new compiles;
// the winner's options round-trip through JSON to the same plan; keys follow the system.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <set>
#include <stdexcept>

#include "hines_support.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/tune/hines_tuner.hpp"

namespace sparsecc {
namespace {

// Times by candidate index: the space's i-th candidate takes 100 - i us, except those listed as failing.
class FakeMeasurer : public tune::HinesMeasurer {
 public:
  std::map<std::string, double> us;
  std::set<std::string> fail;
  std::vector<std::string> order;
  tune::Measurement measure(const tune::HinesCandidate& c, const rt::Bundle&) override {
    order.push_back(c.label);
    tune::Measurement m;
    if (fail.count(c.label)) {
      m.error = "verification failed";
      m.rel_error = 1;
      return m;
    }
    m.verified = true;
    m.median_us = us.at(c.label);
    m.rel_error = 1e-16;
    return m;
  }
};

const HinesSystem& test_system() {
  static const HinesSystem s = [] {
    std::mt19937_64 rng(9);
    return test::random_system(rng, 3000, 8, 0.1);
  }();
  return s;
}
tune::HinesSpace test_space() { return tune::hines_space(test_system(), 1, "f64"); }

TEST(TuneHines, ExhaustiveFastestVerifiedWinsAndFailuresNeverWin) {
  const tune::HinesSpace space = test_space();
  ASSERT_GE(space.candidates.size(), 4u);
  FakeMeasurer m;
  for (std::size_t i = 0; i < space.candidates.size(); ++i)
    m.us[space.candidates[i].label] = 100.0 - static_cast<double>(i);
  const std::string fastest = space.candidates.back().label;
  m.fail.insert(fastest);  // the fastest fails verification: the next one wins
  const std::string broken = space.candidates[1].label;
  tune::TuneOptions o;
  o.jobs = 3;
  const tune::TuningRecord r = tune::tune_hines(
      space, {},
      [&](const tune::HinesCandidate& c) {
        if (c.label == broken) throw std::runtime_error("NVRTC said no");
        return rt::Bundle{};
      },
      m, o);
  EXPECT_EQ(r.timings.size(), space.candidates.size());
  EXPECT_EQ(m.order.front(), space.candidates.front().label);  // the default first
  EXPECT_EQ(r.winner, space.candidates[space.candidates.size() - 2].label);
  EXPECT_DOUBLE_EQ(r.default_us, 100.0);
  EXPECT_EQ(r.strategy, "exhaustive");
  bool saw_broken = false, saw_failed = false;
  for (const tune::CandidateTiming& t : r.timings) {
    if (t.label == broken) {
      saw_broken = true;
      EXPECT_FALSE(t.verified);
      EXPECT_NE(t.error.find("NVRTC said no"), std::string::npos);
    }
    if (t.label == fastest) {
      saw_failed = true;
      EXPECT_FALSE(t.verified);
      EXPECT_TRUE(std::isnan(t.median_us));
    }
  }
  EXPECT_TRUE(saw_broken && saw_failed);
  // The winner's options rebuild its plan.
  const HinesOptions back = tune::hines_options_from_json(r.winner_options, {}, "db");
  const tune::HinesCandidate& w = space.candidates[space.candidates.size() - 2];
  EXPECT_EQ(to_json(plan_hines(test_system(), 1, "f64", back)), to_json(w.plan));
}

TEST(TuneHines, BudgetStopsNewCompilesAndNothingVerifiedFallsBackToTheDefault) {
  const tune::HinesSpace space = test_space();
  FakeMeasurer m;
  for (const auto& c : space.candidates) m.fail.insert(c.label);
  tune::TuneOptions o;
  o.jobs = 1;
  o.budget_seconds = 1e-9;  // only the default's compile may start
  const tune::TuningRecord r = tune::tune_hines(
      space, {}, [](const tune::HinesCandidate&) { return rt::Bundle{}; }, m, o);
  EXPECT_EQ(r.timings.size(), 1u);
  EXPECT_EQ(r.winner, space.candidates.front().label);
  EXPECT_TRUE(std::isnan(r.winner_us));
  EXPECT_NE(r.strategy.find("budget"), std::string::npos);
}

TEST(TuneHines, OptionsJsonAndKeys) {
  HinesOptions o;
  o.decomposition = HinesDecomposition::minimal;
  o.k = 6;
  o.k_large = 16;
  o.depth = 3;
  o.block_threads = 256;
  o.code = "tables";
  const HinesOptions back = tune::hines_options_from_json(tune::hines_options_json(o), {}, "db");
  EXPECT_EQ(back.decomposition, o.decomposition);
  EXPECT_EQ(back.k, 6);
  EXPECT_EQ(back.k_large, 16);
  EXPECT_EQ(back.depth, 3);
  EXPECT_EQ(back.block_threads, 256);
  EXPECT_EQ(back.code, "tables");
  EXPECT_THROW(tune::hines_options_from_json({{"k", "three"}}, {}, "db"), InputError);
  EXPECT_THROW(tune::hines_options_from_json({{"decomposition", "coarse"}}, {}, "db"), InputError);

  const HinesSystem a = test::chain_system(50), b = test::chain_system(51);
  const tune::TuningKey ka = tune::hines_tuning_key(a, 1, "f64", "GPU", "9.0");
  EXPECT_EQ(ka, tune::hines_tuning_key(a, 1, "f64", "GPU", "9.0"));
  EXPECT_NE(ka.fingerprint, tune::hines_tuning_key(b, 1, "f64", "GPU", "9.0").fingerprint);
  EXPECT_FALSE(ka == tune::hines_tuning_key(a, 2, "f64", "GPU", "9.0"));
  EXPECT_EQ(ka.op, "hines");
  EXPECT_EQ(ka.params["rows"], 50);
}

}  // namespace
}  // namespace sparsecc
