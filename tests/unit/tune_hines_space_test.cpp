// The Hines search space: the default plan first, every candidate a valid and distinct plan, the
// depth dimension around the rule, and the rules' reasons.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "hines_support.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/tune/hines_space.hpp"

namespace sparsecc {
namespace {

TEST(TuneHinesSpace, DefaultFirstAndEveryCandidateIsAValidDistinctPlan) {
  std::mt19937_64 rng(5);
  const HinesSystem s = test::random_system(rng, 6000, 20, 0.1);
  const tune::HinesSpace space = tune::hines_space(s, 1, "f64");
  ASSERT_GT(space.candidates.size(), 5u);
  EXPECT_TRUE(space.candidates.front().is_default);
  EXPECT_EQ(to_json(space.candidates.front().plan), to_json(plan_hines(s, 1, "f64")));
  std::set<std::string> plans, labels;
  std::set<std::int32_t> depths;
  for (const tune::HinesCandidate& c : space.candidates) {
    EXPECT_TRUE(check_hines_plan(c.plan).empty()) << c.label;
    EXPECT_TRUE(plans.insert(to_json(c.plan).dump()).second) << "the same plan twice: " << c.label;
    labels.insert(c.label);
    depths.insert(c.plan.depth());
    HinesOptions by_rule = c.options;
    by_rule.depth = -1;
    EXPECT_LE(std::abs(c.plan.depth() - plan_hines(s, 1, "f64", by_rule).depth()), 1) << c.label;
    // The options alone rebuild the candidate's plan.
    EXPECT_EQ(to_json(plan_hines(s, 1, "f64", c.options)), to_json(c.plan)) << c.label;
  }
  EXPECT_GE(depths.size(), 2u);  // the depth dimension is explored
  EXPECT_GE(space.points, static_cast<std::int64_t>(space.candidates.size() + space.rejected.size()));
  const nlohmann::json j = tune::to_json(space, {});
  EXPECT_EQ(j["op"], "hines");
  EXPECT_EQ(j["candidates"].size(), space.candidates.size());
  EXPECT_EQ(j["dimensions"]["k"].size(), 5u);
}

TEST(TuneHinesSpace, RulesAndErrors) {
  const HinesSystem chain = test::chain_system(40);
  tune::HinesSpaceDims dims;
  dims.depth_offset = {-50, 0};  // far below zero: rejected with the reason
  const tune::HinesSpace space = tune::hines_space(chain, 2, "f32", {}, dims);
  ASSERT_FALSE(space.candidates.empty());
  bool depth_rule = false;
  for (const auto& [point, rule] : space.rejected)
    depth_rule |= rule.find("outside 0..") != std::string::npos;
  EXPECT_TRUE(depth_rule);
  EXPECT_THROW(tune::hines_space(chain, 1, "f16"), UsageError);  // the default plan itself is invalid
}

}  // namespace
}  // namespace sparsecc
