// sparsecc_baselines: times the vendor baselines (cuBLAS fp32/TF32/fp16, cuSPARSE SpMM CSR and COO)
// on a problem suite, prints a table per problem and writes JSON. Exit status: 0 all checks passed,
// 1 a baseline failed its check (or errored), 2 bad usage, bad input or no GPU.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <nlohmann/json.hpp>

#include "bench/baselines.hpp"
#include "bench/suites.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/common/file.hpp"
#include "sparsecc/common/output.hpp"

namespace {

using namespace sparsecc;
using namespace sparsecc::bench;

constexpr int kExitOk = 0;
constexpr int kExitCheckFailed = 1;
constexpr int kExitBadInput = 2;

struct Args {
  std::string suite = "sparsert";
  double sparsity = 0.9;
  int batch = 1;
  std::string data;
  std::string json;
  int limit = 0;
  bool list = false;
  int cublas_algorithms = BaselineOptions{}.cublas_algorithms;
  TimingOptions timing;
};

nlohmann::json to_json(const TimingOptions& t) {
  return {{"warmup", t.warmup},
          {"launches_per_graph", t.launches_per_graph},
          {"repetitions", t.repetitions},
          {"cold_l2", t.cold_l2}};
}

nlohmann::json to_json(const BaselineResult& r) {
  nlohmann::json j = {{"name", r.name},           {"ok", r.ok},
                      {"skipped", r.skipped},     {"rel_error", r.rel_error},
                      {"tolerance", r.tolerance}, {"note", r.note}};
  if (r.ok) j.update(timing_json(r.timing));
  return j;
}

void print_table(const std::vector<BaselineResult>& results) {
  fmt::print("  {:<22} {:>10} {:>10} {:>8} {:>10}  {}\n", "baseline", "median us", "min us", "spread",
             "rel L2 err", "status");
  for (const BaselineResult& r : results) {
    std::string status = r.ok ? "ok" : r.skipped ? "skipped" : "FAILED";
    if (!r.note.empty()) status += fmt::format(" ({})", r.note);
    if (r.ok)
      fmt::print("  {:<22} {:>10.2f} {:>10.2f} {:>7.1f}% {:>10.2e}  {}\n", r.name, r.us, r.timing.min_us,
                 100 * r.timing.spread, r.rel_error, status);
    else
      fmt::print("  {:<22} {:>10} {:>10} {:>8} {:>10}  {}\n", r.name, "-", "-", "-",
                 r.skipped ? std::string("-") : fmt::format("{:.2e}", r.rel_error), status);
  }
}

int run(const Args& args) {
  DeviceInfo device = args.list ? DeviceInfo{} : query_device();
  std::vector<BenchProblem> problems =
      args.suite == "dlmc" ? dlmc_suite(args.data) : sparsert_suite(args.data, args.sparsity, args.batch);
  if (args.limit > 0 && static_cast<std::size_t>(args.limit) < problems.size()) problems.resize(args.limit);
  if (args.list) {
    for (const BenchProblem& p : problems)
      fmt::print("{}  M {} K {} N {}  count {}  A: {}  values: {}\n", p.name, p.M, p.K, p.N, p.count,
                 p.matrix.empty() ? "synthetic" : p.matrix, p.values);
    return kExitOk;
  }
  fmt::print("{}\n", device.describe());
  const char* tf32 = std::getenv("NVIDIA_TF32_OVERRIDE");
  if (tf32) fmt::print("note: NVIDIA_TF32_OVERRIDE={} is set (it changes what cublas_tf32 measures)\n", tf32);
  fmt::print("suite {} ({} problems), timing: {} warm-up, graphs of {} launches, {} repetitions, {} L2\n",
             args.suite, problems.size(), args.timing.warmup, args.timing.launches_per_graph,
             args.timing.repetitions, args.timing.cold_l2 ? "cold" : "warm");

  BaselineOptions options;
  options.timing = args.timing;
  options.cublas_algorithms = args.cublas_algorithms;
  nlohmann::json out = {{"device", device.describe()},
                        {"suite", args.suite},
                        {"timing", to_json(args.timing)},
                        {"b_seed", options.seed},
                        {"problems", nlohmann::json::array()}};
  if (args.suite == "sparsert") {
    out["sparsity"] = args.sparsity;
    out["batch"] = args.batch;
  }
  bool failed = false;
  for (std::size_t i = 0; i < problems.size(); ++i) {
    const BenchProblem& p = problems[i];
    CsrMatrix a = load_problem_matrix(p);
    fmt::print("\n[{}/{}] {}  M {} K {} N {}  nnz {} (sparsity {:.4f})\n  A: {}\n  values: {}\n", i + 1,
               problems.size(), p.name, p.M, p.K, p.N, a.nnz(),
               1.0 - static_cast<double>(a.nnz()) / static_cast<double>(p.M * p.K),
               p.matrix.empty() ? "synthetic" : p.matrix, p.values);
    std::vector<BaselineResult> results = run_baselines(a, p.N, options);
    print_table(results);
    nlohmann::json j = {{"name", p.name}, {"matrix", p.matrix}, {"values", p.values},
                        {"M", p.M},       {"K", p.K},           {"N", p.N},
                        {"nnz", a.nnz()}, {"count", p.count},   {"baselines", nlohmann::json::array()}};
    for (const BaselineResult& r : results) {
      failed = failed || (!r.ok && !r.skipped);
      j["baselines"].push_back(to_json(r));
    }
    out["problems"].push_back(std::move(j));
    if (!args.json.empty()) write_file_atomic(args.json, out.dump(2) + "\n");
  }
  if (failed) fmt::print(stderr, "sparsecc_baselines: a baseline failed its check (see FAILED above)\n");
  return failed ? kExitCheckFailed : kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  args.data = default_data_dir();
  CLI::App app{"sparsecc_baselines: cuBLAS and cuSPARSE baselines for the SpMM problem suites",
               "sparsecc_baselines"};
  app.add_option("--suite", args.suite, "problem suite")->check(CLI::IsMember({"sparsert", "dlmc"}));
  app.add_option("--sparsity", args.sparsity, "sparsity of the sparsert suite")
      ->check(CLI::IsMember({0.9, 0.95}));
  app.add_option("--batch", args.batch, "batch size (N multiplier) of the sparsert suite")
      ->check(CLI::PositiveNumber);
  app.add_option("--data", args.data, "shared data folder (default $SPARSECC_DATA_DIR or ../shared/data)");
  app.add_option("--json", args.json, "write the results as JSON to this file");
  app.add_option("--limit", args.limit, "run only the first K problems")->check(CLI::NonNegativeNumber);
  app.add_flag("--list", args.list, "print the suite's problems and exit (needs no GPU)");
  app.add_flag("--cold-l2", args.timing.cold_l2, "rotate operand copies so every launch misses L2");
  app.add_option("--repetitions", args.timing.repetitions, "graph replays (samples)")
      ->check(CLI::PositiveNumber);
  app.add_option("--cublas-algorithms", args.cublas_algorithms,
                 "cuBLASLt heuristic algorithms timed for each weight layout besides cublasGemmEx's default")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--launches", args.timing.launches_per_graph, "launches per graph")
      ->check(CLI::PositiveNumber);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitBadInput;
  }
  try {
    if (!args.json.empty()) check_output_file(args.json, {}, "--json");  // before the work
    return run(args);
  } catch (const NoDeviceError& e) {
    fmt::print(stderr, "sparsecc_baselines: error: {} (this program needs an NVIDIA GPU)\n", e.what());
    return kExitBadInput;
  } catch (const InputError& e) {
    fmt::print(stderr, "sparsecc_baselines: error: {} (data folder: --data or SPARSECC_DATA_DIR)\n",
               e.what());
    return kExitBadInput;
  } catch (const UsageError& e) {
    fmt::print(stderr, "sparsecc_baselines: error: {}\n", e.what());
    return kExitBadInput;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "sparsecc_baselines: error: out of memory\n");
    return kExitCheckFailed;
  } catch (const std::exception& e) {
    fmt::print(stderr, "sparsecc_baselines: error: {}\n", e.what());
    return kExitCheckFailed;
  }
}
