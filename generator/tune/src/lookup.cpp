#include "sparsecc/tune/lookup.hpp"

#include <fmt/format.h>

#include <optional>
#include <utility>

#include "sparsecc/runtime/device.hpp"
#include "sparsecc/runtime/driver.hpp"
#include "sparsecc/tune/database.hpp"
#include "sparsecc/tune/hines_tuner.hpp"
#include "sparsecc/tune/predictor.hpp"
#include "sparsecc/tune/space.hpp"
#include "sparsecc/tune/tuner.hpp"

namespace sparsecc::tune {

namespace {

// The GPU a lookup is for, and its compute capability: `gpu` when given, else this machine's GPU,
// else (a build machine) no name and the target's compute capability (sm_90a -> "9.0").
std::pair<std::string, std::string> lookup_target(const GpuTarget& target, const std::string& gpu) {
  std::string target_gpu = gpu;
  std::string cc = fmt::format("{}.{}", target.cc_major, target.cc_minor);
  if (target_gpu.empty() && rt::driver_available()) {
    try {
      const rt::DeviceInfo d = rt::device_info(0);
      target_gpu = d.name;
      cc = fmt::format("{}.{}", d.cc_major, d.cc_minor);
    } catch (const std::exception&) {
      // A driver without a usable device: match by the architecture, as on a build machine.
    }
  }
  return {target_gpu, cc};
}

// The record for `key` in the database at `path` (a copy), matching any GPU name when the key has none.
std::optional<TuningRecord> find_record(const std::string& path, const TuningKey& key) {
  const TuningDatabase db = read_database_file(path);
  for (const TuningRecord& r : db.records) {
    TuningKey k = r.key;
    if (key.gpu.empty()) k.gpu.clear();  // any GPU of this compute capability
    if (k == key) return r;
  }
  return std::nullopt;
}

}  // namespace

TunedChoice choose_tuned_plan(const std::string& db_path, const CsrMatrix& a, const SpmmProblem& problem,
                              const SpmmOptions& base, KernelLanguage default_emitter,
                              const GpuTarget& gpu_target, const std::string& gpu, bool cold_l2) {
  const auto [target_gpu, cc] = lookup_target(gpu_target, gpu);
  const std::optional<TuningRecord> record =
      find_record(db_path, spmm_tuning_key(a, problem, target_gpu, cc, cold_l2));
  TunedChoice choice;
  if (record) {
    auto [options, emitter] = spmm_options_from_json(record->winner_options, base);
    choice.options = options;
    choice.emitter = emitter;
    choice.how = fmt::format("tuned plan {} from {} ({}{}, {:.2f} us; the default plan {:.2f} us)",
                             record->winner, db_path, record->key.gpu, cold_l2 ? ", cold L2" : "",
                             record->winner_us, record->default_us);
    return choice;
  }
  const std::string target = target_gpu.empty() ? "compute capability " + cc : target_gpu;
  if (cold_l2) {
    // The predictor is fitted to warm launches; timed cold, its choices ran slower than the automatic
    // plan (README, "Tuned for cold L2"), so a cold lookup without a record keeps the rules' plan.
    choice.options = base;
    choice.emitter = default_emitter;
    choice.how = fmt::format(
        "no cold-L2 record in {} for this matrix and problem on {}: the automatic plan (the "
        "predictor models warm launches)",
        db_path, target);
    return choice;
  }
  const SpmmSpace space = spmm_space(a, problem, base, default_emitter);
  // The predictor was fitted on unrolled plans only: it ranks the candidates of the default plan's kind
  // (rolled, or unrolled) and leaves the choice between the kinds to the inspector's rule.
  const auto rolled = [](const SpmmCandidate& c) { return c.plan.value_mode() == SpmmValueMode::rolled; };
  std::vector<const SpmmCandidate*> kind;
  std::vector<std::vector<double>> features;
  for (const SpmmCandidate& c : space.candidates)
    if (rolled(c) == rolled(space.candidates.front())) {
      kind.push_back(&c);
      features.push_back(spmm_features(c.plan, a, gpu_target));
    }
  const SpmmCandidate& best = *kind.at(rank_candidates(shipped_predictor(), features).front());
  choice.options = best.options;
  choice.emitter = best.emitter;
  choice.how = fmt::format(
      "no record in {} for this matrix and problem on {}: the predictor's choice {} of {} {} "
      "candidates",
      db_path, target, best.label, kind.size(), rolled(space.candidates.front()) ? "rolled" : "unrolled");
  return choice;
}

TunedHines choose_tuned_hines(const std::string& db_path, const HinesSystem& system, std::int32_t rhs,
                              const std::string& dtype, const HinesOptions& base, const GpuTarget& gpu_target,
                              const std::string& gpu) {
  const auto [target_gpu, cc] = lookup_target(gpu_target, gpu);
  const std::optional<TuningRecord> record =
      find_record(db_path, hines_tuning_key(system, rhs, dtype, target_gpu, cc));
  TunedHines choice{base, ""};
  if (!record) {
    choice.how = fmt::format("no record in {} for this forest and problem on {}: the planner's rules",
                             db_path, target_gpu.empty() ? "compute capability " + cc : target_gpu);
    return choice;
  }
  choice.options = hines_options_from_json(record->winner_options, base, db_path);
  choice.how = fmt::format("tuned plan {} from {} ({}, {:.2f} us per step; the default plan {:.2f} us)",
                           record->winner, db_path, record->key.gpu, record->winner_us, record->default_us);
  return choice;
}

}  // namespace sparsecc::tune
