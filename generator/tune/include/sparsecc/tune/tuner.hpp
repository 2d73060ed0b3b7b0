// The build-time tuner: compiles the candidates of a search space in parallel on the CPU (a pool of
// `jobs` threads), hands each compiled executor to a measurer (the GPU side: verify against the fp64
// reference on poisoned outputs, then steady-state timing), and records the winner and the full
// timing vector as a tuning-database record.
//
// Strategy: a space of at most `exhaustive_limit` candidates is searched exhaustively. A larger one
// starts with the default plan, the predictor's shortlist (its `shortlist` fastest predictions), and
// two plans of the other kind than the default (rolled or unrolled): the rules' (the space's first
// of that kind) and the predictor's first, then searches locally: the unmeasured neighbours (spmm_neighbours)
// of the best measured candidate, until a round finds nothing faster or the budget is spent. With a
// budget, a search that settles early spends what is left on wider rounds: the neighbours of the
// fastest measured candidate not started from yet, else the predictor's next `shortlist` picks, each
// round followed by local search where it found a faster plan, while one more compile round and the
// winner's variants still fit (so a larger budget comes closer to an exhaustive search; without a
// budget the search stops where it settled). The budget bounds the wall time of the whole search: no
// compile starts that would end past it (by the expected compile time), and the ones running are
// still measured. A candidate counts only when it verified; the default plan
// is always measured first, so every record says how much tuning gained.
#pragma once

#include <cstdint>
#include <functional>
#include <semaphore>
#include <string>
#include <vector>

#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/runtime/bundle.hpp"
#include "sparsecc/tune/database.hpp"
#include "sparsecc/tune/predictor.hpp"
#include "sparsecc/tune/space.hpp"

namespace sparsecc::tune {

// What the measurer reports for one compiled candidate. median_us is meaningful only when verified.
struct Measurement {
  bool verified = false;
  double median_us = 0;
  double rel_error = 0;
  std::string error;  // why it did not verify or could not run
};

// The GPU side of the tuner (implemented over the runtime in tune/measure.hpp; tests use fakes). Called from
// one thread, in the order candidates finish compiling.
class SpmmMeasurer {
 public:
  virtual ~SpmmMeasurer() = default;
  virtual Measurement measure(const SpmmCandidate& candidate, const rt::Bundle& bundle) = 0;
};

// Turns a candidate into its executor bundle (emit + compile); the tuner calls it from its compile
// threads. Throws on failure (the message is recorded). The default is compile_spmm_candidate.
using SpmmBuilder = std::function<rt::Bundle(const SpmmCandidate&)>;

// Compile threads shared by searches that run at once (tune_many tunes several matrices together so that
// one matrix's compiles fill the cores while another's candidates are timed): a search always keeps
// one compile of its own in flight, and each more takes one of `count` shared slots (so searches
// with cheap compiles are never starved by those with long ones).
using CompileSlots = std::counting_semaphore<>;

struct TuneOptions {
  double budget_seconds = 0;  // 0: unlimited
  // Expected wall time of one unrolled candidate's compile (0: unknown). With a budget, a compile
  // that would end past it is not started (the default plan's always is) and the next queued one that
  // fits is (rolled candidates are expected to take a second); the estimate is raised to the mean of
  // the unrolled compiles that finish.
  double expected_compile_seconds = 0;
  int jobs = 0;                             // compile threads; 0: the hardware's
  std::size_t exhaustive_limit = 24;        // spaces up to this size are searched exhaustively
  std::size_t shortlist = 8;                // predictor picks tried first in larger spaces
  GpuTarget target = default_gpu_target();  // what the predictor's features are computed for
  const Predictor* predictor = nullptr;     // nullptr: shipped_predictor()
  // Shared with other searches running at once: beyond its first compile in flight, a compile
  // starts only with a free shared slot (and at most `jobs` in all). nullptr: `jobs` threads of its own.
  CompileSlots* slots = nullptr;
};

struct TuneProgress {
  std::size_t done = 0;     // candidates measured (or failed)
  std::size_t planned = 0;  // done + running + queued
  double elapsed_seconds = 0;
  double eta_seconds = 0;  // from the mean time per candidate so far
  std::string label;       // the candidate just measured
  bool verified = false;
  double median_us = 0;
  std::string best_label;
  double best_us = 0;
};

// Shared by the tuners: runs `measure` (its exceptions become the error "run: ...") and records the
// outcome in `t` (the time only when verified).
void record_measurement(CandidateTiming& t, const std::function<Measurement()>& measure);
// Adds the measured timing `t` of candidate `index` to `record` (its time becomes the default's when
// `is_default` and it verified), and makes it `best` when it verified faster than `best_us`.
void tally_timing(TuningRecord& record, const CandidateTiming& t, std::size_t index, bool is_default,
                  std::size_t& best, double& best_us);
// The progress report after `done` of `planned` candidates, `t` the one just measured.
TuneProgress tune_progress(std::size_t done, std::size_t planned, double elapsed_seconds,
                           const CandidateTiming& t, const std::string& best_label, double best_us);

// The bundle of a candidate: emit_spmm + compile_kernel for `target`, with `bias` (m values or empty).
rt::Bundle compile_spmm_candidate(const SpmmCandidate& c, const CsrMatrix& a, const GpuTarget& target,
                                  const std::vector<double>& bias);

// The database key of an SpMM problem on a GPU: op "spmm", the matrix fingerprint, the problem's
// parameters (m, k, n, n_mode, dtype, bias, relu) and the generator version. Timed with cold L2 (every
// launch on operands and code that the L2 no longer holds; `tune --cold-l2`), the parameters also
// hold "l2": "cold", so such records answer only lookups for cold-L2 deployments.
TuningKey spmm_tuning_key(const CsrMatrix& a, const SpmmProblem& problem, const std::string& gpu,
                          const std::string& compute_capability, bool cold_l2 = false);

// Whether a record's candidates were timed with cold L2 (its key's "l2" parameter).
bool tuned_cold_l2(const TuningKey& key);

// The SpMM problem a key describes (its params), for its matrix a. Throws UsageError naming the key
// when the params are not an SpMM problem's or are for another shape than a's.
SpmmProblem spmm_problem_of_key(const TuningKey& key, const CsrMatrix& a);

// Recomputes the predictor features of every timing of an SpMM record with this build's feature set
// (spmm_features of its options re-planned for a), so that databases recorded before a change of
// the feature set can be fitted again. A timing whose options no longer plan loses its features
// (the fit skips it). Returns how many did.
std::size_t refresh_spmm_features(TuningRecord& record, const CsrMatrix& a,
                                  const GpuTarget& target = default_gpu_target());

// The predictor's samples in a database: every verified timing of an unrolled plan with features,
// grouped by the record's key_string, of the records timed in one L2 state: warm, or with `cold_l2`
// those timed cold (`tune --cold-l2`). Rolled plans are left out (modelled on their own scale, ranked
// only against each other); timings whose features are another feature set's are left out and
// counted in *stale (when given): refresh_spmm_features recomputes them. The winner's variants
// (labels ending in /r{cap} or /c2) are marked as such, with the label of the plan they vary.
std::vector<PredictorSample> predictor_samples(const TuningDatabase& db, std::size_t* stale = nullptr,
                                               bool cold_l2 = false);

// Searches `space` (for A) and returns the record: every measured candidate with its features, the
// winner (the fastest verified; the default when none verified) and the default's time. `progress`,
// when given, is called after every measurement. Throws UsageError for an empty space.
TuningRecord tune_spmm(const CsrMatrix& a, const SpmmSpace& space, const SpmmSpaceDims& dims,
                       const TuningKey& key, const SpmmBuilder& build, SpmmMeasurer& measurer,
                       const TuneOptions& options,
                       const std::function<void(const TuneProgress&)>& progress = {});

}  // namespace sparsecc::tune
