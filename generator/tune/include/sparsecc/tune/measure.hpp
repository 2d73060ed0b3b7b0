// The tuner's GPU side, the measurers tune_spmm, tune_hines and tune_many take: each compiled
// candidate is loaded through the runtime, run once on NaN-poisoned outputs (pipeline/run.hpp, verify.hpp)
// and checked against the reference — SpMM: fp64 on a fresh random B with the problem's bias and ReLU, within
// spmm_tolerance; Hines: the extended-precision serial solve of a random time step's right-hand sides, within
// the accuracy yardstick's bound — and only then timed in steady state (rt::time_launches: a CUDA graph of
// 100 launches replayed for 25 ms to warm the clocks, then the median of 21 replays), with warm L2 or (SpMM,
// `tune --cold-l2`) cold.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/matrix/dense.hpp"
#include "sparsecc/neuron/hines.hpp"
#include "sparsecc/pipeline/run.hpp"
#include "sparsecc/pipeline/verify.hpp"
#include "sparsecc/plan/spmm_plan.hpp"
#include "sparsecc/runtime/device.hpp"
#include "sparsecc/runtime/timing.hpp"
#include "sparsecc/tune/hines_tuner.hpp"
#include "sparsecc/tune/tuner.hpp"

namespace sparsecc::tune {

// With `cold_l2`, a verified candidate is timed with cold L2, as `sparsecc_bench --cold-l2` times
// executors: its bundle is loaded once per operand set (each load with its own module, values and
// tables), each set with its own B and C, and the launches rotate through the sets, enough of them
// that twice the L2 passes between two uses of one set.
class GpuSpmmMeasurer : public SpmmMeasurer {
 public:
  // B is drawn from `seed` (random_check_input); `a` must outlive the measurer.
  GpuSpmmMeasurer(const rt::Context& ctx, const CsrMatrix& a, const SpmmProblem& problem,
                  const std::vector<double>& bias, std::uint64_t seed, bool cold_l2 = false);
  Measurement measure(const SpmmCandidate& candidate, const rt::Bundle& bundle) override;

 private:
  rt::LaunchTiming time_cold(const SpmmCandidate& candidate, const rt::Bundle& bundle);

  const rt::Context& ctx_;
  SpmmProblem problem_;
  const CsrMatrix& a_;
  DenseMatrix b_;
  DenseMatrix reference_;
  bool cold_l2_ = false;
  std::unique_ptr<pipeline::SpmmGpuInputs> inputs_;
  std::vector<std::unique_ptr<pipeline::SpmmGpuInputs>> cold_inputs_;  // grown as candidates need more sets
};

class GpuHinesMeasurer : public HinesMeasurer {
 public:
  // The right-hand sides are a random passive step's (random_step_rhs from `seed`); `system` must
  // outlive the measurer.
  GpuHinesMeasurer(const rt::Context& ctx, const HinesSystem& system, std::int32_t rhs,
                   const std::string& dtype, std::uint64_t seed);
  Measurement measure(const HinesCandidate& candidate, const rt::Bundle& bundle) override;

 private:
  const rt::Context& ctx_;
  std::vector<double> reference_;
  double tolerance_ = 0;
  std::unique_ptr<pipeline::HinesGpuInputs> inputs_;
};

}  // namespace sparsecc::tune
