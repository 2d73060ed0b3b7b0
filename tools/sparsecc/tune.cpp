// sparsecc tune MATRIX... --n N... --db tuning.json [--budget SECONDS] [--jobs J]: tunes the SpMM
// executor of every matrix on the GPU (tune/tuner.hpp) and merges the records into the database.
// `--model MODEL` tunes every layer of a model as `compile-model` builds it (model/layers.hpp: its
// bias and ReLU, its N from --layer-n(-file), the model's shapes, --n or run time), so that
// `compile-model --db` finds every layer's record.
//   --space                prints the search space of each matrix as JSON (no GPU, nothing written);
//   --fit                  fits the predictor to the timings of the --db files and writes it (-o);
//   --evaluate             scores a predictor (--predictor FILE, or the shipped one) on the --db files;
//   --refresh-features     recomputes the predictor features of the SpMM timings in --db with this
//                          build's feature set, for the records of the matrices given (files or a --suite).
// With several matrices the budget is shared in proportion to their nonzeros, and --matrices-at-once
// of them (default 3) are tuned together (tune/schedule.hpp: tune_many). --cold-l2 times the SpMM
// candidates with cold L2 and keys their records so (with --fit / --evaluate it selects those records
// instead of the warm ones). SWC inputs (--cells, --resolution, --rhs, --dtype f64|f32): the Hines
// solver of their forest is tuned (every candidate of its space), or --space prints that space.
// --target CPU [--threads T]: CPU SpMM executors tuned in this process (sparsecc/llvm/cpu_tune.hpp),
// keyed by this CPU's model; the GPU's options are refused with it.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>

#include "bench/suites.hpp"
#include "cli.hpp"
#include "sparsecc/bundle/spmm_bundle.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/common/file.hpp"
#include "sparsecc/common/output.hpp"
#include "sparsecc/io/load.hpp"
#include "sparsecc/model/layers.hpp"
#include "sparsecc/neuron/forest.hpp"
#include "sparsecc/runtime/driver.hpp"
#include "sparsecc/tune/database.hpp"
#include "sparsecc/tune/hines_space.hpp"
#include "sparsecc/tune/hines_tuner.hpp"
#include "sparsecc/tune/measure.hpp"
#include "sparsecc/tune/predictor.hpp"
#include "sparsecc/tune/schedule.hpp"
#include "sparsecc/tune/tuner.hpp"
#include "spmm_options.hpp"
#include "target_flags.hpp"
#if SPARSECC_HAVE_LLVM
#include "sparsecc/llvm/cpu_tune.hpp"
#endif

namespace sparsecc::cli {

namespace {

struct TuneArgs {
  std::vector<std::string> inputs;
  std::vector<std::int64_t> n;
  bool runtime_n = false;
  bool relu = false;
  std::string bias;
  std::string dtype = "f32";
  std::string accumulate = "f32";
  std::uint64_t seed = 1;
  std::vector<std::string> db;
  double budget = 0;
  int jobs = 0;
  std::string arch = "sm_90";
  std::size_t exhaustive_limit = 24;
  std::size_t shortlist = 8;
  std::string predictor;
  bool space = false;
  bool fit = false;
  bool evaluate = false;
  bool refresh_features = false;
  std::string output;
  std::string suite;  // sparsert | rn50 | transformer
  std::string data;
  double sparsity = 0.9;
  int batch = 1;
  int first = 0;
  int limit = 0;
  bool dtype_given = false;
  int cells = 1;  // SWC inputs (Hines)
  int resolution = 1;
  int rhs = 1;
  bool cold_l2 = false;
  int matrices_at_once = 3;
  std::string model;  // --model: every layer of this model
  // Its --select, --max-density, --relu-select, --layer-n(-file), --n-from-shapes (n, relu, batch: above).
  ModelLayerArgs model_layers;
  std::string cpu_target;  // --target: CPU SpMM executors
  int threads = 0;         // --threads: the CPU executors' run threads (0: the cores)
};

// One matrix to tune: a file given on the command line, a problem of a bench suite, or a model's layer
// (which brings its bias, ReLU and N mode).
struct TuneInput {
  std::string name;
  std::int64_t n = 0;
  std::function<CsrMatrix()> load;
  std::optional<SpmmProblem> layer_problem;  // model layers: the problem compile-model builds
  std::vector<double> layer_bias;
};

std::vector<TuneInput> tune_inputs(const TuneArgs& args) {
  std::vector<TuneInput> out;
  if (!args.model.empty()) {
    if (!args.inputs.empty() || !args.suite.empty()) throw UsageError("--model takes no matrices or --suite");
    if (!args.bias.empty()) throw UsageError("--model: the biases come from the model, not --bias");
    if (args.runtime_n)
      throw UsageError(
          "--model takes no --runtime-n: leave out --n for run-time-N executors (planned for N = 64, as "
          "compile-model does)");
    if (args.n.size() > 1) throw UsageError("--model takes one --n for every layer");
    ModelLayerArgs layer_args = args.model_layers;
    layer_args.n = args.n.empty() ? 0 : args.n[0];
    layer_args.relu = args.relu;
    const ModelLayerSet layers = read_model_layers(
        args.model, layer_args, "tune", [](const std::string& line) { fmt::print(stderr, "{}\n", line); });
    for (std::size_t i = 0; i < layers.model.layers.size(); ++i) {
      const ModelLayer& layer = layers.model.layers[i];
      const SpmmProblem problem = model_layer_problem(layer, layers.n[i], layer_args, args.dtype);
      check_values_fit(layer.a, args.dtype, args.model, layer.tensor);
      check_bias_fits(layer.bias, args.model, layer.tensor + " (its bias)");
      out.push_back({layer.name, problem.n, [a = layer.a] { return a; }, problem, layer.bias});
    }
    return out;
  }
  const ModelLayerArgs& ml = args.model_layers;
  if (!ml.select.empty() || !ml.relu_select.empty() || !ml.layer_n.empty() || !ml.layer_n_file.empty() ||
      ml.n_from_shapes)
    throw UsageError(
        "--select, --relu-select, --layer-n, --layer-n-file and --n-from-shapes choose among a model's "
        "layers: give --model");
  if (!args.suite.empty()) {
    if (!args.inputs.empty()) throw UsageError("--suite takes no matrices");
    const std::string dir = args.data.empty() ? bench::default_data_dir() : args.data;
    std::vector<bench::BenchProblem> problems;
    if (args.suite == "sparsert") {
      problems = bench::sparsert_suite(dir, args.sparsity, args.batch);
    } else {
      for (bench::BenchProblem& p : bench::dlmc_suite(dir))
        if (p.name.starts_with(args.suite + "/")) {
          p.N *= args.batch;
          problems.push_back(std::move(p));
        }
    }
    const auto first = std::min<std::size_t>(static_cast<std::size_t>(args.first), problems.size());
    const std::size_t count =
        args.limit > 0 ? std::min<std::size_t>(args.limit, problems.size() - first) : problems.size() - first;
    for (std::size_t i = first; i < first + count; ++i) {
      const bench::BenchProblem p = problems[i];
      out.push_back({p.name, p.N, [p] { return bench::load_problem_matrix(p); }, std::nullopt, {}});
    }
    return out;
  }
  if (args.inputs.empty()) throw UsageError("tune: name at least one matrix, or a --suite");
  if (args.n.size() != 1 && args.n.size() != args.inputs.size())
    throw UsageError(fmt::format("--n takes one N, or one per matrix ({} matrices, {} values)",
                                 args.inputs.size(), args.n.size()));
  for (std::size_t i = 0; i < args.inputs.size(); ++i) {
    const std::string input = args.inputs[i];
    const std::uint64_t seed = args.seed;
    out.push_back({input,
                   args.n.size() == 1 ? args.n[0] : args.n[i],
                   [input, seed, dtype = args.dtype] {
                     LoadOptions load;
                     load.seed = seed;
                     return load_spmm_matrix(input, load, dtype);
                   },
                   std::nullopt,
                   {}});
  }
  return out;
}

std::string duration_text(double s) {
  if (!std::isfinite(s)) return "?";
  const auto t = static_cast<long long>(s + 0.5);
  return t >= 60 ? fmt::format("{}m{:02d}s", t / 60, t % 60) : fmt::format("{}s", t);
}

// One line a candidate (plain) or a redrawn bar with the ETA (terminal), for searches that may run
// at once (each update names its matrix); line() prints a result line between the updates.
class ProgressPrinter {
 public:
  ProgressPrinter() : tty_(::isatty(2) != 0) {}
  void update(const std::string& prefix, const tune::TuneProgress& p) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const std::string result = p.verified ? fmt::format("{:.2f} us", p.median_us) : std::string("failed");
    if (!tty_) {
      fmt::print(stderr, "{}: {}/{} {} {} (best {} {:.2f} us, {} elapsed, ETA {})\n", prefix, p.done,
                 p.planned, p.label, result, p.best_label, p.best_us, duration_text(p.elapsed_seconds),
                 duration_text(p.eta_seconds));
      return;
    }
    constexpr int width = 24;
    const int filled = p.planned ? static_cast<int>(width * p.done / p.planned) : 0;
    fmt::print(stderr, "\r\033[K{} [{}{}] {}/{} best {:.2f} us ({}) ETA {}", prefix, std::string(filled, '#'),
               std::string(width - filled, '.'), p.done, p.planned, p.best_us, p.best_label,
               duration_text(p.eta_seconds));
    open_ = true;
  }
  // `text` on stdout, after the bar's line is ended.
  void line(const std::string& text) {
    const std::lock_guard<std::mutex> lock(mutex_);
    end_bar();
    fmt::print("{}\n", text);
    std::fflush(stdout);
  }
  ~ProgressPrinter() { end_bar(); }

 private:
  void end_bar() {
    if (open_) fmt::print(stderr, "\n");
    open_ = false;
  }
  std::mutex mutex_;
  bool tty_;
  bool open_ = false;
};

SpmmProblem problem_for(const CsrMatrix& a, const TuneArgs& args, std::int64_t n, bool bias) {
  SpmmProblem p;
  p.m = a.rows;
  p.k = a.cols;
  p.n = n;
  p.n_mode = args.runtime_n ? SpmmNMode::runtime : SpmmNMode::fixed;
  p.bias = bias;
  p.relu = args.relu;
  p.dtype = require_dtype(args.dtype, "--dtype", kSpmmDtypes);
  return p;
}

// The predictor's samples of the databases, with a warning for each file whose timings hold another
// version's features.
std::vector<tune::PredictorSample> samples_of(const std::vector<std::string>& dbs, bool cold_l2) {
  tune::DatabaseSamples samples = tune::database_samples(dbs, cold_l2);
  for (const std::string& w : samples.warnings) fmt::print(stderr, "sparsecc: warning: {}\n", w);
  return std::move(samples.samples);
}

// --refresh-features: every SpMM timing of the records whose matrix is given gets the features of
// this build's feature set, recomputed from its options (re-planned) and the matrix; the records are
// merged back into the database (a temporary renamed over it). A timing whose options no longer plan
// loses its features (the fit skips it) and is counted.
int run_refresh_features(const TuneArgs& args) {
  if (args.db.size() != 1)
    throw UsageError("--refresh-features: name the tuning database with one --db FILE");
  if (args.inputs.empty() && args.suite.empty() && args.model.empty())
    throw UsageError("--refresh-features: name the matrices of the records (files, a --suite or a --model)");
  if (!std::filesystem::exists(args.db[0]))
    throw InputError(SourceLocation::in_file(args.db[0]), "no such tuning database");
  std::vector<TuneInput> inputs;
  if (!args.suite.empty() || !args.model.empty()) {
    inputs = tune_inputs(args);
  } else {
    for (const std::string& input : args.inputs)
      inputs.push_back({input,
                        0,
                        [input, seed = args.seed, dtype = args.dtype] {
                          LoadOptions load;
                          load.seed = seed;
                          return load_spmm_matrix(input, load, dtype);
                        },
                        std::nullopt,
                        {}});
  }
  std::vector<CsrMatrix> matrices;
  for (const TuneInput& in : inputs) matrices.push_back(in.load());
  const tune::RefreshResult r = tune::refresh_features(args.db[0], matrices);
  if (!r.damaged.empty()) {  // nothing to refresh, and nothing is written
    for (const std::string& w : r.damaged) fmt::print(stderr, "sparsecc: error: {}\n", w);
    return kExitBadInput;
  }
  if (r.refreshed == 0)
    throw UsageError(
        fmt::format("--refresh-features: none of the {} records of {} is for the {} matrices given",
                    r.database_records, args.db[0], r.matrices));
  for (const std::string& w : r.warnings) fmt::print(stderr, "sparsecc: warning: {}\n", w);
  fmt::print(
      "{}: features (version {}) of {} timings in {} records recomputed{}; {} records left as they were "
      "(no matrix given, or not SpMM)\n",
      args.db[0], tune::kSpmmFeatureVersion, r.timings - r.unplanned, r.refreshed,
      r.unplanned
          ? fmt::format(", {} timings whose options no longer plan left without features", r.unplanned)
          : std::string(),
      r.other);
  return kExitOk;
}

int run_fit(const TuneArgs& args) {
  if (args.db.empty()) throw UsageError("--fit needs the timings: one or more --db files");
  const std::vector<tune::PredictorSample> samples = samples_of(args.db, args.cold_l2);
  if (samples.empty()) throw UsageError("--fit: the databases hold no verified timings with features");
  std::string fitted_on;
  for (const std::string& p : args.db) fitted_on += (fitted_on.empty() ? "" : ", ") + p;
  const tune::Predictor p = tune::fit_predictor(samples, fitted_on);
  const tune::PredictorEvaluation e = tune::evaluate_predictor(p, samples);
  fmt::print(stderr,
             "fitted on {} timings of {} problems: top choice within 10 % of the best on {:.1f} %, "
             "best in the top 3 on {:.1f} %\n",
             samples.size(), e.problems, 100 * e.top1_within_10pct, 100 * e.top3_contains_best);
  if (args.output.empty()) {
    fmt::print("{}\n", to_json(p).dump(2));
  } else {
    write_file_atomic(args.output, to_json(p).dump(2) + "\n");
    fmt::print(stderr, "wrote {}\n", args.output);
  }
  return kExitOk;
}

int run_evaluate(const TuneArgs& args) {
  if (args.db.empty()) throw UsageError("--evaluate needs the timings: one or more --db files");
  const std::vector<tune::PredictorSample> samples = samples_of(args.db, args.cold_l2);
  const tune::Predictor loaded =
      args.predictor.empty() ? tune::Predictor{} : tune::load_predictor(args.predictor);
  const tune::Predictor& p = args.predictor.empty() ? tune::shipped_predictor() : loaded;
  const tune::PredictorEvaluation e = tune::evaluate_predictor(p, samples);
  const tune::PredictorEvaluation every = tune::evaluate_predictor(p, samples, false);
  fmt::print(
      "{} problems ({} timings): top choice within 10 % of the best on {:.1f} %, best in the top 3 on "
      "{:.1f} %, top choice / best geomean {:.3f} (the search space's plans ranked; with the tuner's "
      "register-cap, two-column, clustered-rows and staged-steps variants ranked as plans of their own: "
      "{:.1f} %, "
      "{:.1f} %, {:.3f})\n",
      e.problems, samples.size(), 100 * e.top1_within_10pct, 100 * e.top3_contains_best,
      e.geomean_top1_over_best, 100 * every.top1_within_10pct, 100 * every.top3_contains_best,
      every.geomean_top1_over_best);
  if (!args.output.empty()) write_file_atomic(args.output, e.per_problem.dump(1) + "\n");
  return e.problems > 0 ? kExitOk : kExitCheckFailed;
}

// SWC inputs: the Hines solver of their forest — its search space (--space), or every candidate
// timed on the GPU and the record merged into the database.
int run_hines_tune(const TuneArgs& args) {
  const std::string given = args.dtype_given ? args.dtype : "f64";
  const std::string dtype = given == "f32" || given == "f64" ? given : std::string();
  if (dtype.empty()) throw UsageError("tune: Hines executors run in f64 or f32, not " + given);
  if (!args.space && args.db.size() != 1)
    throw UsageError("tune: name the tuning database with one --db FILE");
  const auto t0 = std::chrono::steady_clock::now();  // --budget covers the planning of the space too
  const GpuTarget target = resolve_gpu_target(args.arch);
  const HinesSystem system = load_hines_forest(args.inputs, args.cells, args.resolution);
  const tune::HinesSpaceDims dims;
  const tune::HinesSpace space = tune::hines_space(system, args.rhs, dtype, {}, dims, target);
  if (args.space) {
    nlohmann::json j = tune::to_json(space, dims);
    j["files"] = args.inputs;
    j["cells"] = args.cells;
    j["rhs"] = args.rhs;
    j["dtype"] = dtype;
    fmt::print("{}\n", j.dump(1));
    return kExitOk;
  }
  std::string why;
  if (!rt::driver_available(&why))
    throw UsageError("tune times candidates on a GPU, and none is usable here: " + why +
                     " (without a GPU, `sparsecc hines` plans with its rules)");
  const rt::Context ctx(0);
  const tune::TuningKey key =
      tune::hines_tuning_key(system, args.rhs, dtype, ctx.device().name,
                             fmt::format("{}.{}", ctx.device().cc_major, ctx.device().cc_minor));
  tune::TuneOptions options;
  options.jobs = args.jobs;
  options.target = target;
  if (args.budget > 0) {
    const double used = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    options.budget_seconds = std::max(0.1, args.budget - used);
    fmt::print(stderr, "space of {} candidates planned in {:.1f} s; {:.1f} s of the budget left\n",
               space.candidates.size(), used, options.budget_seconds);
  }
  tune::GpuHinesMeasurer measurer(ctx, system, args.rhs, dtype, args.seed + 1);
  const std::string name =
      fmt::format("{}{} ({} compartments in {} cells, R = {}, {})", args.inputs.front(),
                  args.inputs.size() > 1 ? fmt::format(" and {} more", args.inputs.size() - 1) : "",
                  system.size(), system.num_cells(), args.rhs, dtype);
  ProgressPrinter printer;
  const tune::TuningRecord record = tune::tune_hines(
      space, key,
      [&](const tune::HinesCandidate& c) { return tune::compile_hines_candidate(c, system, target); },
      measurer, options, [&](const tune::TuneProgress& p) { printer.update("[1/1] " + name, p); });
  std::vector<std::string> warnings;
  tune::update_database(args.db[0], {record}, &warnings);
  for (const std::string& w : warnings) fmt::print(stderr, "sparsecc: warning: {}\n", w);
  std::size_t failed = 0;
  for (const tune::CandidateTiming& t : record.timings) failed += t.verified ? 0 : 1;
  printer.line(fmt::format(
      "{}: {} of {} candidates in {:.1f} s ({}{}): best {} {:.2f} us per step, default {:.2f} us ({:.2f}x)",
      name, record.timings.size(), space.candidates.size(), record.tuning_seconds, record.strategy,
      failed ? fmt::format(", {} not verified", failed) : "", record.winner, record.winner_us,
      record.default_us, record.default_us / record.winner_us));
  return kExitOk;
}

// The files tune writes, checked before the work: -o (--fit, --evaluate) and the database it updates
// (tuning, --refresh-features); neither may be a file the run reads.
void check_tune_outputs(const TuneArgs& args) {
  std::vector<std::string> inputs = input_paths(args.inputs);
  for (const std::string& f :
       input_paths({args.bias, args.model, args.model_layers.layer_n_file, args.predictor}))
    inputs.push_back(f);
  if (args.fit || args.evaluate) {
    if (args.output.empty()) return;
    inputs.insert(inputs.end(), args.db.begin(), args.db.end());
    check_output_file(args.output, inputs);
    return;
  }
  if (args.space || args.db.size() != 1) return;  // nothing is written (or a usage error follows)
  check_output_file(args.db[0], inputs, "--db");
  // The database the results go into must be one (or absent) before any time is spent tuning
  // (--refresh-features reports a damaged one itself, after its usage checks).
  if (!args.refresh_features) (void)tune::read_database_file(args.db[0]);
}

// --target: every matrix's CPU SpMM executor tuned in this process (fp32, fixed N), each record merged
// into the database as it is done; the budget is shared in proportion to the nonzeros left.
int run_tune_cpu(const TuneArgs& args) {
#if SPARSECC_HAVE_LLVM
  if (!args.space && args.db.size() != 1)
    throw UsageError("tune: name the tuning database with one --db FILE");
  if (args.n.empty()) throw UsageError("tune: --n is required");
  if (args.dtype != "f32" || args.runtime_n)
    throw UsageError(
        "--target: CPU executors are fp32 at a fixed N (no --dtype f16/bf16/f64, no --runtime-n)");
  const std::vector<TuneInput> inputs = tune_inputs(args);
  if (!args.bias.empty() && inputs.size() != 1) throw UsageError("--bias needs exactly one matrix");
  const CpuTarget target = cpu_target(args.cpu_target);
  struct Job {
    std::string name;
    CsrMatrix a;
    SpmmProblem problem;
    std::vector<double> bias;
  };
  std::vector<Job> jobs;
  std::int64_t nnz_left = 0;
  for (const TuneInput& in : inputs) {
    Job job{in.name, in.load(), {}, {}};
    if (!args.bias.empty()) job.bias = load_bias(args.bias, job.a.rows);
    job.problem = problem_for(job.a, args, in.n, !job.bias.empty());
    nnz_left += job.a.nnz();
    jobs.push_back(std::move(job));
  }
  if (args.space) {
    nlohmann::json spaces = nlohmann::json::array();
    for (const Job& job : jobs) {
      nlohmann::json candidates = nlohmann::json::array();
      for (const CpuSpmmCandidate& c : cpu_spmm_space(job.a, job.problem, target))
        candidates.push_back({{"label", c.label},
                              {"options", to_json(c.options)},
                              {"default", c.is_default},
                              {"panels", c.plan.panel_count()}});
      spaces.push_back(
          {{"matrix", job.name}, {"n", job.problem.n}, {"target", target.isa}, {"candidates", candidates}});
    }
    fmt::print("{}\n", (spaces.size() == 1 ? spaces[0] : spaces).dump(1));
    return kExitOk;
  }
  if (!host_runs(target))
    throw UsageError(
        fmt::format("--target {}: this CPU cannot run its code, so it cannot time it", args.cpu_target));
  const auto start = std::chrono::steady_clock::now();
  ProgressPrinter printer;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const Job& job = jobs[i];
    CpuTuneOptions options;
    options.threads = args.threads;
    options.compile_threads = args.jobs;
    options.seed = args.seed + 1;
    if (args.budget > 0) {
      const double left =
          args.budget - std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      options.budget_seconds = std::max(0.1, left * static_cast<double>(job.a.nnz()) /
                                                 static_cast<double>(std::max<std::int64_t>(nnz_left, 1)));
    }
    nnz_left -= job.a.nnz();
    const std::string prefix = fmt::format("[{}/{}] {}", i + 1, jobs.size(), job.name);
    options.progress = [&](const tune::TuneProgress& p) { printer.update(prefix, p); };
    const tune::TuningRecord record = tune_spmm_cpu(job.a, job.problem, job.bias, target, options);
    std::vector<std::string> warnings;
    tune::update_database(args.db[0], {record}, &warnings);
    for (const std::string& w : warnings) fmt::print(stderr, "sparsecc: warning: {}\n", w);
    std::size_t failed = 0;
    for (const tune::CandidateTiming& t : record.timings) failed += t.verified ? 0 : 1;
    if (record.winner.empty()) {
      printer.line(fmt::format("{} (N = {}): no candidate verified", job.name, job.problem.n));
      for (const tune::CandidateTiming& t : record.timings)
        fmt::print(stderr, "  {}: {}\n", t.label, t.error);
      return kExitCheckFailed;
    }
    printer.line(fmt::format(
        "{} (N = {}, {} on {} thread{}, {}): {} candidates in {:.1f} s ({}{}): best {} {:.2f} us, default "
        "{:.2f} us ({:.2f}x)",
        job.name, job.problem.n, record.key.compute_capability, record.key.params["threads"].get<int>(),
        record.key.params["threads"].get<int>() == 1 ? "" : "s", record.key.gpu, record.timings.size(),
        record.tuning_seconds, record.strategy, failed ? fmt::format(", {} not verified", failed) : "",
        record.winner, record.winner_us, record.default_us, record.default_us / record.winner_us));
  }
  return kExitOk;
#else
  (void)args;
  throw UsageError(
      "--target: this sparsecc was built without the CPU backend (LLVM 14 was not found at configure time; "
      "tools/setup.sh installs it)");
#endif
}

int run_tune(const TuneArgs& args) {
  check_tune_outputs(args);
  if (!args.cpu_target.empty()) return run_tune_cpu(args);
  if (args.fit) return run_fit(args);
  if (args.evaluate) return run_evaluate(args);
  if (args.refresh_features) return run_refresh_features(args);
  if (!args.inputs.empty() && std::all_of(args.inputs.begin(), args.inputs.end(),
                                          [](const std::string& f) { return f.ends_with(".swc"); })) {
    if (args.cold_l2)
      throw UsageError("--cold-l2 times SpMM executors; the Hines tuner times warm steps only");
    return run_hines_tune(args);
  }
  if (!args.space && args.db.size() != 1)
    throw UsageError("tune: name the tuning database with one --db FILE");
  if (args.n.empty() && args.suite.empty() && args.model.empty())
    throw UsageError("tune: --n is required (or a --suite or --model)");
  const std::vector<TuneInput> inputs = tune_inputs(args);
  if (!args.bias.empty() && inputs.size() != 1) throw UsageError("--bias needs exactly one matrix");

  tune::SpmmSpaceDims dims;
  SpmmOptions base;
  base.accumulate =
      args.dtype == "f32" ? DType::f32 : require_dtype(args.accumulate, "--accumulate", kSpmmDtypes);
  set_blocklets(base, args.dtype == "f32" ? "off" : "auto");
  const KernelLanguage default_emitter = args.dtype == "f32" ? KernelLanguage::ptx : KernelLanguage::cuda;

  std::unique_ptr<rt::Context> ctx;
  if (!args.space) {
    std::string why;
    if (!rt::driver_available(&why))
      throw UsageError("tune times candidates on a GPU, and none is usable here: " + why +
                       " (without a GPU, `sparsecc compile --db` uses the predictor's choice)");
    ctx = std::make_unique<rt::Context>(0);
  }
  tune::TuneOptions options;
  options.jobs = args.jobs;
  options.target = resolve_gpu_target(args.arch);
  options.exhaustive_limit = args.exhaustive_limit;
  options.shortlist = args.shortlist;

  // Every matrix first: the budget is shared in proportion to their nonzeros (tune::tune_many).
  tune::TuneManyOptions many;
  many.start = std::chrono::steady_clock::now();
  std::vector<tune::TuneJob> jobs;
  for (const TuneInput& in : inputs) {
    tune::TuneJob job{in.name, in.load(), {}, {}};
    job.bias = in.layer_problem    ? in.layer_bias
               : args.bias.empty() ? std::vector<double>{}
                                   : load_bias(args.bias, job.a.rows);
    job.problem = in.layer_problem ? *in.layer_problem : problem_for(job.a, args, in.n, !job.bias.empty());
    jobs.push_back(std::move(job));
  }
  if (args.space) {
    nlohmann::json spaces = nlohmann::json::array();
    for (const tune::TuneJob& job : jobs) {
      nlohmann::json j =
          tune::to_json(tune::spmm_space(job.a, job.problem, base, default_emitter, dims), dims);
      j["matrix"] = job.name;
      j["n"] = job.problem.n;
      j["n_mode"] = job.problem.n_mode == SpmmNMode::fixed ? "fixed" : "runtime";
      spaces.push_back(std::move(j));
    }
    fmt::print("{}\n", (spaces.size() == 1 ? spaces[0] : spaces).dump(1));
    return kExitOk;
  }

  many.search = options;
  many.budget_seconds = args.budget;
  many.matrices_at_once = args.matrices_at_once;
  many.dims = dims;
  many.base = base;
  many.default_emitter = default_emitter;
  many.gpu = ctx->device().name;
  many.compute_capability = fmt::format("{}.{}", ctx->device().cc_major, ctx->device().cc_minor);
  many.cold_l2 = args.cold_l2;
  many.database = args.db[0];
  ProgressPrinter printer;
  tune::TuneManyCallbacks callbacks;
  callbacks.progress = [&](std::size_t i, const tune::TuneProgress& p) {
    printer.update(fmt::format("[{}/{}] {}", i + 1, jobs.size(), jobs[i].name), p);
  };
  callbacks.tuned = [&](const tune::TunedJob& t) {
    for (const std::string& w : t.warnings) fmt::print(stderr, "sparsecc: warning: {}\n", w);
    const tune::TuningRecord& record = *t.record;
    printer.line(fmt::format(
        "{} (N = {}{}): {} of {} candidates in {:.1f} s ({}): best {} {:.2f} us, default {:.2f} us ({:.2f}x)",
        jobs[t.index].name, jobs[t.index].problem.n, args.cold_l2 ? ", cold L2" : "", record.timings.size(),
        t.space_size, record.tuning_seconds, record.strategy, record.winner, record.winner_us,
        record.default_us, record.default_us / record.winner_us));
  };
  const tune::TuneManyResult result = tune::tune_many(
      jobs, many,
      [&](const tune::TuneJob& job) {
        return std::make_unique<tune::GpuSpmmMeasurer>(*ctx, job.a, job.problem, job.bias, args.seed + 1,
                                                       args.cold_l2);
      },
      callbacks);
  if (result.compared > 1)
    fmt::print("geomean over {} matrices{}: tuned {:.3f}x faster than the default plan; {:.1f} s in all\n",
               result.compared, args.cold_l2 ? " (cold L2)" : "", result.geomean_speedup, result.seconds);
  return kExitOk;
}

}  // namespace

void add_tune(CLI::App& app, std::function<int()>& run) {
  auto args = std::make_shared<TuneArgs>();
  CLI::App* cmd = app.add_subcommand(
      "tune", "Tune SpMM executors on the GPU into a tuning database; fit or evaluate the no-GPU predictor");
  cmd->add_option(
      "inputs", args->inputs,
      "Matrices FILE[:TENSOR] to tune (with --fit / --evaluate: nothing; the timings come from --db)");
  cmd->add_option("--n", args->n, "N (columns of B), one for all matrices or one per matrix")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 24));
  cmd->add_flag("--runtime-n", args->runtime_n, "Tune runtime-N executors (timed at N)");
  cmd->add_option("--bias", args->bias, "Bias vector FILE[:TENSOR] (one matrix only)");
  cmd->add_flag("--relu", args->relu, "Apply ReLU after the bias");
  cmd->add_option("--dtype", args->dtype,
                  "Element type of B and C (SpMM), or of the Hines solve (f64 or f32)")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "f64"}))
      ->capture_default_str();
  cmd->add_option("--accumulate", args->accumulate, "Accumulation of f16 / bf16 executors (f32 or the dtype)")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "Seed for the values of pattern-only .smtx files (B takes seed + 1)")
      ->check(kNotNegative)
      ->capture_default_str();
  cmd->add_option("--model", args->model,
                  "Tune every layer of this model (.npz, .safetensors, .onnx) as compile-model builds it");
  cmd->add_option("--select", args->model_layers.select, "--model: the layers whose name or tensor matches");
  cmd->add_option("--max-density", args->model_layers.max_density,
                  "--model: weights denser than this are skipped")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--relu-select", args->model_layers.relu_select,
                  "--model: ReLU after the layers whose name matches this regular expression");
  cmd->add_option("--layer-n", args->model_layers.layer_n,
                  "--model: REGEX=N, a fixed N for the layers that match (as compile-model --layer-n)");
  cmd->add_flag("--n-from-shapes", args->model_layers.n_from_shapes,
                "--model (ONNX): each layer at the N its product has in the model (as compile-model)");
  cmd->add_option(
      "--layer-n-file", args->model_layers.layer_n_file,
      "--model: lines \"NAME,N\" or \"NAME N\", a fixed N a layer (as compile-model --layer-n-file)");
  cmd->add_option(
         "--suite", args->suite,
         "Tune a bench suite instead of files: sparsert (SparseRT Table 1), rn50 or transformer (DLMC 90 %)")
      ->check(CLI::IsMember({"sparsert", "rn50", "transformer"}));
  cmd->add_option("--data", args->data,
                  "Data folder of --suite (default: $SPARSECC_DATA_DIR or ../shared/data)");
  cmd->add_option("--sparsity", args->sparsity, "--suite sparsert: 0.9 or 0.95")->capture_default_str();
  cmd->add_option(
         "--batch", args->batch,
         "--suite: N times this batch; --model (ONNX): the inputs' symbolic leading dimension (implies "
         "--n-from-shapes)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_option("--first", args->first, "--suite: skip this many problems")->check(CLI::Range(0, 100000));
  cmd->add_option("--limit", args->limit, "--suite: at most this many problems (0: all)")
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--cells", args->cells, "SWC inputs: copies of the forest")->check(CLI::Range(1, 1000000));
  cmd->add_option("--resolution", args->resolution, "SWC inputs: compartments per segment")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--rhs", args->rhs, "SWC inputs: right-hand sides per solve")->check(CLI::Range(1, 1024));
  cmd->add_option("--db", args->db,
                  "Tuning database (JSON; created or merged); repeatable with --fit / --evaluate")
      ->check(kOutputPath);
  cmd->add_option("--budget", args->budget,
                  "Wall-clock seconds for the whole run (0: no limit); an SpMM search that settles early "
                  "spends the rest of its share on wider rounds")
      ->check(CLI::Range(0.0, 1e7));
  cmd->add_option("--jobs", args->jobs, "Compile threads (0: one per core)")->check(CLI::Range(0, 1024));
  cmd->add_option(
         "--matrices-at-once", args->matrices_at_once,
         "SpMM: matrices tuned at once, their compiles sharing the --jobs threads while the GPU times one "
         "candidate at a time (1: one after another)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  flags::add_arch_flag(cmd, args->arch, "GPU the plans, the predictor's ranking and the cubins are for");
  cmd->add_option("--exhaustive-limit", args->exhaustive_limit, "Search spaces up to this size exhaustively")
      ->check(kNotNegative)
      ->capture_default_str();
  cmd->add_option("--shortlist", args->shortlist, "Predictor picks measured first in larger spaces")
      ->check(kNotNegative)
      ->capture_default_str();
  cmd->add_flag("--cold-l2", args->cold_l2,
                "SpMM: time every candidate with cold L2 (rotating copies of its code, values, B and C) and "
                "record the winners for cold-L2 lookups (`compile --db FILE --cold-l2`); with --fit / "
                "--evaluate: the timings of the records tuned cold");
  cmd->add_flag("--space", args->space, "Print the search space of each matrix as JSON and stop (no GPU)");
  cmd->add_flag("--fit", args->fit, "Fit the predictor to the timings in the --db files");
  cmd->add_flag("--evaluate", args->evaluate, "Score the predictor on the timings in the --db files");
  cmd->add_flag(
      "--refresh-features", args->refresh_features,
      "Recompute the predictor features of the timings in --db for the matrices given (files or --suite)");
  cmd->add_option("--predictor", args->predictor, "Predictor file for --evaluate (default: the shipped one)");
  cmd->add_option("-o,--output", args->output, "--fit: predictor file to write; --evaluate: per-problem JSON")
      ->check(kOutputPath);
  cmd->add_option(
         "--target", args->cpu_target,
         "Tune CPU executors (through LLVM) for this CPU (x86-64-avx512, x86-64-avx2, native) instead "
         "of GPU ones, timed on this machine and recorded under its CPU model")
      ->check(CLI::IsMember(known_cpu_targets()));
  cmd->add_option("--threads", args->threads,
                  "--target: threads the CPU executors are timed on (0: the cores)")
      ->check(CLI::Range(0, 4096));
  cmd->callback([&run, args, cmd] {
    if (!args->cpu_target.empty()) {
      // The GPU tuner's options mean nothing to CPU executors: refused, not ignored.
      static const std::vector<std::string> kCpuOptions = {"inputs", "--n",      "--bias",    "--relu",
                                                           "--seed", "--dtype",  "--db",      "--budget",
                                                           "--jobs", "--target", "--threads", "--space"};
      for (const CLI::Option* o : cmd->get_options())
        if (o->count() > 0 &&
            std::find(kCpuOptions.begin(), kCpuOptions.end(), o->get_name()) == kCpuOptions.end())
          throw CLI::ValidationError(o->get_name(), "a GPU option; --target tunes CPU executors");
    } else if (cmd->count("--threads") > 0) {
      throw CLI::ValidationError("--threads", "times CPU executors: give --target");
    }
    // SWC inputs default to the Hines solver's f64 (the dtype default is SpMM's f32).
    args->dtype_given = cmd->count("--dtype") > 0;
    if (!args->model.empty() && cmd->count("--batch") > 0) args->model_layers.batch = args->batch;
    run = [args] { return run_tune(*args); };
  });
}

}  // namespace sparsecc::cli
