#include "tune_measure.hpp"

#include <fmt/format.h>

#include "sparsecc/reference/spmm.hpp"
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

}  // namespace sparsecc::cli
