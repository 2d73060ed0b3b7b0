// The tuner of CPU SpMM executors: a search space over the planner's options (SpmmCpuOptions: column
// tile, panel size, straight-line or rolled code), each candidate planned, compiled, checked against
// fp64 on NaN-poisoned outputs and timed in this process on a given number of threads; the fastest
// verified one wins. Records go into the tuning database (sparsecc/tune/database.hpp) under the op
// "spmm_cpu", keyed by the CPU model (TuningKey::gpu) and the target's ISA
// (TuningKey::compute_capability), so GPU and CPU records share one file. docs/design/cpu-backend.md,
// "Tuning".
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sparsecc/inspector/spmm_cpu_planner.hpp"
#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/plan/spmm_cpu_plan.hpp"
#include "sparsecc/target/target.hpp"
#include "sparsecc/tune/database.hpp"
#include "sparsecc/tune/tuner.hpp"

namespace sparsecc {

// The op of CPU SpMM records in the tuning database.
inline constexpr const char* kCpuSpmmTuneOp = "spmm_cpu";

namespace spmm_rules {
// Column tiles of the space, in vectors of the target's fp32 lanes (and N itself where N fits the widest).
inline constexpr std::int32_t kCpuTuneTileVectors[] = {1, 2, 4, 8};
// Panel sizes of the space. Straight-line candidates stay at or under kCpuMaxPanelNnz (one function's
// code generation grows faster than linearly in its size); rolled code, whose functions do not grow with
// the panel, also takes the larger size.
inline constexpr std::int64_t kCpuTunePanelNnz[] = {1024, 2048, 4096};
// Straight-line candidates up to this many vector fused multiply-adds (the planner's count), twice the
// planner's own threshold: the tuner looks past the rule where a compile still takes seconds, not minutes.
inline constexpr std::int64_t kCpuTuneStraightLineFmas = 2 * kCpuStraightLineFmas;
}  // namespace spmm_rules

struct CpuSpmmCandidate {
  std::string label;       // "t64/p2048/straight": column tile, panel nonzeros, code
  SpmmCpuOptions options;  // every field set: the options reproduce the plan
  SpmmCpuPlan plan;
  bool is_default = false;  // the planner's own choice (always the space's first)
};

// The space of `a` for `problem` on `target`: the planner's own plan first (its options made
// explicit), then the grid of kCpuTuneTileVectors x kCpuTunePanelNnz x {straight-line, rolled}
// (tiles wider than N dropped, N added where it fits 8 vectors; straight-line only within
// kCpuTuneStraightLineFmas), candidates whose plan equals an earlier one's dropped; those that differ
// from the default in fewer options come first, straight-line before rolled, narrower tiles first.
// Throws UsageError for a problem the planner refuses.
std::vector<CpuSpmmCandidate> cpu_spmm_space(const CsrMatrix& a, const SpmmProblem& problem,
                                             const CpuTarget& target);

// A candidate's label for its (explicit) options.
std::string cpu_spmm_label(const SpmmCpuOptions& options);
// {"column_tile", "panel_nnz", "rolled"} (rolled left out when unset), and back: a field missing is
// automatic; a field of the wrong type throws UsageError naming `name` and the field.
nlohmann::json to_json(const SpmmCpuOptions& options);
SpmmCpuOptions spmm_cpu_options_from_json(const nlohmann::json& j, const std::string& name);

// The ISA of `target` as records name it: "x86-64-avx512" or "x86-64-avx2" ("native" resolved).
std::string cpu_isa_name(const CpuTarget& target);
// This machine's CPU model: /proc/cpuinfo's first "model name", else the host's CPU name as LLVM
// knows it (or target.cpu when that names one).
std::string cpu_model_name(const CpuTarget& target);

// The record key of a CPU SpMM problem: op "spmm_cpu", A's fingerprint, params {m, k, n, bias, relu,
// dtype "f32", threads}, gpu = `cpu_model`, compute_capability = cpu_isa_name(target), kVersion.
tune::TuningKey cpu_spmm_tuning_key(const CsrMatrix& a, const SpmmProblem& problem, const CpuTarget& target,
                                    int threads, const std::string& cpu_model);

struct CpuTuneOptions {
  int threads = 0;                  // threads the candidates are timed on (0: the target's cores)
  int compile_threads = 0;          // LLVM compile threads (0: the target's cores)
  double budget_seconds = 0;        // 0: every candidate; else no candidate starts that would end past it
  double seconds_per_timing = 0.2;  // a candidate's timed runs last about this long (at least min_reps)
  int min_reps = 5, max_reps = 201;
  std::uint64_t seed = 2;                                   // B's values
  std::string cpu_model;                                    // empty: cpu_model_name(target)
  std::function<void(const tune::TuneProgress&)> progress;  // after each candidate
};

// Tunes `a` for `problem` (fp32, fixed N; bias m values when problem.bias) on `target`, which this CPU
// must run (UsageError otherwise): every candidate of cpu_spmm_space in order, each compiled
// (compile_spmm_cpu), checked (check_spmm_cpu, the candidate is verified when it passes) and timed:
// the median of its runs after a warm-up, with C and B of the problem's size on `threads` threads.
// The default is always measured; with a budget, a later candidate starts only when the mean time of
// the candidates of its code kind so far (else of all) still fits, and the next that fits is tried.
// The record's winner is the fastest verified candidate (strategy "exhaustive" or "budget").
tune::TuningRecord tune_spmm_cpu(const CsrMatrix& a, const SpmmProblem& problem,
                                 const std::vector<double>& bias, const CpuTarget& target,
                                 const CpuTuneOptions& options = {});

struct CpuTunedChoice {
  SpmmCpuOptions options;  // automatic ({}) without a record
  bool tuned = false;
  std::string how;  // a sentence for the user
};

// `compile --target --db`: the winner of the record for `a`, `problem`, this CPU model and `target`'s
// ISA, timed on the target's cores, else on the most threads recorded; without one, the automatic plan.
// A database that cannot be read throws InputError naming it; a missing one is empty.
CpuTunedChoice choose_tuned_cpu_plan(const std::string& db_path, const CsrMatrix& a,
                                     const SpmmProblem& problem, const CpuTarget& target,
                                     const std::string& cpu_model = {});

}  // namespace sparsecc
