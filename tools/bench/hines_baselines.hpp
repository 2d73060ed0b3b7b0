// Baselines for one Hines time step (factor the current diagonal and solve R right-hand sides of a
// post-order forest of cells), each written from its published description:
//   serial_cpu              the fp64 serial Hines sweeps on one CPU core (std::chrono)
//   coreneuron_interleaved  CoreNEURON's cell_permute 1 layout: one GPU thread per cell, cells of one
//                           shape interleaved so a warp's loads coalesce
//   dhs_K, dhs_best         DeepDendrite's Dendritic Hierarchical Scheduling with K threads per cell
//   min_trsv                the thesis's MIN-TRSV: minimal decomposition, cuSPARSE gtsv2 on the
//                           junction-zeroed tridiagonal, domain system solved on the GPU
// The GPU kernels (hines_baselines.cu) are compiled at run time with NVRTC for the current device, in
// the requested precision. Every GPU result is checked twice (a NaN-poisoned first step and a replayed
// second one) against the fp64 reference before it is timed; a failing baseline is reported, never
// timed. Inputs are laid out and uploaded before timing; a timed launch is one whole step.
#pragma once

#include <string>
#include <vector>

#include "bench/timing.hpp"
#include "sparsecc/neuron/hines.hpp"

namespace sparsecc::bench {

struct HinesBaselineOptions {
  TimingOptions timing;
  std::vector<int> dhs_threads = {4, 8, 16, 32};  // K of the dhs_K baselines, 1 .. 32 each
  int cpu_repetitions = 0;                        // serial_cpu steps timed; 0: enough for about 1 s
};

struct HinesBaselineResult {
  std::string name;      // serial_cpu, coreneuron_interleaved, dhs_4, ..., dhs_best, min_trsv
  double us = 0;         // median µs per step; 0 unless ok
  double rel_error = 0;  // max |x - x_ref| / max |x_ref|
  bool ok = false;       // checked and timed
  bool skipped = false;  // not applicable to this problem (not a failure)
  std::string note;      // layout and threads used; why it failed or was skipped
  TimingStats timing;    // all samples when ok
  double tolerance = 0;  // the rel_error bound this baseline was checked against
};

// b is N x R row-major (fp64, Hines order); every result is checked against hines_accuracy(s, b, r)
// (its extended-precision reference and the bound of dtype; serial_cpu against the f64 bound); dtype "f64" or
// "f32" (the GPU baselines' arithmetic; serial_cpu is always fp64). Throws UsageError for an invalid system,
// sizes, R < 1, dtype or K; errors inside one baseline are reported in its result and the others still run.
std::vector<HinesBaselineResult> run_hines_baselines(const HinesSystem& s, const std::vector<double>& b,
                                                     int r, const std::string& dtype,
                                                     const HinesBaselineOptions& o);

}  // namespace sparsecc::bench
