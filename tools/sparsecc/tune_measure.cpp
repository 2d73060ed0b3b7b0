#include "tune_measure.hpp"

#include <fmt/format.h>

#include "sparsecc/neuron/forest.hpp"
#include "sparsecc/reference/hines_accuracy.hpp"
#include "sparsecc/reference/spmm.hpp"
#include "sparsecc/runtime/hines_executor.hpp"
#include "sparsecc/runtime/executor.hpp"
#include "sparsecc/runtime/timing.hpp"

namespace sparsecc::cli {

GpuSpmmMeasurer::GpuSpmmMeasurer(const rt::Context& ctx, const CsrMatrix& a, const SpmmProblem& problem,
                                 const std::vector<double>& bias, std::uint64_t seed)
    : ctx_(ctx), problem_(problem), a_(a) {
  const DenseMatrix b = random_check_input(a.cols, problem.n, seed, problem.dtype);
  reference_ = spmm(round_values(a, problem.dtype), b, bias.empty() ? nullptr : &bias, problem.relu);
  ctx_.make_current();
  inputs_ = std::make_unique<SpmmGpuInputs>(problem.dtype, b, a.rows);
}

tune::Measurement GpuSpmmMeasurer::measure(const tune::SpmmCandidate& candidate, const rt::Bundle& bundle) {
  tune::Measurement m;
  const rt::SpmmExecutor exec = rt::SpmmExecutor::load(bundle, candidate.label, ctx_);
  const SpmmCheck check = compare_spmm(inputs_->run(ctx_, exec, problem_.n), reference_);
  m.rel_error = check.rel_error;
  const double tolerance = spmm_check_tolerance(a_, problem_.dtype, candidate.plan.accumulate);
  if (check.unwritten > 0 || !(check.rel_error <= tolerance)) {
    m.error = fmt::format("verification failed: {} unwritten outputs, max relative error {:.3e} (tolerance {:.1e})",
                          check.unwritten, check.rel_error, tolerance);
    return m;
  }
  const int n = static_cast<int>(problem_.n);
  const rt::LaunchTiming t =
      rt::time_launches(ctx_, [&](CUstream s) { exec.run(inputs_->b(), inputs_->c(), n, s); });
  m.verified = true;
  m.median_us = t.median_us;
  return m;
}

GpuHinesMeasurer::GpuHinesMeasurer(const rt::Context& ctx, const HinesSystem& system, std::int32_t rhs,
                                   const std::string& dtype, std::uint64_t seed)
    : ctx_(ctx) {
  const std::vector<double> b = random_step_rhs(system, static_cast<std::size_t>(rhs), seed);
  const HinesAccuracy acc = hines_accuracy(system, b, rhs);
  reference_ = acc.ref;
  tolerance_ = acc.tolerance(dtype);
  ctx_.make_current();
  inputs_ = std::make_unique<HinesGpuInputs>(system, b, dtype);
}

tune::Measurement GpuHinesMeasurer::measure(const tune::HinesCandidate& candidate, const rt::Bundle& bundle) {
  tune::Measurement m;
  const rt::HinesExecutor exec = rt::HinesExecutor::load(bundle, candidate.label, ctx_);
  const std::vector<double> x = inputs_->run(ctx_, exec);
  m.rel_error = hines_max_rel_error(x, reference_);  // infinite when an output is not finite
  if (!(m.rel_error <= tolerance_)) {
    m.error = fmt::format("verification failed: max relative error {:.3e} (tolerance {:.1e})", m.rel_error, tolerance_);
    return m;
  }
  const rt::LaunchTiming t = rt::time_launches(ctx_, [&](CUstream s) { inputs_->enqueue(exec, s); });
  m.verified = true;
  m.median_us = t.median_us;
  return m;
}

}  // namespace sparsecc::cli
