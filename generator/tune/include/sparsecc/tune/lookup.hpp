// How `sparsecc compile --db` (and compile-model --db, hines --db, sparsecc_bench --db) picks its plan: the
// tuning database's recorded winner when a record's key matches the problem (matrix fingerprint, parameters,
// GPU, compute capability, generator version), else the predictor's top choice among the search space, so a
// build machine without a GPU still compiles a well-chosen plan.
#pragma once

#include <cstdint>
#include <string>

#include "sparsecc/emit/emitted_kernel.hpp"
#include "sparsecc/inspector/hines_planner.hpp"
#include "sparsecc/inspector/spmm_inspector.hpp"
#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/neuron/hines.hpp"

namespace sparsecc::tune {

struct TunedChoice {
  SpmmOptions options;
  KernelLanguage emitter = KernelLanguage::ptx;
  std::string how;  // a sentence for the user: where the choice came from
};

// `gpu` names the target GPU ("NVIDIA H100 80GB HBM3"); empty: the GPU of this machine when there is
// one, else any GPU of the compute capability `arch` names (sm_90 -> 9.0). With `cold_l2` only a
// record tuned with cold L2 (`tune --cold-l2`) matches, and without one the choice is `base` (the
// automatic plan), not the predictor's (a model of warm launches). A database that cannot be read
// (corrupt, newer schema) throws InputError naming it (tune::read_database_file); a missing one is
// empty. Without a GPU of its own, the lookup names the target by `arch` alone.
TunedChoice choose_tuned_plan(const std::string& db_path, const CsrMatrix& a, const SpmmProblem& problem,
                              const SpmmOptions& base, KernelLanguage default_emitter,
                              const std::string& arch, const std::string& gpu, bool cold_l2 = false);

struct TunedHines {
  HinesOptions options;
  std::string how;
};

// `sparsecc hines --db`: the recorded winner's planner options (on `base`) when a record's key
// matches the forest and problem on the target GPU (as for choose_tuned_plan), else `base` — the
// planner's rules (there is no Hines predictor).
TunedHines choose_tuned_hines(const std::string& db_path, const HinesSystem& system, std::int32_t rhs,
                              const std::string& dtype, const HinesOptions& base, const std::string& arch,
                              const std::string& gpu);

}  // namespace sparsecc::tune
