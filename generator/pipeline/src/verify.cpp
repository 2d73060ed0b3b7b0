// The Hines checks (verify.hpp): the device inputs, `sparsecc verify` of a Hines bundle (one step of
// its executor on the GPU, or without one the plan rebuilt from the bundle's summary and run by the
// plan interpreter, saying so) and `sparsecc hines --check` (the plan interpreter), each against the
// extended-precision serial reference on the system.
#include "sparsecc/pipeline/verify.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "sparsecc/bundle/hines_bundle.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/neuron/forest.hpp"
#include "sparsecc/plan/hines_interpreter.hpp"
#include "sparsecc/reference/hines_accuracy.hpp"
#include "sparsecc/reference/hines_solve.hpp"
#include "sparsecc/runtime/driver.hpp"
#include "sparsecc/runtime/hines_executor.hpp"

namespace sparsecc::pipeline {

namespace {

// The values on the device in the solver's dtype.
rt::DeviceBuffer device_copy(const std::vector<double>& v, const std::string& dtype) {
  if (dtype == "f32") {
    const std::vector<float> f(v.begin(), v.end());
    rt::DeviceBuffer d(f.size() * sizeof(float));
    d.upload(f.data(), f.size() * sizeof(float));
    return d;
  }
  rt::DeviceBuffer d(v.size() * sizeof(double));
  d.upload(v.data(), v.size() * sizeof(double));
  return d;
}

}  // namespace

HinesGpuInputs::HinesGpuInputs(const HinesSystem& s, const std::vector<double>& b, const std::string& dtype)
    : dtype_(dtype),
      count_(b.size()),
      d_(device_copy(s.diag, dtype)),
      u_(device_copy(s.upper, dtype)),
      l_(device_copy(s.lower, dtype)),
      b_(device_copy(b, dtype)),
      x_(b_.size()) {}

std::vector<double> HinesGpuInputs::run(const rt::Context& ctx, const rt::HinesExecutor& exec) {
  x_.fill32(0x7fc00000u);  // NaN in every fp32 word and every fp64 word
  enqueue(exec, nullptr);
  ctx.synchronize();
  std::vector<double> x(count_);
  if (dtype_ == "f32") {
    std::vector<float> f(count_);
    x_.download(f.data(), f.size() * sizeof(float));
    x.assign(f.begin(), f.end());
  } else {
    x_.download(x.data(), x.size() * sizeof(double));
  }
  return x;
}

void HinesGpuInputs::enqueue(const rt::HinesExecutor& exec, CUstream stream) const {
  exec.run(d_.get(), u_.get(), l_.get(), b_.get(), x_.get(), stream);
}

HinesVerifyResult verify_hines_bundle(const rt::Bundle& bundle, const std::string& path, std::uint64_t seed,
                                      double tolerance, bool cpu) {
  const rt::BundleMetadata& md = bundle.metadata;
  if (bundle.reference.empty())
    throw InputError(SourceLocation::in_file(path), "the bundle carries no verification section");
  const HinesSystem s = hines_system_from_reference_bytes(bundle.reference, path);
  if (fmt::format("{:016x}", rt::fnv1a64(bundle.reference)) != md.fingerprint)
    throw InputError(SourceLocation::in_file(path), "the verification system does not match the fingerprint");
  if (s.size() != md.hines.rows || s.num_cells() != md.hines.cells)
    throw InputError(SourceLocation::in_file(path),
                     "the verification system does not match hines.rows / hines.cells");
  const auto r = static_cast<std::size_t>(md.hines.rhs);
  std::vector<double> b;
  if (s.cap_over_dt.empty()) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(-1, 1);
    b.resize(static_cast<std::size_t>(s.size()) * r);
    for (double& v : b) v = u(rng);
  } else {
    b = random_step_rhs(s, r, seed);
  }
  const HinesAccuracy acc = hines_accuracy(s, b, md.hines.rhs);
  const std::vector<double>& ref = acc.ref;
  const bool f32 = md.dtype == "f32";
  HinesVerifyResult result;
  result.rows = md.hines.rows;
  result.cells = md.hines.cells;
  result.rhs = md.hines.rhs;
  result.dtype = md.dtype;
  if (tolerance <= 0) {
    tolerance = acc.tolerance(md.dtype);
    if (const std::string n = acc.note(md.dtype); !n.empty()) result.note = fmt::format(" [{}]", n);
  }
  result.tolerance = tolerance;
  std::vector<double> got;
  std::string why;
  if (!cpu && rt::driver_available(&why)) {
    const rt::Context ctx(0);
    const rt::HinesExecutor ex = rt::HinesExecutor::load(bundle, path, ctx);
    HinesGpuInputs inputs(s, b, md.dtype);
    got = inputs.run(ctx, ex);
    result.how = fmt::format("GPU {} ({} image)", ctx.device().name, ex.loaded_from());
  } else {
    const HinesPlan plan = replan_hines_bundle(md, s, path);
    if (f32) {
      const auto f = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
      const auto xf = interpret_hines(plan, f(s.diag), f(s.upper), f(s.lower), f(b));
      got.assign(xf.begin(), xf.end());
    } else {
      got = interpret_hines(plan, s.diag, s.upper, s.lower, b);
    }
    result.how = cpu ? "plan interpreter (--cpu)" : fmt::format("plan interpreter (no GPU: {})", why);
  }
  double err = 0, scale = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) {
      ++result.unwritten;
      continue;
    }
    err = std::max(err, std::fabs(got[i] - ref[i]));
    scale = std::max(scale, std::fabs(ref[i]));
  }
  result.rel_error = scale > 0 ? err / scale : err;
  return result;
}

double hines_backward_error(const HinesSystem& s, const std::vector<double>& x, const std::vector<double>& b,
                            std::size_t r) {
  const auto n = static_cast<std::size_t>(s.size());
  std::vector<double> ax(n * r, 0.0), mag(n * r, 0.0);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t c = 0; c < r; ++c) {
      ax[i * r + c] += s.diag[i] * x[i * r + c];
      mag[i * r + c] += std::fabs(s.diag[i] * x[i * r + c]) + std::fabs(b[i * r + c]);
      const std::int32_t p = s.parent[i];
      if (p < 0) continue;
      const auto q = static_cast<std::size_t>(p);
      ax[i * r + c] += s.upper[i] * x[q * r + c];
      mag[i * r + c] += std::fabs(s.upper[i] * x[q * r + c]);
      ax[q * r + c] += s.lower[i] * x[i * r + c];
      mag[q * r + c] += std::fabs(s.lower[i] * x[i * r + c]);
    }
  double eta = 0;
  for (std::size_t j = 0; j < n * r; ++j)
    if (mag[j] > 0) eta = std::max(eta, std::fabs(ax[j] - b[j]) / mag[j]);
  return eta;
}

HinesNumericsCheck check_hines_plan_numerics(const HinesPlan& plan, const HinesSystem& s,
                                             std::uint64_t seed) {
  const auto r = static_cast<std::size_t>(plan.problem.rhs);
  const std::vector<double> b = random_step_rhs(s, r, seed);
  const HinesAccuracy acc = hines_accuracy(s, b, plan.problem.rhs);
  const std::vector<double>& ref = acc.ref;
  std::vector<double> x;
  if (plan.problem.dtype == "f64") {
    x = interpret_hines(plan, s.diag, s.upper, s.lower, b);
  } else {
    const auto f = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
    const auto xf = interpret_hines(plan, f(s.diag), f(s.upper), f(s.lower), f(b));
    x.assign(xf.begin(), xf.end());
  }
  return {hines_max_rel_error(x, ref), acc.tolerance(plan.problem.dtype), acc.note(plan.problem.dtype),
          hines_backward_error(s, x, b, r), hines_backward_error(s, hines_solve_many(s, b, r), b, r)};
}

}  // namespace sparsecc::pipeline
