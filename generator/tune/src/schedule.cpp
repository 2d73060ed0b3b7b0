#include "sparsecc/tune/schedule.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <map>
#include <thread>
#include <utility>

#include "sparsecc/bundle/spmm_bundle.hpp"
#include "sparsecc/common/file.hpp"

namespace sparsecc::tune {

double tune_weight(const CsrMatrix& a) { return static_cast<double>(a.nnz()) + 20000.0; }

std::size_t searches_at_once(int requested, std::size_t matrices, int compile_threads) {
  const std::size_t most = std::min(matrices, static_cast<std::size_t>(std::max(compile_threads, 1)));
  return std::clamp<std::size_t>(static_cast<std::size_t>(std::max(requested, 1)), 1,
                                 std::max<std::size_t>(most, 1));
}

double budget_share(double left, const std::vector<double>& weights, std::size_t i, std::size_t at_once) {
  double rest = 0;
  for (std::size_t j = i; j < weights.size(); ++j) rest += weights[j];
  const double beside = static_cast<double>(std::min(at_once, weights.size() - i));
  return std::max(0.1, std::min(left, left * weights[i] / rest * beside));
}

Measurement SerialMeasurer::measure(const SpmmCandidate& candidate, const rt::Bundle& bundle) {
  const std::lock_guard<std::mutex> lock(gpu_);
  return inner_.measure(candidate, bundle);
}

TuneManyResult tune_many(const std::vector<TuneJob>& jobs, const TuneManyOptions& options,
                         const SpmmMeasurerFactory& make_measurer, const TuneManyCallbacks& callbacks,
                         const SpmmJobBuilder& build) {
  TuneManyResult result;
  result.records.resize(jobs.size());
  std::vector<double> weights;
  for (const TuneJob& job : jobs) weights.push_back(tune_weight(job.a));
  const int threads = options.search.jobs > 0
                          ? options.search.jobs
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::size_t at_once = searches_at_once(options.matrices_at_once, jobs.size(), threads);
  CompileSlots slots(std::max(0, threads - static_cast<int>(at_once)));  // each search has one of its own
  TuneOptions search = options.search;
  search.jobs = threads;
  if (at_once > 1) search.slots = &slots;

  std::mutex gpu;    // one measurement (or measurer set-up) at a time
  std::mutex state;  // what follows, the database and the callback `tuned`
  std::size_t next = 0;
  std::exception_ptr failure;
  double compile_seconds = 0, compiled_nnz = 0;  // compiles so far, for the next matrix's estimate
  double default_total = 0, tuned_total = 0;
  const auto tune_one = [&](std::size_t i, const TuneOptions& o) {
    const TuneJob& job = jobs[i];
    const SpmmSpace space =
        spmm_space(job.a, job.problem, options.base, options.default_emitter, options.dims);
    const TuningKey key =
        spmm_tuning_key(job.a, job.problem, options.gpu, options.compute_capability, options.cold_l2);
    std::unique_ptr<SpmmMeasurer> device;
    {
      const std::lock_guard<std::mutex> lock(gpu);
      device = make_measurer(job);
    }
    SerialMeasurer measurer(*device, gpu);
    const SpmmBuilder builder = [&](const SpmmCandidate& c) {
      return build ? build(job, c) : compile_spmm_candidate(c, job.a, o.arch, job.bias);
    };
    TuningRecord record =
        tune_spmm(job.a, space, options.dims, key, builder, measurer, o, [&](const TuneProgress& p) {
          if (callbacks.progress) callbacks.progress(i, p);
        });
    {
      const std::lock_guard<std::mutex> lock(gpu);
      device.reset();
    }
    const std::lock_guard<std::mutex> lock(state);
    for (const CandidateTiming& t : record.timings) {
      if (t.options.value("value_mode", std::string()) == "rolled")
        continue;  // not a guide to unrolled compiles
      compile_seconds += t.compile_seconds;
      compiled_nnz += static_cast<double>(job.a.nnz());
    }
    TunedJob tuned{i, &record, space.candidates.size(), {}};
    if (!options.database.empty()) update_database(options.database, {record}, &tuned.warnings);
    if (callbacks.tuned) callbacks.tuned(tuned);
    if (std::isfinite(record.winner_us) && std::isfinite(record.default_us)) {
      default_total += std::log(record.default_us);
      tuned_total += std::log(record.winner_us);
      ++result.compared;
    }
    result.records[i] = std::move(record);
  };
  const auto worker = [&] {
    for (;;) {
      std::size_t i = 0;
      TuneOptions o = search;
      {
        const std::lock_guard<std::mutex> lock(state);
        if (failure || next == jobs.size()) return;
        i = next++;
        if (options.budget_seconds > 0) {
          const double left =
              options.budget_seconds -
              std::chrono::duration<double>(std::chrono::steady_clock::now() - options.start).count();
          o.budget_seconds = budget_share(left, weights, i, at_once);
          o.expected_compile_seconds =
              compiled_nnz > 0 ? compile_seconds / compiled_nnz * static_cast<double>(jobs[i].a.nnz()) : 0.0;
        }
      }
      try {
        tune_one(i, o);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(state);
        if (!failure) failure = std::current_exception();
        return;
      }
    }
  };
  {
    std::vector<std::jthread> workers;
    for (std::size_t w = 1; w < at_once; ++w) workers.emplace_back(worker);
    worker();
  }
  if (failure) std::rethrow_exception(failure);
  if (result.compared > 0)
    result.geomean_speedup = std::exp((default_total - tuned_total) / static_cast<double>(result.compared));
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - options.start).count();
  return result;
}

RefreshResult refresh_features(const std::string& db_path, const std::vector<CsrMatrix>& matrices) {
  RefreshResult result;
  std::map<std::string, const CsrMatrix*> by_fingerprint;
  for (const CsrMatrix& a : matrices) by_fingerprint.emplace(matrix_fingerprint(a), &a);
  result.matrices = by_fingerprint.size();
  const TuningDatabase db = load_database(db_path, &result.damaged);
  if (!result.damaged.empty()) return result;  // nothing to refresh, and nothing is written
  result.database_records = db.records.size();
  std::vector<TuningRecord> refreshed;
  for (const TuningRecord& record : db.records) {
    const auto it =
        record.key.op == "spmm" ? by_fingerprint.find(record.key.fingerprint) : by_fingerprint.end();
    if (it == by_fingerprint.end()) {
      ++result.other;
      continue;
    }
    TuningRecord r = record;
    result.unplanned += refresh_spmm_features(r, *it->second);
    result.timings += r.timings.size();
    refreshed.push_back(std::move(r));
  }
  result.refreshed = refreshed.size();
  if (refreshed.empty()) return result;
  update_database(db_path, refreshed, &result.warnings);
  return result;
}

DatabaseSamples database_samples(const std::vector<std::string>& databases, bool cold_l2) {
  DatabaseSamples out;
  for (const std::string& path : databases) {
    const TuningDatabase db = read_database_file(path);
    std::size_t stale = 0;
    for (PredictorSample& s : predictor_samples(db, &stale, cold_l2)) out.samples.push_back(std::move(s));
    if (stale > 0)
      out.warnings.push_back(
          fmt::format("{}: {} timings hold another version's predictor features and were skipped; "
                      "`sparsecc tune --refresh-features MATRICES... --db {}` recomputes them",
                      path, stale, path));
  }
  return out;
}

}  // namespace sparsecc::tune
