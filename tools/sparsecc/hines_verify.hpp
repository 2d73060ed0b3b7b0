// `sparsecc verify` for bundles whose op is "hines".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sparsecc/neuron/hines.hpp"
#include "sparsecc/runtime/bundle.hpp"
#include "sparsecc/runtime/device.hpp"
#include "sparsecc/runtime/hines_executor.hpp"

namespace sparsecc::cli {

// One step's arrays on the device in the executor's dtype (f64 or f32): the system's d, u and l, the
// right-hand sides b (rows x R) and the solution x. Shared by `verify` and the tuner's measurer.
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

// Returns the exit status (0 ok, 1 above the tolerance). tolerance <= 0: 1e-12 (f64) or 1e-4 (f32).
int verify_hines(const rt::Bundle& bundle, const std::string& path, std::uint64_t seed, double tolerance, bool cpu);

}  // namespace sparsecc::cli
