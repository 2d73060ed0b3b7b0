// Tuning many matrices in one run (`sparsecc tune MATRIX... | --suite | --model`), and the work on
// tuning databases that spans records: refreshing their predictor features and collecting the
// predictor's samples.
//
// The scheduler: the budget of the run is shared in proportion to the matrices' weights (their
// nonzeros plus a fixed share for the measurements, as compile time grows with the nonzeros), and
// `matrices_at_once` searches run together: their compiles share the compile threads (each search keeps
// one compile of its own in flight, the rest take shared slots, tuner.hpp's CompileSlots), so that one
// matrix's compiles keep the cores busy while another's candidates are timed; the GPU times one
// candidate at a time (SerialMeasurer). Each matrix's share is its weight's part of what is left of the
// budget when it starts, times the matrices that run beside it; the compile time per nonzero measured
// so far becomes the next search's expected compile time.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "sparsecc/emit/emitted_kernel.hpp"
#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/plan/spmm_plan.hpp"
#include "sparsecc/tune/database.hpp"
#include "sparsecc/tune/predictor.hpp"
#include "sparsecc/tune/space.hpp"
#include "sparsecc/tune/tuner.hpp"

namespace sparsecc::tune {

// One matrix of a run, loaded, with the problem it is tuned for.
struct TuneJob {
  std::string name;  // for progress and results
  CsrMatrix a;
  SpmmProblem problem;
  std::vector<double> bias;  // problem.m values, or empty
};

// A matrix's weight in the shared budget: its nonzeros plus 20,000 (the measurements' share).
double tune_weight(const CsrMatrix& a);

// How many searches run at once: `requested`, at least 1, at most the matrices and the compile threads
// (each search keeps a compile of its own in flight).
std::size_t searches_at_once(int requested, std::size_t matrices, int compile_threads);

// The budget of the search of matrix i when `left` seconds are left and matrices i, i + 1, ... are still
// to start: left * weights[i] / (the weights from i on) * (the searches that run beside it, at most
// at_once), at least 0.1 s and at most `left`.
double budget_share(double left, const std::vector<double>& weights, std::size_t i, std::size_t at_once);

// Serializes the measurements of searches that run at once: the GPU times one candidate alone.
class SerialMeasurer : public SpmmMeasurer {
 public:
  SerialMeasurer(SpmmMeasurer& inner, std::mutex& gpu) : inner_(inner), gpu_(gpu) {}
  Measurement measure(const SpmmCandidate& candidate, const rt::Bundle& bundle) override;

 private:
  SpmmMeasurer& inner_;
  std::mutex& gpu_;
};

struct TuneManyOptions {
  TuneOptions search;         // each search's: jobs (compile threads, 0: the hardware's), arch, limits
  double budget_seconds = 0;  // the whole run's wall clock, from `start`; 0: unlimited
  int matrices_at_once = 3;   // searches at once (searches_at_once bounds it)
  SpmmSpaceDims dims;         // the search spaces'
  SpmmOptions base;           // the options every candidate starts from
  KernelLanguage default_emitter = KernelLanguage::ptx;
  std::string gpu;  // the records' key: the device name and compute capability ("9.0")
  std::string compute_capability;
  bool cold_l2 = false;  // the records' key says the candidates were timed with cold L2
  std::string database;  // updated with each record as its search ends (empty: not written)
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();  // the budget's clock
};

// One search's end, as tune_many reports it.
struct TunedJob {
  std::size_t index = 0;                 // into the jobs
  const TuningRecord* record = nullptr;  // valid during the call
  std::size_t space_size = 0;            // candidates in its search space
  std::vector<std::string> warnings;     // of the database update
};

struct TuneManyResult {
  std::vector<TuningRecord> records;  // in the jobs' order
  std::size_t compared = 0;           // records with a verified winner and a verified default
  double geomean_speedup = 1;         // of the default's time over the winner's, over those
  double seconds = 0;                 // since options.start
};

// The measurer of one job (the GPU side); tune_many makes it, and destroys it, under the GPU lock.
using SpmmMeasurerFactory = std::function<std::unique_ptr<SpmmMeasurer>(const TuneJob& job)>;
// A candidate's bundle for a job; empty: compile_spmm_candidate for options.search.arch and the job's bias.
using SpmmJobBuilder = std::function<rt::Bundle(const TuneJob& job, const SpmmCandidate& candidate)>;

struct TuneManyCallbacks {
  // After every measurement of job `index`'s search; searches that run at once call it from their own
  // threads, possibly at the same time.
  std::function<void(std::size_t index, const TuneProgress& progress)> progress;
  // When job `index`'s search has ended and its record is in the database; one call at a time.
  std::function<void(const TunedJob& tuned)> tuned;
};

// Tunes every job (tune_spmm over its spmm_space), the records keyed for options.gpu and
// options.compute_capability. The first exception of a search stops the run: no further search starts,
// the running ones end, and it is rethrown.
TuneManyResult tune_many(const std::vector<TuneJob>& jobs, const TuneManyOptions& options,
                         const SpmmMeasurerFactory& make_measurer, const TuneManyCallbacks& callbacks = {},
                         const SpmmJobBuilder& build = {});

// `tune --refresh-features`: what refresh_features did.
struct RefreshResult {
  std::vector<std::string> damaged;   // the database could not be read: nothing was refreshed or written
  std::size_t database_records = 0;   // records in the database
  std::size_t matrices = 0;           // distinct matrices given (by fingerprint)
  std::size_t refreshed = 0;          // SpMM records of those matrices: recomputed and merged back
  std::size_t timings = 0;            // their timings
  std::size_t unplanned = 0;          // of those, whose options no longer plan (left without features)
  std::size_t other = 0;              // records left as they were (no matrix given, or not SpMM)
  std::vector<std::string> warnings;  // of the update
};

// Recomputes the predictor features of every SpMM timing of the records of `db_path` whose matrix is
// among `matrices` (refresh_spmm_features) and merges those records back (update_database). A database
// that loads with warnings is reported as damaged and left alone; with no record of the matrices,
// nothing is written (refreshed == 0).
RefreshResult refresh_features(const std::string& db_path, const std::vector<CsrMatrix>& matrices);

// The predictor's samples of several databases (predictor_samples of each, in order, records timed
// warm or, with `cold_l2`, cold), and a warning for each database whose timings hold another version's
// features (they are left out).
struct DatabaseSamples {
  std::vector<PredictorSample> samples;
  std::vector<std::string> warnings;
};
DatabaseSamples database_samples(const std::vector<std::string>& databases, bool cold_l2);

}  // namespace sparsecc::tune
