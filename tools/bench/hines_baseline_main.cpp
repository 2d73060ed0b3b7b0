// sparsecc_hines_baselines: times the Hines solver baselines (serial CPU, CoreNEURON-style interleaved,
// DHS with K threads per cell, MIN-TRSV) on the forest of one or more SWC morphologies, one time step
// of the passive cable equation (right-hand sides from random membrane potentials and currents, as
// `sparsecc hines --check` makes them).
// Prints a table and optionally writes JSON. Exit status: 0 all checks passed, 1 a baseline failed its
// check (or errored), 2 bad usage, bad input or no GPU.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <new>
#include <nlohmann/json.hpp>

#include "bench/baselines.hpp"
#include "bench/hines_baselines.hpp"
#include "bench/hines_schedules.hpp"
#include "sparsecc/cli.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/common/file.hpp"
#include "sparsecc/common/output.hpp"
#include "sparsecc/neuron/compartments.hpp"
#include "sparsecc/neuron/forest.hpp"

namespace {

using namespace sparsecc;
using namespace sparsecc::bench;

constexpr int kExitOk = 0;
constexpr int kExitCheckFailed = 1;
constexpr int kExitBadInput = 2;

struct Args {
  std::vector<std::string> files;
  int cells = 1;
  int resolution = 1;
  int rhs = 1;
  std::string dtype = "f64";
  std::uint64_t seed = 1;
  std::string json;
  HinesBaselineOptions options;
};

nlohmann::json to_json(const HinesBaselineResult& r) {
  nlohmann::json j = {{"name", r.name},           {"ok", r.ok},
                      {"skipped", r.skipped},     {"rel_error", r.rel_error},
                      {"tolerance", r.tolerance}, {"note", r.note}};
  if (r.ok) j.update(timing_json(r.timing));
  return j;
}

void print_table(const std::vector<HinesBaselineResult>& results) {
  double cpu = 0;
  for (const HinesBaselineResult& r : results)
    if (r.name == "serial_cpu" && r.ok) cpu = r.us;
  fmt::print("  {:<24} {:>12} {:>12} {:>8} {:>9} {:>10}  {}\n", "baseline", "us/step", "min us", "spread",
             "vs cpu", "rel err", "status, note");
  for (const HinesBaselineResult& r : results) {
    std::string status = r.ok ? "ok" : r.skipped ? "skipped" : "FAILED";
    if (!r.note.empty()) status += fmt::format(": {}", r.note);
    if (r.ok)
      fmt::print("  {:<24} {:>12.3f} {:>12.3f} {:>7.1f}% {:>8.2f}x {:>10.2e}  {}\n", r.name, r.us,
                 r.timing.min_us, 100 * r.timing.spread, cpu > 0 && r.us > 0 ? cpu / r.us : 0.0, r.rel_error,
                 status);
    else
      fmt::print("  {:<24} {:>12} {:>12} {:>8} {:>9} {:>10}  {}\n", r.name, "-", "-", "-", "-",
                 r.skipped ? std::string("-") : fmt::format("{:.2e}", r.rel_error), status);
  }
}

int run(const Args& args) {
  // The forest and right-hand sides of `sparsecc hines`; bad input is reported before the GPU is touched.
  const HinesSystem s = load_hines_forest(args.files, args.cells, args.resolution);
  const std::vector<double> b = random_step_rhs(s, static_cast<std::size_t>(args.rhs), args.seed);
  const DeviceInfo device = query_device();
  std::int32_t largest = 0;
  for (std::int32_t c = 0; c < s.num_cells(); ++c)
    largest = std::max(largest, s.cell_offsets[static_cast<std::size_t>(c) + 1] -
                                    s.cell_offsets[static_cast<std::size_t>(c)]);
  const std::size_t shapes = group_cells(s).size();
  fmt::print("{}\n", device.describe());
  fmt::print(
      "{} compartments in {} cells ({} shapes, largest {} compartments), resolution {}, R = {}, {}, seed "
      "{}\n",
      s.size(), s.num_cells(), shapes, largest, args.resolution, args.rhs, args.dtype, args.seed);
  fmt::print("timing: {} warm-up, graphs of {} launches, {} repetitions; serial CPU {}\n",
             args.options.timing.warmup, args.options.timing.launches_per_graph,
             args.options.timing.repetitions,
             args.options.cpu_repetitions > 0 ? fmt::format("{} steps", args.options.cpu_repetitions)
                                              : std::string("about 1 s"));
  const std::vector<HinesBaselineResult> results =
      run_hines_baselines(s, b, args.rhs, args.dtype, args.options);
  print_table(results);
  bool failed = false;
  nlohmann::json out = {{"device", device.describe()},
                        {"files", args.files},
                        {"cells", s.num_cells()},
                        {"copies", args.cells},
                        {"shapes", shapes},
                        {"compartments", s.size()},
                        {"resolution", args.resolution},
                        {"rhs", args.rhs},
                        {"dtype", args.dtype},
                        {"seed", args.seed},
                        {"baselines", nlohmann::json::array()}};
  for (const HinesBaselineResult& r : results) {
    failed = failed || (!r.ok && !r.skipped);
    out["baselines"].push_back(to_json(r));
  }
  if (!args.json.empty()) write_file_atomic(args.json, out.dump(2) + "\n");
  if (failed)
    fmt::print(stderr, "sparsecc_hines_baselines: a baseline failed its check (see FAILED above)\n");
  return failed ? kExitCheckFailed : kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  CLI::App app{
      "sparsecc_hines_baselines: Hines solver baselines (serial CPU, CoreNEURON interleaved, DHS, "
      "MIN-TRSV) for one time step of a forest of SWC cells",
      "sparsecc_hines_baselines"};
  app.add_option("files", args.files, "SWC files; their cells form one forest")->required();
  app.add_option("--cells", args.cells, "Copies of the forest (many cells of one morphology)")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.add_option("--resolution", args.resolution, "Compartments per SWC segment")
      ->check(CLI::Range(1, kMaxResolution))
      ->capture_default_str();
  app.add_option("--rhs", args.rhs, "Right-hand sides per step (R)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--dtype", args.dtype, "Arithmetic of the GPU baselines (serial_cpu is always f64)")
      ->check(CLI::IsMember({"f64", "f32"}))
      ->capture_default_str();
  app.add_option("--seed", args.seed, "Seed of the right-hand sides")
      ->check(sparsecc::cli::kNotNegative)
      ->capture_default_str();
  app.add_option("--dhs-threads", args.options.dhs_threads, "K of the dhs_K baselines (1 to 32 each)")
      ->check(CLI::Range(1, 32))
      ->capture_default_str();
  app.add_option("--cpu-repetitions", args.options.cpu_repetitions, "serial_cpu steps timed (0: about 1 s)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--repetitions", args.options.timing.repetitions, "graph replays (samples)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--launches", args.options.timing.launches_per_graph, "steps per graph")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--json", args.json, "write the results as JSON to this file");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitBadInput;
  }
  try {
    if (!args.json.empty()) check_output_file(args.json, args.files, "--json");  // before the work
    return run(args);
  } catch (const NoDeviceError& e) {
    fmt::print(stderr, "sparsecc_hines_baselines: error: {} (this program needs an NVIDIA GPU)\n", e.what());
    return kExitBadInput;
  } catch (const InputError& e) {
    fmt::print(stderr, "sparsecc_hines_baselines: error: {}\n", e.what());
    return kExitBadInput;
  } catch (const UsageError& e) {
    fmt::print(stderr, "sparsecc_hines_baselines: error: {}\n", e.what());
    return kExitBadInput;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "sparsecc_hines_baselines: error: out of memory\n");
    return kExitCheckFailed;
  } catch (const std::exception& e) {
    fmt::print(stderr, "sparsecc_hines_baselines: error: {}\n", e.what());
    return kExitCheckFailed;
  }
}
