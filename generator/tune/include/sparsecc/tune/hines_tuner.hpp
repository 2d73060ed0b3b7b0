// Tuning the Hines solver of one forest on a GPU: every candidate of its search space (hines_space.hpp
// — small, so searched exhaustively) compiled in parallel, verified and timed by a measurer, and the
// record for the tuning database; and how a record's winner becomes the planner's options again.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "sparsecc/inspector/hines_planner.hpp"
#include "sparsecc/neuron/hines.hpp"
#include "sparsecc/runtime/bundle.hpp"
#include "sparsecc/tune/database.hpp"
#include "sparsecc/tune/hines_space.hpp"
#include "sparsecc/tune/tuner.hpp"

namespace sparsecc::tune {

// The GPU side (tune/measure.hpp implements it over the runtime; tests use fakes). Called from one thread.
class HinesMeasurer {
 public:
  virtual ~HinesMeasurer() = default;
  virtual Measurement measure(const HinesCandidate& candidate, const rt::Bundle& bundle) = 0;
};

// Turns a candidate into its bundle; called from the compile threads. Default: compile_hines_candidate.
using HinesBuilder = std::function<rt::Bundle(const HinesCandidate&)>;

// The bundle of a candidate: compile_hines for target.arch.
rt::Bundle compile_hines_candidate(const HinesCandidate& c, const HinesSystem& system,
                                   const GpuTarget& target);

// The planner options a candidate differs in: {"decomposition", "k", "k_large", "depth", "block_threads",
// "code"} (the options codec, sparsecc/inspector/options_json.hpp).
nlohmann::json hines_options_json(const HinesOptions& o);
// `base` with the fields of `j` applied; InputError naming `name` for a malformed field.
HinesOptions hines_options_from_json(const nlohmann::json& j, HinesOptions base, const std::string& name);

// The database key of a Hines problem on a GPU: op "hines", the fingerprint of the system (that of
// its bundles), the parameters (rows, cells, rhs, dtype) and the generator version.
TuningKey hines_tuning_key(const HinesSystem& system, std::int32_t rhs, const std::string& dtype,
                           const std::string& gpu, const std::string& compute_capability);

// Measures every candidate of `space` (the default first; compiles in parallel, options.jobs
// threads; no compile starts past options.budget_seconds except the default's) and returns the
// record: the winner is the fastest verified candidate, else the default. UsageError for an empty space.
TuningRecord tune_hines(const HinesSpace& space, const TuningKey& key, const HinesBuilder& build,
                        HinesMeasurer& measurer, const TuneOptions& options,
                        const std::function<void(const TuneProgress&)>& progress = {});

}  // namespace sparsecc::tune
