// Whole networks timed end to end (the protocol's "a whole layer stack", anchors-and-baselines.md
// section 6.4): every layer of one network (the suite's problems of one BenchProblem::network, each
// launched `count` times, the instances of its shape) enqueued in suite order into one CUDA graph,
// for sparsecc's executors (plain launches, and programmatic ones where a bundle takes part, as a
// deployed stack launches them) and for each vendor baseline (every layer's fastest checked
// algorithm of that kind). Each layer reads and writes buffers of its own (a layer's B is not the
// previous layer's C), so a pass measures the launches back to back and what the L2 keeps of the
// whole network's weights, code and activations from one pass to the next, not data dependencies.
// Before the timing, one pass of sparsecc's executors on poisoned outputs, plain and programmatic,
// must reproduce every layer's stand-alone output (checked against fp64) bit for bit.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/baselines.hpp"
#include "bench/timing.hpp"
#include "sparsecc/runtime/executor.hpp"

namespace sparsecc::bench {

// One layer of a network, with everything its launches use kept alive.
struct PassLayer {
  std::string name;
  std::string network;
  int count = 1;  // launches a pass
  std::shared_ptr<const rt::SpmmExecutor> executor;
  std::shared_ptr<DeviceBuffer> b, c;  // the executor's operands
  int n = 0;
  std::vector<float> expected;       // C of a stand-alone run, checked against fp64
  double alone_us = 0;               // stand-alone steady-state µs of one plain launch
  double alone_programmatic_us = 0;  // the same launched programmatically (alone_us where it takes no part)
  std::size_t sparsecc_bytes = 0;    // the executor's resident bytes (code, values, tables) + B + C
  std::size_t dense_bytes = 0;       // dense fp32 A + B + C, what the cuBLAS fp32 layer touches
  // The layer's fastest checked baseline of each kind ("cublas_fp32", "cublas_tf32", "cublas_fp16",
  // "cusparse_best"), each with its enqueue (BaselineResult::enqueue).
  std::map<std::string, BaselineResult> baselines;
};

// The kinds a pass is timed for, in the order printed.
inline const std::vector<std::string> kPassKinds = {"sparsecc",    "sparsecc_programmatic", "cublas_fp32",
                                                    "cublas_tf32", "cublas_fp16",           "cusparse_best"};

struct PassTiming {
  std::string network;
  int layers = 0;
  int launches = 0;  // per pass: the layers' counts summed
  std::size_t sparsecc_bytes = 0, dense_bytes = 0;
  std::map<std::string, TimingStats> times;    // µs a pass, by kind
  std::map<std::string, double> alone_sum_us;  // Σ count x stand-alone µs, by kind
  std::map<std::string, std::string> skipped;  // kind -> why it was not timed (a layer lacks it)
};

// Checks sparsecc's pass of every network (in order of first appearance), then times each kind.
// Throws std::runtime_error naming the layer whose output a pass did not reproduce.
std::vector<PassTiming> time_network_passes(const std::vector<PassLayer>& layers,
                                            const TimingOptions& timing);

// The table, one row a network: µs a pass of each kind, the baselines' over sparsecc's, and the
// same ratio for the stand-alone times summed.
void print_passes(const std::vector<PassTiming>& passes);

nlohmann::json to_json(const PassTiming& pass);

}  // namespace sparsecc::bench
