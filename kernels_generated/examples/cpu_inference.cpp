// A pruned MLP and a forest of neurons run on the CPU with no CUDA and no LLVM: the build compiled the
// MLP's layers (sparsecc compile-model --target cpu) and a forest of 24 copies of a morphology
// (sparsecc hines --target cpu --cells 24) to x86-64 machine code through LLVM, and sparsecc embed
// wrote cpu_kernels.hpp / .cpp and the static library cpu_kernels.a they call
// (kernels_generated/CMakeLists.txt: sparsecc_add_kernels(... TARGET cpu)). The program links only
// sparsecc::runtime_cpu and that library.
//
// MLP: fc1 -> fc2 -> fc3 (bias and ReLU fused) on a batch of N = cpu_kernels::fc1::N random inputs,
// every output poisoned with NaN first, each layer checked against the fp64 product of its float32
// weights and its actual float32 input (1e-5, the bound of fp32 executors), the network against an
// fp64 forward pass (1e-4), and a run on one thread against a run on all of them (the same bits).
//
// Neurons: implicit Euler on the passive cable equation (as neuron_sim), 24 cells solved side by side
// (one a SIMD lane), cell c receiving (c + 1) / 24 of a 0.2 nA current step into its soma from 5 to
// 30 ms, for 50 ms; every step checked against the serial fp64 Hines solve in lockstep (1e-9 mV, the
// bound neuron_sim argues for). Exit status: 0 checked, 1 a check failed.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "cpu_kernels.hpp"
#include "mlp_model.hpp"

namespace {

constexpr double kLayerTolerance = 1e-5;
constexpr double kNetworkTolerance = 1e-4;

using mlp_example::compare;
using mlp_example::layer_fp64;

bool run_mlp(cpu_kernels::Kernels& kernels) {
  const std::vector<mlp_example::Layer> model = mlp_example::make_model();
  const sparsecc::rt::CpuSpmmExecutor* exec[3] = {&kernels.fc1(), &kernels.fc2(), &kernels.fc3()};
  const int n = static_cast<int>(cpu_kernels::fc1::N);
  std::printf("MLP: %zu layers on the CPU, batch %d, %u hardware threads\n", std::size_t{3}, n,
              std::thread::hardware_concurrency());
  std::uint64_t seed = 7;
  std::vector<float> x(static_cast<std::size_t>(model[0].in) * n);
  for (float& v : x) v = mlp_example::uniform(seed);

  // The forward pass on `threads` threads (0: all), every output poisoned first.
  const auto forward = [&](int threads) {
    std::vector<std::vector<float>> act{x};
    for (int i = 0; i < 3; ++i) {
      act.emplace_back(static_cast<std::size_t>(model[i].out) * n, NAN);
      exec[i]->run(act[i].data(), act[i + 1].data(), threads);
    }
    return act;
  };
  const std::vector<std::vector<float>> act = forward(0), serial = forward(1);
  bool ok = true;
  std::vector<double> network(x.begin(), x.end());
  for (int i = 0; i < 3; ++i) {
    const mlp_example::Layer& l = model[i];
    const auto [layer, unwritten] =
        compare(act[i + 1], layer_fp64(l, std::vector<double>(act[i].begin(), act[i].end()), n));
    network = layer_fp64(l, network, n);
    const bool same =
        std::memcmp(act[i + 1].data(), serial[i + 1].data(), act[i + 1].size() * sizeof(float)) == 0;
    const bool layer_ok = unwritten == 0 && layer <= kLayerTolerance && same;
    ok = ok && layer_ok;
    std::printf(
        "  %s %4lld x %-4lld: layer error %.3e (tolerance %.0e), %zu unwritten, %s one thread's bits  %s\n",
        l.name.c_str(), static_cast<long long>(exec[i]->m()), static_cast<long long>(exec[i]->k()), layer,
        kLayerTolerance, unwritten, same ? "same as" : "NOT", layer_ok ? "ok" : "FAILED");
  }
  const auto [whole, unwritten] = compare(act[3], network);
  const bool net_ok = unwritten == 0 && whole <= kNetworkTolerance;
  std::printf("  network vs fp64 forward pass: max relative error %.3e (tolerance %.0e)  %s\n", whole,
              kNetworkTolerance, net_ok ? "ok" : "FAILED");
  return ok && net_ok;
}

namespace cell = cpu_kernels::example_cell;

constexpr int kSteps = 2000;                   // 50 ms at dt 0.025 ms
constexpr int kOnStep = 200, kOffStep = 1200;  // the current flows in steps (200, 1200]
constexpr double kInjectNa = 0.2;
constexpr double kToleranceMv = 1e-9;

// The serial fp64 Hines solve of the whole forest, in place (b := x), Hines order.
void serial_solve(std::vector<double>& d, std::vector<double>& b) {
  const std::span<const std::int32_t> parent = cell::parent();
  const std::span<const double> diag = cell::diag(), upper = cell::upper(), lower = cell::lower();
  d.assign(diag.begin(), diag.end());
  for (std::size_t i = 0; i < d.size(); ++i)
    if (const std::int32_t p = parent[i]; p >= 0) {
      const double f = lower[i] / d[i];
      d[p] -= f * upper[i];
      b[p] -= f * b[i];
    }
  for (std::size_t i = d.size(); i-- > 0;) {
    const std::int32_t p = parent[i];
    b[i] = (b[i] - (p >= 0 ? upper[i] * b[p] : 0.0)) / d[i];
  }
}

bool run_forest(cpu_kernels::Kernels& kernels) {
  sparsecc::rt::CpuHinesExecutor& solver = kernels.example_cell();
  const std::size_t n = static_cast<std::size_t>(cell::M);
  const std::span<const std::int32_t> offsets = cell::cell_offsets();
  const std::size_t cells = offsets.size() - 1;
  std::printf("neurons: %zu cells, %zu compartments, f64, %lld groups of cells solved side by side\n", cells,
              n, static_cast<long long>(solver.shape().items));
  // The matrix in the executor's row order, once.
  const auto rows_of = [&](std::span<const double> by_hines) {
    std::vector<double> out(n);
    solver.to_rows<double>(by_hines, out);
    return out;
  };
  const std::vector<double> d = rows_of(cell::diag()), u = rows_of(cell::upper()), l = rows_of(cell::lower());
  std::vector<double> v(n, cell::kLeakReversalMv), v_ref(n, cell::kLeakReversalMv), b(n), b_rows(n),
      x_rows(n), pivots(n);
  // b = C/dt v + g E_leak + the current into each cell's soma (its root: the last row of the cell).
  const auto step_rhs = [&](const std::vector<double>& volts, double inject, std::vector<double>& out) {
    const std::span<const double> c = cell::cap_over_dt(), g = cell::leak();
    for (std::size_t i = 0; i < n; ++i) out[i] = c[i] * volts[i] + g[i] * cell::kLeakReversalMv;
    for (std::size_t k = 0; k < cells; ++k)
      out[static_cast<std::size_t>(offsets[k + 1] - 1)] += inject * static_cast<double>(k + 1) / cells;
  };
  double max_diff = 0;
  for (int step = 1; step <= kSteps; ++step) {
    const double inject = step > kOnStep && step <= kOffStep ? kInjectNa : 0.0;
    step_rhs(v, inject, b);
    solver.to_rows<double>(b, b_rows);
    std::fill(x_rows.begin(), x_rows.end(), NAN);
    solver.run(d.data(), u.data(), l.data(), b_rows.data(), x_rows.data());
    solver.from_rows<double>(x_rows, v);

    step_rhs(v_ref, inject, b);
    serial_solve(pivots, b);
    v_ref.swap(b);
    for (std::size_t i = 0; i < n; ++i) {
      const double diff = std::fabs(v[i] - v_ref[i]);
      max_diff = std::isnan(diff) ? INFINITY : std::max(max_diff, diff);
    }
  }
  const std::size_t first = static_cast<std::size_t>(offsets[1] - 1), last = n - 1;
  std::printf("  somata at 50 ms: cell 0 %.6f mV, cell %zu %.6f mV\n", v[first], cells - 1, v[last]);
  const bool ok = max_diff <= kToleranceMv;
  std::printf("  max |CPU - serial fp64| over %zu compartments and %d steps: %.3g mV (tolerance %.0e)  %s\n",
              n, kSteps, max_diff, kToleranceMv, ok ? "ok" : "FAILED");
  return ok;
}

}  // namespace

int main() {
  try {
    cpu_kernels::Kernels kernels;
    const bool mlp = run_mlp(kernels);
    const bool forest = run_forest(kernels);
    std::printf("cpu_inference: %s\n", mlp && forest ? "ok" : "FAILED");
    return mlp && forest ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cpu_inference: error: %s\n", e.what());
    return 1;
  }
}
