#include "sparsecc/tune/tuner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <future>
#include <limits>
#include <thread>

#include "sparsecc/bundle/spmm_bundle.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/common/version.hpp"
#include "sparsecc/compile/compile_kernel.hpp"
#include "sparsecc/emit/spmm_ptx.hpp"
#include "sparsecc/inspector/spmm_inspector.hpp"
#include "sparsecc/pipeline/pipeline.hpp"

namespace sparsecc::tune {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Built {
  rt::Bundle bundle;
  double seconds = 0;
  std::string error;
};

struct Running {
  std::size_t index = 0;
  std::future<Built> result;
};

}  // namespace

void record_measurement(CandidateTiming& t, const std::function<Measurement()>& measure) {
  Measurement m;
  try {
    m = measure();
  } catch (const std::exception& e) {
    m.error = std::string("run: ") + e.what();
  }
  t.verified = m.verified;
  t.rel_error = m.rel_error;
  t.error = m.error;
  if (m.verified) t.median_us = m.median_us;
}

void tally_timing(TuningRecord& record, const CandidateTiming& t, std::size_t index, bool is_default,
                  std::size_t& best, double& best_us) {
  if (t.verified && t.median_us < best_us) {
    best_us = t.median_us;
    best = index;
  }
  if (is_default && t.verified) record.default_us = t.median_us;
  record.timings.push_back(t);
}

TuneProgress tune_progress(std::size_t done, std::size_t planned, double elapsed_seconds,
                           const CandidateTiming& t, const std::string& best_label, double best_us) {
  TuneProgress p;
  p.done = done;
  p.planned = planned;
  p.elapsed_seconds = elapsed_seconds;
  p.eta_seconds =
      done ? elapsed_seconds / static_cast<double>(done) * static_cast<double>(planned - done) : 0.0;
  p.label = t.label;
  p.verified = t.verified;
  p.median_us = t.median_us;
  p.best_label = best_label;
  p.best_us = best_us;
  return p;
}

rt::Bundle compile_spmm_candidate(const SpmmCandidate& c, const CsrMatrix& a, const GpuTarget& target,
                                  const std::vector<double>& bias) {
  pipeline::SpmmRequest request;
  request.problem = c.plan.problem;
  request.emit = c.emitter;
  request.bias = bias;
  request.long_cuda = pipeline::LongCompile::allow;  // the tuner budgets its compiles itself
  return std::move(*pipeline::compile_spmm_plan(c.plan, a, request, target).bundle);
}

TuningKey spmm_tuning_key(const CsrMatrix& a, const SpmmProblem& problem, const std::string& gpu,
                          const std::string& compute_capability, bool cold_l2) {
  TuningKey key;
  key.op = "spmm";
  key.fingerprint = matrix_fingerprint(a);
  key.params = {{"m", problem.m},
                {"k", problem.k},
                {"n", problem.n},
                {"n_mode", problem.n_mode == SpmmNMode::runtime ? "runtime" : "fixed"},
                {"dtype", dtype_name(problem.dtype)},
                {"bias", problem.bias},
                {"relu", problem.relu}};
  if (cold_l2) key.params["l2"] = "cold";
  key.gpu = gpu;
  key.compute_capability = compute_capability;
  key.generator_version = kVersion;
  return key;
}

bool tuned_cold_l2(const TuningKey& key) {
  const auto it = key.params.find("l2");
  return it != key.params.end() && it->is_string() && it->get<std::string>() == "cold";
}

SpmmProblem spmm_problem_of_key(const TuningKey& key, const CsrMatrix& a) {
  const nlohmann::json& p = key.params;
  SpmmProblem problem;
  try {
    if (key.op != "spmm") throw UsageError("op is " + key.op);
    problem.m = p.at("m").get<std::int64_t>();
    problem.k = p.at("k").get<std::int64_t>();
    problem.n = p.at("n").get<std::int64_t>();
    problem.n_mode = p.at("n_mode").get<std::string>() == "runtime" ? SpmmNMode::runtime : SpmmNMode::fixed;
    problem.dtype = require_dtype(p.at("dtype").get<std::string>(), "dtype", kSpmmDtypes);
    problem.bias = p.at("bias").get<bool>();
    problem.relu = p.at("relu").get<bool>();
  } catch (const std::exception& e) {
    throw UsageError(fmt::format("record {}: not an SpMM problem ({})", key_string(key), e.what()));
  }
  if (problem.m != a.rows || problem.k != a.cols)
    throw UsageError(fmt::format("record {}: the key is for {}x{}, the matrix is {}x{}", key_string(key),
                                 problem.m, problem.k, a.rows, a.cols));
  return problem;
}

std::vector<PredictorSample> predictor_samples(const TuningDatabase& db, std::size_t* stale, bool cold_l2) {
  std::vector<PredictorSample> out;
  for (const TuningRecord& r : db.records) {
    if (tuned_cold_l2(r.key) != cold_l2) continue;
    for (const CandidateTiming& t : r.timings) {
      if (!t.verified || !std::isfinite(t.median_us) || t.features.empty()) continue;
      if (t.options.value("value_mode", std::string()) == "rolled") continue;
      std::vector<double> features;
      try {
        features = features_from_json(t.features);
      } catch (const UsageError&) {
        if (stale) ++*stale;
        continue;
      }
      PredictorSample sample;
      sample.problem = key_string(r.key);
      sample.features = std::move(features);
      sample.median_us = t.median_us;
      sample.plan = spmm_variant_base_label(t.label);
      sample.variant = sample.plan != t.label;
      out.push_back(std::move(sample));
    }
  }
  return out;
}

std::size_t refresh_spmm_features(TuningRecord& record, const CsrMatrix& a, const GpuTarget& target) {
  const SpmmProblem problem = spmm_problem_of_key(record.key, a);
  std::size_t unplanned = 0;
  for (CandidateTiming& t : record.timings) {
    try {
      const SpmmPlan plan = plan_spmm(a, problem, spmm_options_from_json(t.options, SpmmOptions{}).first);
      t.features = features_json(spmm_features(plan, a, target));
    } catch (const UsageError&) {
      t.features = nlohmann::json::object();
      ++unplanned;
    }
  }
  return unplanned;
}

// What the budget expects a rolled candidate's compile to take (NVRTC of a small loop, whatever the
// matrix). Evidence: docs/design/evidence.md#rolled-compile-seconds
constexpr double kRolledCompileSeconds = 1.0;

TuningRecord tune_spmm(const CsrMatrix& a, const SpmmSpace& space, const SpmmSpaceDims& dims,
                       const TuningKey& key, const SpmmBuilder& build, SpmmMeasurer& measurer,
                       const TuneOptions& options, const std::function<void(const TuneProgress&)>& progress) {
  const std::size_t n = space.candidates.size();
  if (n == 0) throw UsageError("tune: the search space has no candidates");
  // Candidates n.. are the winner's register-cap variants, made once the search has settled (a
  // deque: the compile threads hold references into it while it grows).
  std::deque<SpmmCandidate> variants;
  const auto candidate = [&](std::size_t i) -> const SpmmCandidate& {
    return i < n ? space.candidates[i] : variants[i - n];
  };
  constexpr std::size_t none = std::numeric_limits<std::size_t>::max();
  const Predictor& predictor = options.predictor ? *options.predictor : shipped_predictor();
  const Clock::time_point t0 = Clock::now();

  std::vector<std::vector<double>> features;
  features.reserve(n);
  for (const SpmmCandidate& c : space.candidates)
    features.push_back(spmm_features(c.plan, a, options.target));

  std::size_t default_index = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (space.candidates[i].is_default) default_index = i;
  const bool exhaustive = n <= options.exhaustive_limit;
  std::deque<std::size_t> queue{default_index};
  std::vector<char> queued(n, 0);
  queued[default_index] = 1;
  const auto enqueue = [&](std::size_t i) {  // false when it was queued before
    if (queued[i]) return false;
    queue.push_back(i);
    queued[i] = 1;
    return true;
  };
  const std::vector<std::size_t> ranked = rank_candidates(predictor, features);
  for (const std::size_t i : ranked) {
    if (queued[i]) continue;
    if (!exhaustive && queue.size() > options.shortlist) break;
    enqueue(i);
  }
  // Plans of the other kind than the default (rolled or unrolled) as well: the shortlist may hold one
  // kind only, and which kind wins depends on the matrix and on the L2 state the candidates are timed
  // in. The rules' plan of that kind (the space's first of it) and the predictor's first of it.
  const auto is_rolled = [&](std::size_t i) {
    return space.candidates[i].plan.value_mode() == SpmmValueMode::rolled;
  };
  for (std::size_t i = 0; i < n; ++i)
    if (is_rolled(i) != is_rolled(default_index)) {
      enqueue(i);
      break;
    }
  for (const std::size_t i : ranked)
    if (is_rolled(i) != is_rolled(default_index)) {
      enqueue(i);
      break;
    }

  TuningRecord record;
  record.key = key;
  const int jobs =
      options.jobs > 0 ? options.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::deque<Running> running;
  std::size_t done = 0;
  std::size_t best = none;
  double best_us = std::numeric_limits<double>::infinity();
  double round_start_best = best_us;
  bool budget_hit = false;
  bool rolled_swept = false, caps_tried = false, paired = false, clustered = false;
  std::size_t swept = 0, capped = 0, staged = 0, widened = 0;
  // Verified times by candidate (infinite until measured), and the candidates whose neighbourhoods
  // have been queued (local search and wider rounds each start from a candidate once).
  std::vector<double> measured_us(n, std::numeric_limits<double>::infinity());
  std::vector<char> expanded(n, 0);
  std::size_t next_ranked = 0;  // the predictor's ranking, read on by wider rounds
  // Queues the unmeasured neighbours of candidate i, once; whether any was new.
  const auto start_from = [&](std::size_t i) {
    expanded[i] = 1;
    bool any = false;
    for (const std::size_t j : spmm_neighbours(space, i, dims)) any = enqueue(j) || any;
    return any;
  };
  double expected_compile = options.expected_compile_seconds;  // an unrolled candidate's
  double compile_total = 0;
  std::size_t compiled = 0, started = 0;
  const auto rolled = [&](std::size_t i) { return candidate(i).plan.value_mode() == SpmmValueMode::rolled; };
  // Whether the budget lets candidate i start: its compile must end within it (the first compile, the
  // default plan's, always starts). Rolled kernels are small loops and compile in well under a second.
  const auto fits = [&](std::size_t i) {
    return options.budget_seconds <= 0 || started == 0 ||
           seconds_since(t0) + (rolled(i) ? kRolledCompileSeconds : expected_compile) <=
               options.budget_seconds;
  };

  for (;;) {
    // Start queued candidates in order, passing over those whose compile would end past the budget
    // (a cheaper one further on may still fit); the budget is spent when none fits.
    while (running.size() < static_cast<std::size_t>(jobs) && !queue.empty()) {
      const auto next = std::find_if(queue.begin(), queue.end(), fits);
      if (next == queue.end()) {
        budget_hit = true;
        break;
      }
      // With shared slots, the search's first compile in flight is its own; more take shared ones.
      CompileSlots* slot = nullptr;
      if (options.slots && !running.empty()) {
        if (!options.slots->try_acquire()) break;  // all taken: measure what has compiled
        slot = options.slots;
      }
      const std::size_t i = *next;
      queue.erase(next);
      ++started;
      running.push_back({i, std::async(std::launch::async, [&build, c = &candidate(i), slot] {
                           Built b;
                           const Clock::time_point c0 = Clock::now();
                           try {
                             b.bundle = build(*c);
                           } catch (const std::exception& e) {
                             b.error = std::string("compile: ") + e.what();
                           }
                           b.seconds = seconds_since(c0);
                           if (slot) slot->release();
                           return b;
                         })});
    }
    if (running.empty()) {
      // Local search: another round around the best, while the last one improved on it.
      // Neighbours that the budget cannot take are passed over (a rolled best's rolled neighbours
      // compile in a second where its unrolled ones would overrun).
      if (!exhaustive && best < n && best_us < round_start_best && !caps_tried) {
        round_start_best = best_us;
        start_from(best);
        if (std::any_of(queue.begin(), queue.end(), fits)) continue;
      }
      // Settled with budget to spare: a wider round, while one more compile round and the winner's
      // variants still fit. It queues the unmeasured neighbours of the fastest measured candidate
      // not started from yet (another start for local search), or, where those are all measured,
      // the predictor's next picks; a round that finds a faster plan resumes local search there.
      if (!exhaustive && !caps_tried && !budget_hit && options.budget_seconds > 0 &&
          seconds_since(t0) + 2 * std::max(expected_compile, kRolledCompileSeconds) <=
              options.budget_seconds) {
        bool any = false;
        while (!any) {
          std::size_t start = none;
          for (std::size_t i = 0; i < n; ++i)
            if (!expanded[i] && std::isfinite(measured_us[i]) &&
                (start == none || measured_us[i] < measured_us[start]))
              start = i;
          if (start == none) break;
          any = start_from(start);
        }
        if (!any) {  // every measured candidate has been started from
          std::size_t picked = 0;
          for (; picked < std::max<std::size_t>(options.shortlist, 1) && next_ranked < ranked.size();
               ++next_ranked)
            if (enqueue(ranked[next_ranked])) ++picked;
          any = picked > 0;
        }
        if (any) {
          ++widened;
          round_start_best = best_us;
          if (std::any_of(queue.begin(), queue.end(), fits)) continue;
        }
      }
      // The search has settled. Where the budget held unrolled candidates back, the rolled points
      // not yet queued (each compiles in well under a second) get what is left of it, once.
      if (!exhaustive && budget_hit && !rolled_swept) {
        rolled_swept = true;
        for (std::size_t i = 0; i < n; ++i)
          if (rolled(i) && enqueue(i)) ++swept;
        if (std::any_of(queue.begin(), queue.end(), fits)) continue;
      }
      // Last, the winner with more registers, with two columns a thread, with clustered rows and with
      // staged steps (none is a dimension of the space).
      if (!caps_tried && best < n) {
        caps_tried = true;
        std::vector<SpmmCandidate> last = spmm_register_variants(a, space.candidates[best], dims);
        capped = last.size();
        if (auto pair = spmm_pair_variant(a, space.candidates[best], dims)) {
          last.push_back(std::move(*pair));
          paired = true;
        }
        if (auto regrouped = spmm_cluster_variant(a, space.candidates[best], dims)) {
          last.push_back(std::move(*regrouped));
          clustered = true;
        }
        for (SpmmCandidate& v : spmm_stage_variants(a, space.candidates[best], dims)) {
          last.push_back(std::move(v));
          ++staged;
        }
        for (SpmmCandidate& v : last) {
          features.push_back(spmm_features(v.plan, a, options.target));
          variants.push_back(std::move(v));
          queued.push_back(0);
          enqueue(n + variants.size() - 1);
        }
        if (std::any_of(queue.begin(), queue.end(), fits)) continue;
      }
      break;
    }

    Running r = std::move(running.front());
    running.pop_front();
    Built built = r.result.get();
    if (!rolled(r.index)) {  // the estimate is for unrolled compiles
      compile_total += built.seconds;
      expected_compile = std::max(expected_compile, compile_total / static_cast<double>(++compiled));
    }
    const SpmmCandidate& c = candidate(r.index);
    CandidateTiming t;
    t.label = c.label;
    t.options = candidate_json(c);
    t.features = features_json(features[r.index]);
    t.compile_seconds = built.seconds;
    t.median_us = std::numeric_limits<double>::quiet_NaN();
    t.rel_error = std::numeric_limits<double>::quiet_NaN();
    if (!built.error.empty()) {
      t.error = built.error;
    } else {
      record_measurement(t, [&] { return measurer.measure(c, built.bundle); });
    }
    tally_timing(record, t, r.index, c.is_default, best, best_us);
    if (r.index < n && t.verified) measured_us[r.index] = t.median_us;
    ++done;
    if (progress)
      progress(tune_progress(done, done + running.size() + (budget_hit ? 0 : queue.size()), seconds_since(t0),
                             t, best != none ? candidate(best).label : std::string(), best_us));
  }

  const std::size_t winner = best != none ? best : default_index;
  record.winner = candidate(winner).label;
  record.winner_options = candidate_json(candidate(winner));
  record.winner_us = best != none ? best_us : std::numeric_limits<double>::quiet_NaN();
  record.strategy =
      exhaustive ? "exhaustive" : fmt::format("predictor shortlist of {} + local search", options.shortlist);
  if (widened) record.strategy += fmt::format(" + {} wider round{}", widened, widened > 1 ? "s" : "");
  if (swept) record.strategy += fmt::format(" + {} more rolled points", swept);
  if (capped)
    record.strategy +=
        fmt::format(" + the winner at {} higher register cap{}", capped, capped > 1 ? "s" : "");
  if (paired) record.strategy += " + the winner with two columns a thread";
  if (clustered) record.strategy += " + the winner with clustered rows";
  if (staged) record.strategy += fmt::format(" + the winner with staged steps ({})", staged);
  if (budget_hit) {
    const double spent = seconds_since(t0);
    record.strategy +=
        spent < 0.9 * options.budget_seconds
            ? fmt::format(
                  " (stopped after {} of {} candidates at {:.1f} s of the {:.1f} s budget: the "
                  "others' compiles, about {:.0f} s each, would end past it)",
                  done, n, spent, options.budget_seconds, expected_compile)
            : fmt::format(" (budget of {:.1f} s reached after {} of {} candidates)", options.budget_seconds,
                          done, n);
  }
  record.tuning_seconds = seconds_since(t0);
  record.recorded_at = utc_timestamp();
  return record;
}

}  // namespace sparsecc::tune
