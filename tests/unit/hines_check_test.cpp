// `sparsecc hines --check` as a library call (pipeline/verify.hpp): the plan interpreter against the
// extended-precision serial reference, in f64 and f32, and the componentwise backward error.
#include <gtest/gtest.h>

#include <vector>

#include "sparsecc/inspector/hines_planner.hpp"
#include "sparsecc/neuron/forest.hpp"
#include "sparsecc/neuron/hines.hpp"
#include "sparsecc/neuron/morphology.hpp"
#include "sparsecc/pipeline/verify.hpp"
#include "sparsecc/reference/hines_solve.hpp"

namespace sparsecc {
namespace {

TEST(HinesCheck, PlansOfTheDemoNeuronPassInBothPrecisions) {
  const HinesSystem s = assemble_hines(make_demo_neuron());
  HinesOptions o;
  o.base_rows = 20;
  for (const std::string dtype : {"f64", "f32"})
    for (const std::int32_t rhs : {1, 3}) {
      const HinesPlan plan = plan_hines(s, rhs, dtype, o);
      const pipeline::HinesNumericsCheck c = pipeline::check_hines_plan_numerics(plan, s, 7);
      EXPECT_TRUE(c.ok()) << dtype << " R " << rhs << ": " << c.error << " > " << c.tolerance;
      EXPECT_GT(c.tolerance, 0);
      EXPECT_LE(c.tolerance, dtype == "f64" ? 1e-9 : 1e-2);
      EXPECT_LT(c.ref_backward, 1e-14);
      EXPECT_LT(c.backward, dtype == "f64" ? 1e-13 : 1e-5);
      // The same seed, the same numbers.
      EXPECT_EQ(pipeline::check_hines_plan_numerics(plan, s, 7).error, c.error);
    }
}

TEST(HinesCheck, BackwardErrorOfAWrongSolutionIsLarge) {
  const HinesSystem s = assemble_hines(make_demo_neuron());
  const std::vector<double> b = random_step_rhs(s, 2, 3);
  std::vector<double> x = hines_solve_many(s, b, 2);
  EXPECT_LT(pipeline::hines_backward_error(s, x, b, 2), 1e-14);
  for (double& v : x) v *= 1.5;
  EXPECT_GT(pipeline::hines_backward_error(s, x, b, 2), 1e-2);
}

}  // namespace
}  // namespace sparsecc
