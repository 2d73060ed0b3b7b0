#include "sparsecc/tune/hines_tuner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <future>
#include <limits>
#include <thread>

#include "sparsecc/bundle/hines_bundle.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/common/version.hpp"
#include "sparsecc/compile/compile_hines.hpp"
#include "sparsecc/inspector/options_json.hpp"
#include "sparsecc/pipeline/pipeline.hpp"

namespace sparsecc::tune {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Compiled {
  std::size_t index = 0;
  std::future<std::pair<rt::Bundle, std::string>> result;  // the bundle, or why it failed
  Clock::time_point started;
};

}  // namespace

rt::Bundle compile_hines_candidate(const HinesCandidate& c, const HinesSystem& system,
                                   const GpuTarget& target) {
  return std::move(*pipeline::compile_hines_plan(c.plan, system, target).bundle);
}

nlohmann::json hines_options_json(const HinesOptions& o) { return to_json(o); }

HinesOptions hines_options_from_json(const nlohmann::json& j, HinesOptions base, const std::string& name) {
  return sparsecc::hines_options_from_json(j, name, std::move(base));
}

TuningKey hines_tuning_key(const HinesSystem& system, std::int32_t rhs, const std::string& dtype,
                           const std::string& gpu, const std::string& compute_capability) {
  TuningKey key;
  key.op = "hines";
  key.fingerprint = fmt::format("{:016x}", rt::fnv1a64(hines_reference_bytes(system)));
  key.params = {{"rows", system.size()}, {"cells", system.num_cells()}, {"rhs", rhs}, {"dtype", dtype}};
  key.gpu = gpu;
  key.compute_capability = compute_capability;
  key.generator_version = kVersion;
  return key;
}

TuningRecord tune_hines(const HinesSpace& space, const TuningKey& key, const HinesBuilder& build,
                        HinesMeasurer& measurer, const TuneOptions& options,
                        const std::function<void(const TuneProgress&)>& progress) {
  const std::size_t n = space.candidates.size();
  if (n == 0) throw UsageError("tune: the Hines search space has no candidates");
  const Clock::time_point t0 = Clock::now();
  const std::size_t jobs = options.jobs > 0 ? static_cast<std::size_t>(options.jobs)
                                            : std::max(1u, std::thread::hardware_concurrency());
  TuningRecord record;
  record.key = key;
  std::deque<Compiled> running;
  std::size_t next = 0, done = 0, best = n;
  double best_us = std::numeric_limits<double>::infinity(), compile_total = 0;
  bool budget_hit = false;
  const auto may_start = [&] {
    if (next == 0 || options.budget_seconds <= 0) return true;
    const double expected =
        std::max(options.expected_compile_seconds, done ? compile_total / static_cast<double>(done) : 0.0);
    budget_hit = budget_hit || seconds_since(t0) + expected > options.budget_seconds;
    return !budget_hit;
  };
  for (;;) {
    while (running.size() < jobs && next < n && may_start()) {
      const std::size_t i = next++;
      running.push_back({i,
                         std::async(std::launch::async,
                                    [&build, &space, i]() -> std::pair<rt::Bundle, std::string> {
                                      try {
                                        return {build(space.candidates[i]), {}};
                                      } catch (const std::exception& e) {
                                        return {rt::Bundle{}, std::string("compile: ") + e.what()};
                                      }
                                    }),
                         Clock::now()});
    }
    if (running.empty()) break;
    Compiled c = std::move(running.front());
    running.pop_front();
    auto [bundle, error] = c.result.get();
    const HinesCandidate& cand = space.candidates[c.index];
    CandidateTiming t;
    t.label = cand.label;
    t.options = hines_options_json(cand.options);
    t.compile_seconds = seconds_since(c.started);
    compile_total += t.compile_seconds;
    t.error = error;
    if (error.empty()) record_measurement(t, [&] { return measurer.measure(cand, bundle); });
    tally_timing(record, t, c.index, cand.is_default, best, best_us);
    ++done;
    if (progress)
      progress(tune_progress(done, done + running.size() + (budget_hit ? 0 : n - next), seconds_since(t0), t,
                             best < n ? space.candidates[best].label : std::string(), best_us));
  }
  std::size_t winner = best;
  if (winner == n)
    for (std::size_t i = 0; i < n; ++i)
      if (space.candidates[i].is_default) winner = i;
  if (winner == n) winner = 0;
  record.winner = space.candidates[winner].label;
  record.winner_options = hines_options_json(space.candidates[winner].options);
  record.winner_us = best < n ? best_us : std::numeric_limits<double>::quiet_NaN();
  record.strategy = "exhaustive";
  if (budget_hit)
    record.strategy += fmt::format(" (budget of {:.1f} s reached after {} of {} candidates)",
                                   options.budget_seconds, done, n);
  record.tuning_seconds = seconds_since(t0);
  record.recorded_at = utc_timestamp();
  return record;
}

}  // namespace sparsecc::tune
