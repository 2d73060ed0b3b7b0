// Steady-state timing of launches with the driver API: warm-up, then a CUDA graph of many
// consecutive launches replayed between events, one sample per replay (the bench harness's protocol,
// for programs that link the runtime alone, such as the tuner).
#pragma once

#include <cuda.h>

#include <functional>
#include <vector>

#include "sparsecc/runtime/device.hpp"

namespace sparsecc::rt {

struct LaunchTimingOptions {
  int warmup = 3;                // direct enqueues before the graph is captured
  int launches_per_graph = 100;  // consecutive enqueues captured in one graph
  int repetitions = 21;          // graph replays, each one sample
  // Graph replays before the samples until this much wall time has passed (at least one): a GPU
  // that was idle (a tuner waiting for compiles) ramps its clocks up meanwhile.
  // Evidence: docs/design/evidence.md#timing-warm-up
  double warmup_seconds = 0.025;
};

struct LaunchTiming {
  std::vector<double> samples_us;  // per-launch µs of each replay
  double median_us = 0;
  double min_us = 0;
  double max_us = 0;
};

// `enqueue` must only enqueue work on the stream it is given (it is captured into a graph). Throws
// DriverError on a failed call (the stream, graph and events are released either way).
LaunchTiming time_launches(const Context& ctx, const std::function<void(CUstream)>& enqueue,
                           const LaunchTimingOptions& options = {});

}  // namespace sparsecc::rt
