// A passive neuron simulated with an embedded Hines executor. The build compiles the morphology
// data/example_cell.swc (2 compartments per SWC segment, f64) into a bundle and embeds it
// (kernels_generated/CMakeLists.txt: sparsecc_add_kernels runs `sparsecc hines example_cell.swc
// --resolution 2 -o example_cell.sccb` and `sparsecc embed ... --name neuron_kernels`; the layer is
// named by the file's stem), so this program needs neither the bundle file nor the generator: only
// the runtime (the CUDA driver API) and the generated source.
//
// Implicit (backward) Euler on the passive cable equation, one linear solve a step:
//   H v_new = b,   b_i = C_i/dt * v_i + g_i * E_leak + I_inj,i    (uS, mV, nA; sparsecc/neuron/hines.hpp)
// with H, C_i/dt and g_i the generator's, embedded in Hines order (neuron_kernels::example_cell). A
// 0.2 nA current step goes into the soma from 5 ms to 30 ms; the cell starts at rest (E_leak) and
// runs for 50 ms. Every step is solved on the GPU by the embedded executor and, in lockstep, by the
// serial fp64 Hines algorithm below, each from its own previous voltages. The program prints the
// soma's voltage every 2.5 ms and the largest difference over all compartments and steps, and exits 1
// when that exceeds the tolerance, 77 (skipped) when there is no GPU, 0 otherwise.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <span>
#include <string>
#include <vector>

#include "neuron_kernels.hpp"
#include "sparsecc/runtime/device.hpp"
#include "sparsecc/runtime/driver.hpp"

namespace {

// The embedded layer (its arrays and constants) and its executor.
namespace cell = neuron_kernels::example_cell;
const sparsecc::rt::HinesExecutor& cell_executor(neuron_kernels::Kernels& k) { return k.example_cell(); }

static_assert(cell::N == 1, "this example solves one right-hand side (sparsecc hines without --rhs)");

// The time step the system was assembled with: `sparsecc hines` uses CableParams' default dt, and
// cap_over_dt (C_i / dt) holds it.
constexpr double kDtMs = 0.025;
constexpr int kSteps = 2000;                   // 50 ms
constexpr int kOnStep = 200, kOffStep = 1200;  // the current flows in steps (200, 1200]: 5 to 30 ms
constexpr double kInjectNa = 0.2;              // into the soma, positive = inward (depolarising)
constexpr int kTraceEvery = 100;               // 2.5 ms
// Each step's GPU solve differs from the serial one by rounding only: the executor eliminates in
// another order (domain decomposition), about 1e-15 relative, ~1e-13 mV at -65 mV. A step multiplies
// an earlier difference by at most 1 / (1 + dt/tau) in the max norm (tau = cm / g_leak = 10 ms), so
// the differences add up to at most ~tau/dt = 400 times that: a few 1e-11 mV (the generator's serial
// solver, which groups the operations differently, stays within 5e-13 mV of this one over the run).
// 1e-9 mV keeps a margin of 30 and more, while any real fault (a wrong row, a missed launch, f32
// arithmetic) is orders of magnitude larger.
constexpr double kToleranceMv = 1e-9;

// One implicit Euler step's right-hand side from the voltages v (Hines order).
void step_rhs(std::span<const double> v, double inject_na, std::int32_t soma, std::vector<double>& b) {
  const std::span<const double> c = cell::cap_over_dt(), g = cell::leak();
  for (std::size_t i = 0; i < v.size(); ++i) b[i] = c[i] * v[i] + g[i] * cell::kLeakReversalMv;
  b[static_cast<std::size_t>(soma)] += inject_na;
}

// The serial Hines algorithm (fp64), solving H x = b in place: row i is
//   diag[i] x_i + upper[i] x_parent(i) + sum over children c of lower[c] x_c = b_i,
// and parent[i] > i, so one upward sweep eliminates every child from its parent's row and one
// downward sweep substitutes back from the roots.
void hines_solve(std::vector<double>& d, std::vector<double>& b) {
  const std::span<const std::int32_t> parent = cell::parent();
  const std::span<const double> diag = cell::diag(), upper = cell::upper(), lower = cell::lower();
  d.assign(diag.begin(), diag.end());
  for (std::size_t i = 0; i < d.size(); ++i)
    if (const std::int32_t p = parent[i]; p >= 0) {
      const double f = lower[i] / d[i];  // A[p][i] / A[i][i]
      d[p] -= f * upper[i];
      b[p] -= f * b[i];
    }
  for (std::size_t i = d.size(); i-- > 0;) {
    const std::int32_t p = parent[i];
    b[i] = (b[i] - (p >= 0 ? upper[i] * b[p] : 0.0)) / d[i];
  }
}

sparsecc::rt::DeviceBuffer upload(std::span<const double> v) {
  sparsecc::rt::DeviceBuffer d(v.size() * sizeof(double));
  d.upload(v.data(), v.size() * sizeof(double));
  return d;
}

int simulate(const sparsecc::rt::Context& ctx) {
  const neuron_kernels::LayerInfo& info = neuron_kernels::layers()[cell::kIndex];
  if (std::string(info.dtype) != "f64") {
    std::fprintf(stderr, "neuron_sim: the embedded executor is %s; this example needs f64\n", info.dtype);
    return 1;
  }
  neuron_kernels::Kernels kernels(ctx);
  const sparsecc::rt::HinesExecutor& solver = cell_executor(kernels);
  const std::size_t n = static_cast<std::size_t>(cell::M);
  // Post-order numbering puts each cell's root last: the soma, the SWC file's first sample.
  const std::int32_t soma = cell::cell_offsets()[1] - 1;
  std::printf("%s: %zu compartments (Hines order), f64; soma = row %d (compartment %d)\n", cell::kName, n,
              soma,
              cell::compartment_of().empty() ? soma : cell::compartment_of()[static_cast<std::size_t>(soma)]);
  std::printf("executor loaded from the embedded %s on %s (%s)\n", solver.loaded_from().c_str(),
              ctx.device().name.c_str(), solver.load_reason().c_str());
  std::printf("implicit Euler, dt %.3f ms, %d steps; %.2f nA into the soma from %.1f to %.1f ms\n", kDtMs,
              kSteps, kInjectNa, kOnStep * kDtMs, kOffStep * kDtMs);

  // The matrix stays on the device; b and x travel every step.
  const sparsecc::rt::DeviceBuffer d_dev = upload(cell::diag()), u_dev = upload(cell::upper()),
                                   l_dev = upload(cell::lower());
  sparsecc::rt::DeviceBuffer b_dev(n * sizeof(double)), x_dev(n * sizeof(double));

  std::vector<double> v_gpu(n, cell::kLeakReversalMv), v_ref(n, cell::kLeakReversalMv);
  std::vector<double> b(n), pivots(n);
  double max_diff = 0;
  std::printf("  %6s  %16s  %16s\n", "t (ms)", "GPU (mV)", "reference (mV)");
  std::printf("  %6.2f  %16.10f  %16.10f\n", 0.0, v_gpu[soma], v_ref[soma]);
  for (int step = 1; step <= kSteps; ++step) {
    const double inject = step > kOnStep && step <= kOffStep ? kInjectNa : 0.0;

    step_rhs(v_gpu, inject, soma, b);
    b_dev.upload(b.data(), n * sizeof(double));
    x_dev.fill32(0x7fc00000u);  // NaN: a voltage the step does not write fails the check
    solver.run(d_dev.get(), u_dev.get(), l_dev.get(), b_dev.get(), x_dev.get());
    ctx.synchronize();
    x_dev.download(v_gpu.data(), n * sizeof(double));

    step_rhs(v_ref, inject, soma, b);
    hines_solve(pivots, b);
    v_ref.swap(b);

    for (std::size_t i = 0; i < n; ++i) {
      const double diff = std::fabs(v_gpu[i] - v_ref[i]);
      max_diff = std::isnan(diff) ? INFINITY : std::max(max_diff, diff);  // a NaN fails the check
    }
    if (step % kTraceEvery == 0)
      std::printf("  %6.2f  %16.10f  %16.10f\n", step * kDtMs, v_gpu[soma], v_ref[soma]);
  }
  const bool ok = max_diff <= kToleranceMv;
  std::printf("max |GPU - reference| over %zu compartments and %d steps: %.3g mV (tolerance %.0e mV): %s\n",
              n, kSteps, max_diff, kToleranceMv, ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}

}  // namespace

int main() {
  using namespace sparsecc;
  std::string why;
  if (!rt::driver_available(&why)) {
    std::printf("neuron_sim: skipped: no CUDA driver (%s)\n", why.c_str());
    return 77;
  }
  try {
    if (rt::list_devices().empty()) {
      std::printf("neuron_sim: skipped: no CUDA device\n");
      return 77;
    }
    const rt::Context ctx(0);
    return simulate(ctx);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "neuron_sim: error: %s\n", e.what());
    return 1;
  }
}
