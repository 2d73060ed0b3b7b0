// The tuner of CPU SpMM executors (sparsecc/llvm/cpu_tune.hpp).
#include "sparsecc/llvm/cpu_tune.hpp"

#include <fmt/format.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Support/Host.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
#include <tuple>

#include "sparsecc/bundle/spmm_bundle.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/common/version.hpp"
#include "sparsecc/llvm/cpu_jit.hpp"
#include "sparsecc/llvm/cpu_pipeline.hpp"

namespace sparsecc {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

bool same_plan(const SpmmCpuPlan& x, const SpmmCpuPlan& y) {
  return x.column_tile == y.column_tile && x.rolled == y.rolled && x.panels == y.panels;
}

}  // namespace

std::string cpu_spmm_label(const SpmmCpuOptions& o) {
  return fmt::format("t{}/p{}/{}", o.column_tile, o.panel_nnz,
                     !o.rolled.has_value() ? "auto"
                     : *o.rolled           ? "rolled"
                                           : "straight");
}

nlohmann::json to_json(const SpmmCpuOptions& o) {
  nlohmann::json j = {{"column_tile", o.column_tile}, {"panel_nnz", o.panel_nnz}};
  if (o.rolled) j["rolled"] = *o.rolled;
  return j;
}

SpmmCpuOptions spmm_cpu_options_from_json(const nlohmann::json& j, const std::string& name) {
  if (!j.is_object())
    throw UsageError(fmt::format("{}: CPU plan options: expected an object, found {}", name, j.type_name()));
  SpmmCpuOptions o;
  const auto integer = [&](const char* field, auto& out) {
    const auto it = j.find(field);
    if (it == j.end()) return;
    if (!it->is_number_integer())
      throw UsageError(fmt::format("{}: CPU plan options: {}: expected an integer, found {}", name, field,
                                   it->type_name()));
    out = it->get<std::remove_reference_t<decltype(out)>>();
  };
  integer("column_tile", o.column_tile);
  integer("panel_nnz", o.panel_nnz);
  if (const auto it = j.find("rolled"); it != j.end()) {
    if (!it->is_boolean())
      throw UsageError(fmt::format("{}: CPU plan options: rolled: expected true or false, found {}", name,
                                   it->type_name()));
    o.rolled = it->get<bool>();
  }
  return o;
}

std::vector<CpuSpmmCandidate> cpu_spmm_space(const CsrMatrix& a, const SpmmProblem& problem,
                                             const CpuTarget& target) {
  using namespace spmm_rules;
  std::vector<CpuSpmmCandidate> out;
  // The default: the planner's own plan, its options made explicit (the planner's panel goal) so that
  // the record reproduces it on a machine with another number of cores.
  CpuSpmmCandidate def;
  def.plan = plan_spmm_cpu(a, problem, target);
  def.is_default = true;
  def.options.column_tile = def.plan.column_tile;
  def.options.panel_nnz = cpu_panel_nnz_goal(a, target);
  def.options.rolled = def.plan.rolled;
  if (!same_plan(plan_spmm_cpu(a, problem, target, def.options), def.plan)) def.options = {};
  def.label = cpu_spmm_label(def.options);
  out.push_back(def);

  const std::int64_t lanes = target.lanes_f32(), n = problem.n;
  std::vector<std::int64_t> tiles;
  for (const std::int32_t v : kCpuTuneTileVectors)
    if (v * lanes < n) tiles.push_back(v * lanes);
  const std::int32_t widest = kCpuTuneTileVectors[std::size(kCpuTuneTileVectors) - 1];
  if (n <= widest * lanes) tiles.push_back(n);
  std::vector<CpuSpmmCandidate> grid;
  for (const std::int64_t tile : tiles)
    for (const std::int64_t panel : kCpuTunePanelNnz)
      for (const bool rolled : {false, true}) {
        if (!rolled &&
            (panel > kCpuMaxPanelNnz || cpu_straight_line_fmas(a, n, tile, lanes) > kCpuTuneStraightLineFmas))
          continue;
        CpuSpmmCandidate c;
        c.options = {static_cast<std::int32_t>(tile), panel, rolled};
        c.plan = plan_spmm_cpu(a, problem, target, c.options);
        const auto seen = [&](const CpuSpmmCandidate& o) { return same_plan(o.plan, c.plan); };
        if (std::any_of(out.begin(), out.end(), seen) || std::any_of(grid.begin(), grid.end(), seen))
          continue;
        c.label = cpu_spmm_label(c.options);
        grid.push_back(std::move(c));
      }
  // Neighbours of the default first (what a budget reaches), then straight-line before rolled code
  // (cheaper at run time, the compile is what the budget pays), narrower tiles, smaller panels.
  const auto differs = [&](const CpuSpmmCandidate& c) {
    return (c.plan.column_tile != def.plan.column_tile) + (c.plan.panels != def.plan.panels) +
           (c.plan.rolled != def.plan.rolled);
  };
  std::stable_sort(grid.begin(), grid.end(), [&](const CpuSpmmCandidate& x, const CpuSpmmCandidate& y) {
    return std::make_tuple(differs(x), x.plan.rolled, x.plan.column_tile, x.options.panel_nnz) <
           std::make_tuple(differs(y), y.plan.rolled, y.plan.column_tile, y.options.panel_nnz);
  });
  for (CpuSpmmCandidate& c : grid) out.push_back(std::move(c));
  return out;
}

std::string cpu_isa_name(const CpuTarget& target) {
  return target.vector_bits > 256 ? "x86-64-avx512" : "x86-64-avx2";
}

std::string cpu_model_name(const CpuTarget& target) {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("model name")) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const auto first = line.find_first_not_of(" \t", colon + 1);
    if (first == std::string::npos) continue;
    const auto last = line.find_last_not_of(" \t\r");
    return line.substr(first, last - first + 1);
  }
  if (target.cpu != "native") return target.cpu;
  return llvm::sys::getHostCPUName().str();
}

tune::TuningKey cpu_spmm_tuning_key(const CsrMatrix& a, const SpmmProblem& problem, const CpuTarget& target,
                                    int threads, const std::string& cpu_model) {
  tune::TuningKey key;
  key.op = kCpuSpmmTuneOp;
  key.fingerprint = matrix_fingerprint(a);
  key.params = {{"m", problem.m},       {"k", problem.k}, {"n", problem.n},    {"bias", problem.bias},
                {"relu", problem.relu}, {"dtype", "f32"}, {"threads", threads}};
  key.gpu = cpu_model;
  key.compute_capability = cpu_isa_name(target);
  key.generator_version = kVersion;
  return key;
}

namespace {

// Times a verified candidate's code: a warm-up, then single runs (as many as fill about
// seconds_per_timing, within [min_reps, max_reps]); the median in microseconds.
double time_candidate(const CpuSpmmArtifact& art, const std::vector<double>& bias,
                      const CpuTuneOptions& options, int threads) {
  const SpmmProblem& p = art.plan.problem;
  const CpuSpmmKernel kernel = CpuSpmmKernel::link(art.objects, art.plan, art.symbol);
  std::mt19937_64 rng(options.seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> b(static_cast<std::size_t>(p.k * p.n)), c(static_cast<std::size_t>(p.m * p.n));
  for (float& v : b) v = uniform(rng);
  const std::vector<float> bias32(bias.begin(), bias.end());
  const float* bias_ptr = bias32.empty() ? nullptr : bias32.data();
  const auto once = [&] {
    const auto t0 = Clock::now();
    kernel.run(b.data(), c.data(), bias_ptr, threads);
    return seconds_since(t0);
  };
  (void)once();
  const double first = std::max(once(), 1e-7);
  const int reps = static_cast<int>(std::clamp<double>(options.seconds_per_timing / first, options.min_reps,
                                                       std::max(options.min_reps, options.max_reps)));
  std::vector<double> times(static_cast<std::size_t>(reps));
  for (double& t : times) t = once();
  std::nth_element(times.begin(), times.begin() + reps / 2, times.end());
  return times[static_cast<std::size_t>(reps / 2)] * 1e6;
}

tune::CandidateTiming measure_candidate(const CsrMatrix& a, const SpmmProblem& problem,
                                        const std::vector<double>& bias, const CpuTarget& target,
                                        const CpuTuneOptions& options, int threads,
                                        const CpuSpmmCandidate& cand) {
  tune::CandidateTiming t;
  t.label = cand.label;
  t.options = to_json(cand.options);  // no predictor features: the GPU predictor's fit skips these timings
  const auto t0 = Clock::now();
  try {
    CpuSpmmRequest request;
    request.problem = problem;
    request.options = cand.options;
    request.bias = bias;
    request.threads = options.compile_threads;
    const CpuSpmmArtifact art = compile_spmm_cpu(a, request, target);
    t.compile_seconds = seconds_since(t0);
    const CpuSpmmCheck check = check_spmm_cpu(art, a, bias, options.seed);
    t.rel_error = check.rel_error;
    if (!check.ok()) {
      t.error = fmt::format("check: max relative error {:.3g} (tolerance {:.3g}), {} outputs unwritten",
                            check.rel_error, check.tolerance, check.unwritten);
      return t;
    }
    t.median_us = time_candidate(art, bias, options, threads);
    t.verified = true;
  } catch (const std::exception& e) {
    if (t.compile_seconds == 0) t.compile_seconds = seconds_since(t0);
    t.error = e.what();
  }
  return t;
}

}  // namespace

tune::TuningRecord tune_spmm_cpu(const CsrMatrix& a, const SpmmProblem& problem,
                                 const std::vector<double>& bias, const CpuTarget& target,
                                 const CpuTuneOptions& options) {
  if (!host_runs(target))
    throw UsageError(
        fmt::format("tune: this CPU cannot run {} code, so it cannot time it", cpu_isa_name(target)));
  if (problem.bias != !bias.empty() || (problem.bias && static_cast<std::int64_t>(bias.size()) != problem.m))
    throw UsageError(fmt::format("tune: the bias holds {} values, the problem wants {}", bias.size(),
                                 problem.bias ? problem.m : 0));
  const auto start = Clock::now();
  const int threads = options.threads > 0 ? options.threads : std::max(target.cores, 1);
  const std::vector<CpuSpmmCandidate> space = cpu_spmm_space(a, problem, target);
  tune::TuningRecord record;
  record.key = cpu_spmm_tuning_key(a, problem, target, threads,
                                   options.cpu_model.empty() ? cpu_model_name(target) : options.cpu_model);
  record.strategy = "exhaustive";
  std::size_t best = space.size();
  double best_us = std::numeric_limits<double>::infinity();
  // Seconds spent a candidate so far, by code kind (straight-line, rolled): what the budget expects.
  double spent[2] = {0, 0};
  int measured[2] = {0, 0};
  std::size_t planned = space.size();
  for (std::size_t i = 0; i < space.size(); ++i) {
    const CpuSpmmCandidate& cand = space[i];
    const int kind = cand.plan.rolled ? 1 : 0;
    if (i > 0 && options.budget_seconds > 0) {
      const int all = measured[0] + measured[1];
      const double expect = measured[kind] ? spent[kind] / measured[kind] : (spent[0] + spent[1]) / all;
      if (seconds_since(start) + expect > options.budget_seconds) {
        record.strategy = "budget";
        --planned;
        continue;
      }
    }
    const auto t0 = Clock::now();
    const tune::CandidateTiming t = measure_candidate(a, problem, bias, target, options, threads, cand);
    spent[kind] += seconds_since(t0);
    ++measured[kind];
    tune::tally_timing(record, t, i, cand.is_default, best, best_us);
    if (options.progress)
      options.progress(tune::tune_progress(record.timings.size(), planned, seconds_since(start), t,
                                           best < space.size() ? space[best].label : std::string(),
                                           best < space.size() ? best_us : 0.0));
  }
  if (best < space.size()) {
    record.winner = space[best].label;
    record.winner_options = to_json(space[best].options);
    record.winner_us = best_us;
  }
  record.tuning_seconds = seconds_since(start);
  record.recorded_at = tune::utc_timestamp();
  return record;
}

CpuTunedChoice choose_tuned_cpu_plan(const std::string& db_path, const CsrMatrix& a,
                                     const SpmmProblem& problem, const CpuTarget& target,
                                     const std::string& cpu_model) {
  const std::string model = cpu_model.empty() ? cpu_model_name(target) : cpu_model;
  const tune::TuningDatabase db = tune::read_database_file(db_path);
  const int cores = std::max(target.cores, 1);
  // Records of this problem on this CPU model and ISA at any thread count: the target's cores first,
  // else the most threads.
  tune::TuningKey want = cpu_spmm_tuning_key(a, problem, target, cores, model);
  const tune::TuningRecord* pick = nullptr;
  int pick_threads = 0;
  for (const tune::TuningRecord& r : db.records) {
    const auto it = r.key.params.find("threads");
    if (it == r.key.params.end() || !it->is_number_integer() || r.winner.empty()) continue;
    const int threads = it->get<int>();
    want.params["threads"] = threads;
    if (!(r.key == want)) continue;
    if (!pick || threads == cores || (pick_threads != cores && threads > pick_threads)) {
      pick = &r;
      pick_threads = threads;
    }
  }
  CpuTunedChoice choice;
  if (!pick) {
    choice.how = fmt::format("no record in {} for this matrix and problem on {} ({}): the automatic plan",
                             db_path, model, cpu_isa_name(target));
    return choice;
  }
  choice.options = spmm_cpu_options_from_json(pick->winner_options, db_path);
  choice.tuned = true;
  choice.how =
      fmt::format("tuned plan {} from {} ({}, {}, {} thread{}: {:.2f} us; the default plan {:.2f} us)",
                  pick->winner, db_path, model, cpu_isa_name(target), pick_threads,
                  pick_threads == 1 ? "" : "s", pick->winner_us, pick->default_us);
  return choice;
}

}  // namespace sparsecc
