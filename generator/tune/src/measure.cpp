#include "sparsecc/tune/measure.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "sparsecc/neuron/forest.hpp"
#include "sparsecc/reference/hines_accuracy.hpp"
#include "sparsecc/reference/spmm.hpp"
#include "sparsecc/runtime/executor.hpp"
#include "sparsecc/runtime/hines_executor.hpp"
#include "sparsecc/runtime/timing.hpp"

namespace sparsecc::tune {

using pipeline::compare_spmm;
using pipeline::HinesGpuInputs;
using pipeline::random_check_input;
using pipeline::spmm_check_tolerance;
using pipeline::SpmmCheck;
using pipeline::SpmmGpuInputs;

GpuSpmmMeasurer::GpuSpmmMeasurer(const rt::Context& ctx, const CsrMatrix& a, const SpmmProblem& problem,
                                 const std::vector<double>& bias, std::uint64_t seed, bool cold_l2)
    : ctx_(ctx),
      problem_(problem),
      a_(a),
      b_(random_check_input(a.cols, problem.n, seed, std::string(dtype_name(problem.dtype)))),
      cold_l2_(cold_l2) {
  reference_ = spmm(round_values(a, problem.dtype), b_, bias.empty() ? nullptr : &bias, problem.relu);
  ctx_.make_current();
  inputs_ = std::make_unique<SpmmGpuInputs>(std::string(dtype_name(problem.dtype)), b_, a.rows);
}

rt::LaunchTiming GpuSpmmMeasurer::time_cold(const SpmmCandidate& candidate, const rt::Bundle& bundle) {
  // The bytes one launch keeps in L2: code, values and tables, B and C.
  const std::size_t element = problem_.dtype == DType::f32 ? 4 : 2;
  const std::size_t set_bytes =
      rt::spmm_resident_bytes(bundle) +
      static_cast<std::size_t>(a_.cols + a_.rows) * static_cast<std::size_t>(problem_.n) * element;
  constexpr std::size_t kMaxSets = 256;
  const std::size_t target = 2 * ctx_.device().l2_bytes;
  const std::size_t sets =
      std::clamp<std::size_t>((target + set_bytes - 1) / std::max<std::size_t>(set_bytes, 1), 2, kMaxSets);
  while (cold_inputs_.size() < sets)
    cold_inputs_.push_back(
        std::make_unique<SpmmGpuInputs>(std::string(dtype_name(problem_.dtype)), b_, a_.rows));
  std::vector<rt::SpmmExecutor> copies;
  copies.reserve(sets);
  for (std::size_t s = 0; s < sets; ++s)
    copies.push_back(rt::SpmmExecutor::load(bundle, candidate.label, ctx_));
  const int n = static_cast<int>(problem_.n);
  std::size_t next = 0;
  return rt::time_launches(ctx_, [&](CUstream stream) {
    copies[next].run(cold_inputs_[next]->b(), cold_inputs_[next]->c(), n, stream);
    next = (next + 1) % sets;
  });
}

Measurement GpuSpmmMeasurer::measure(const SpmmCandidate& candidate, const rt::Bundle& bundle) {
  Measurement m;
  const rt::SpmmExecutor exec = rt::SpmmExecutor::load(bundle, candidate.label, ctx_);
  const SpmmCheck check = compare_spmm(inputs_->run(ctx_, exec, problem_.n), reference_);
  m.rel_error = check.rel_error;
  const double tolerance = spmm_check_tolerance(a_, std::string(dtype_name(problem_.dtype)),
                                                std::string(dtype_name(candidate.plan.epilogue.accumulate)));
  if (check.unwritten > 0 || !(check.rel_error <= tolerance)) {
    m.error =
        fmt::format("verification failed: {} unwritten outputs, max relative error {:.3e} (tolerance {:.1e})",
                    check.unwritten, check.rel_error, tolerance);
    return m;
  }
  const int n = static_cast<int>(problem_.n);
  const rt::LaunchTiming t =
      cold_l2_ ? time_cold(candidate, bundle)
               : rt::time_launches(ctx_, [&](CUstream s) { exec.run(inputs_->b(), inputs_->c(), n, s); });
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

Measurement GpuHinesMeasurer::measure(const HinesCandidate& candidate, const rt::Bundle& bundle) {
  Measurement m;
  const rt::HinesExecutor exec = rt::HinesExecutor::load(bundle, candidate.label, ctx_);
  const std::vector<double> x = inputs_->run(ctx_, exec);
  m.rel_error = hines_max_rel_error(x, reference_);  // infinite when an output is not finite
  if (!(m.rel_error <= tolerance_)) {
    m.error = fmt::format("verification failed: max relative error {:.3e} (tolerance {:.1e})", m.rel_error,
                          tolerance_);
    return m;
  }
  const rt::LaunchTiming t = rt::time_launches(ctx_, [&](CUstream s) { inputs_->enqueue(exec, s); });
  m.verified = true;
  m.median_us = t.median_us;
  return m;
}

}  // namespace sparsecc::tune
