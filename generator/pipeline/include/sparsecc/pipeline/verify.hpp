// Checking Hines executors and plans against the references: `sparsecc verify` of a Hines bundle,
// `sparsecc hines --check`, and the device inputs the tuner's Hines measurer shares (SpMM executors
// run through run.hpp). An executor runs on a solution poisoned with NaN first (an output it never
// writes fails the check), its result widened to double, against the extended-precision serial solve
// of the right-hand sides of a random passive time step (random_step_rhs), within the accuracy
// yardstick's bound (reference/hines_accuracy.hpp). The numbers come back to the caller, which prints
// them and sets its exit status.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sparsecc/neuron/hines.hpp"
#include "sparsecc/plan/hines_plan.hpp"
#include "sparsecc/runtime/bundle.hpp"
#include "sparsecc/runtime/device.hpp"
#include "sparsecc/runtime/hines_executor.hpp"

namespace sparsecc::pipeline {

// One step's arrays on the device in the executor's dtype (f64 or f32): the system's d, u and l, the
// right-hand sides b (rows x R) and the solution x. Shared by verify_hines_bundle and the tuner's
// measurer.
class HinesGpuInputs {
 public:
  HinesGpuInputs(const HinesSystem& s, const std::vector<double>& b, const std::string& dtype);
  // Poisons x with NaN, runs one step, waits, and returns x widened to double.
  std::vector<double> run(const rt::Context& ctx, const rt::HinesExecutor& exec);
  // Enqueues one step on `stream` (for timing).
  void enqueue(const rt::HinesExecutor& exec, CUstream stream) const;

 private:
  std::string dtype_;
  std::size_t count_ = 0;
  rt::DeviceBuffer d_, u_, l_, b_, x_;
};

// What verify_hines_bundle found: the bundle's problem, where it ran and the error against the
// reference.
struct HinesVerifyResult {
  std::int64_t rows = 0, cells = 0, rhs = 0;
  std::string dtype;
  std::string how;       // "GPU <name> (<image> image)", or "plan interpreter (...)"
  double rel_error = 0;  // max |x - x_ref| / max |x_ref| over the finite outputs
  double tolerance = 0;  // the bound it is held to
  std::string note;      // why the bound is above its floor (" [...]"), when the yardstick raised it
  std::int64_t unwritten = 0;
  bool ok() const { return unwritten == 0 && rel_error <= tolerance; }
};

// One step of a Hines bundle's executor (named `path` in errors) on the right-hand sides of a fresh
// random time step from `seed`, against the extended-precision serial reference on the system the
// bundle carries. tolerance <= 0: the accuracy yardstick's bound for the dtype. On the GPU unless
// `cpu` or no driver is usable; then the plan is rebuilt from the bundle's summary and run by the
// plan interpreter, and `how` says so. Throws InputError for a bundle whose verification section is
// missing or does not match its metadata.
HinesVerifyResult verify_hines_bundle(const rt::Bundle& bundle, const std::string& path, std::uint64_t seed,
                                      double tolerance, bool cpu);

// What check_hines_plan_numerics found.
struct HinesNumericsCheck {
  double error = 0;         // max |x - x_ref| / max |x_ref|
  double tolerance = 0;     // the accuracy yardstick's bound
  std::string note;         // why the bound is above its floor, when it is
  double backward = 0;      // componentwise backward error of the plan's x
  double ref_backward = 0;  // of the serial fp64 x_ref
  bool ok() const { return error <= tolerance; }
};

// Componentwise backward error of x for A x = b (N x R): max over rows of |A x - b| over
// |A| |x| + |b|. It is independent of the conditioning, unlike the error against the reference.
double hines_backward_error(const HinesSystem& s, const std::vector<double>& x, const std::vector<double>& b,
                            std::size_t r);

// `sparsecc hines --check`: interprets the plan (in its dtype) on fresh right-hand sides of one time
// step from `seed` (each column from random membrane potentials in -80..-50 mV and injected currents
// in -0.1..0.1 nA; random b of mixed signs would mostly measure the matrix's conditioning) against
// the extended-precision serial reference. CPU only.
HinesNumericsCheck check_hines_plan_numerics(const HinesPlan& plan, const HinesSystem& s, std::uint64_t seed);

}  // namespace sparsecc::pipeline
