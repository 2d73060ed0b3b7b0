#include "sparsecc/runtime/timing.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "sparsecc/runtime/driver.hpp"

namespace sparsecc::rt {

namespace {

// Owners that release what they hold on every path (errors during release are ignored).
struct StreamOwner {
  CUstream s = nullptr;
  ~StreamOwner() {
    if (s) driver().cuStreamDestroy(s);
  }
};
struct EventOwner {
  CUevent e = nullptr;
  ~EventOwner() {
    if (e) driver().cuEventDestroy(e);
  }
};
struct GraphOwner {
  CUgraph g = nullptr;
  CUgraphExec exec = nullptr;
  ~GraphOwner() {
    if (exec) driver().cuGraphExecDestroy(exec);
    if (g) driver().cuGraphDestroy(g);
  }
};

}  // namespace

LaunchTiming time_launches(const Context& ctx, const std::function<void(CUstream)>& enqueue,
                           const LaunchTimingOptions& options) {
  if (options.launches_per_graph < 1 || options.repetitions < 1 || options.warmup < 0 ||
      !(options.warmup_seconds >= 0))
    throw std::invalid_argument("time_launches: launches, repetitions and warm-up must be positive");
  const DriverApi& d = driver();
  ctx.make_current();
  StreamOwner stream;
  SPARSECC_CU(d.cuStreamCreate(&stream.s, CU_STREAM_NON_BLOCKING));
  for (int i = 0; i < options.warmup; ++i) enqueue(stream.s);
  SPARSECC_CU(d.cuStreamSynchronize(stream.s));

  GraphOwner graph;
  SPARSECC_CU(d.cuStreamBeginCapture(stream.s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  try {
    for (int i = 0; i < options.launches_per_graph; ++i) enqueue(stream.s);
  } catch (...) {
    CUgraph partial = nullptr;
    d.cuStreamEndCapture(stream.s, &partial);
    if (partial) d.cuGraphDestroy(partial);
    throw;
  }
  SPARSECC_CU(d.cuStreamEndCapture(stream.s, &graph.g));
  SPARSECC_CU(d.cuGraphInstantiateWithFlags(&graph.exec, graph.g, 0));
  // Replays that warm the graph itself and the clocks (options.warmup_seconds).
  const auto warm_from = std::chrono::steady_clock::now();
  do {
    SPARSECC_CU(d.cuGraphLaunch(graph.exec, stream.s));
    SPARSECC_CU(d.cuStreamSynchronize(stream.s));
  } while (std::chrono::duration<double>(std::chrono::steady_clock::now() - warm_from).count() <
           options.warmup_seconds);

  EventOwner start, stop;
  SPARSECC_CU(d.cuEventCreate(&start.e, CU_EVENT_DEFAULT));
  SPARSECC_CU(d.cuEventCreate(&stop.e, CU_EVENT_DEFAULT));
  LaunchTiming t;
  for (int r = 0; r < options.repetitions; ++r) {
    SPARSECC_CU(d.cuEventRecord(start.e, stream.s));
    SPARSECC_CU(d.cuGraphLaunch(graph.exec, stream.s));
    SPARSECC_CU(d.cuEventRecord(stop.e, stream.s));
    SPARSECC_CU(d.cuEventSynchronize(stop.e));
    float ms = 0;
    SPARSECC_CU(d.cuEventElapsedTime(&ms, start.e, stop.e));
    t.samples_us.push_back(static_cast<double>(ms) * 1000.0 / options.launches_per_graph);
  }
  std::vector<double> sorted = t.samples_us;
  std::sort(sorted.begin(), sorted.end());
  t.median_us = sorted[sorted.size() / 2];
  t.min_us = sorted.front();
  t.max_us = sorted.back();
  return t;
}

}  // namespace sparsecc::rt
