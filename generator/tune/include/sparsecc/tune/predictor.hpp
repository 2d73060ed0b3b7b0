// The no-GPU performance predictor: ranks candidate SpMM executor plans of one matrix by an analytic
// estimate of their time on the GPU, without compiling or running them.
//
// Features (spmm_features; finite, non-negative, deterministic, computed from the plan and A alone).
// All but `launch` and `imbalance` are nominal times in microseconds of one hardware limit, from the
// target's figures (GpuTarget: SMs, clock, per SM registers, threads, blocks and shared memory, the
// shared memory reserved per block, the register allocation unit, DRAM and L2 bandwidth; the default
// target, sm_90's row, is the H100 SXM the coefficients were fitted on: 132 SMs at 1.755 GHz; per SM
// 65536 registers, 2048 threads, 32 blocks, 228 KiB of shared memory with 1 KiB reserved per block),
// so that a coefficient near 1 means "this limit alone sets the time". Per thread, a group's path is
// its instructions: the address and load of B for every step, the FMAs (two per entry for half plans summing
// in fp32 and for fp32 plans of two columns a thread), the value loads of streamed plans, its fragments'
// operand loads, B loads, packing and mma, zeroing the accumulators, then group 0's epilogue (the other
// groups' sums, bias, ReLU, store) or the hand-over of groups 1..; a block row's path is its slowest group's.
// Blocks resident per SM come from the registers a thread takes (max_registers rounded up to 8, allocated per
// warp in units of 256; fp32 plans the PTX emitter writes in the split layout take 128, what ptxas gives
// those), block_x and shared_bytes. The busiest SM runs ceil(grid / SMs) blocks (grid = block rows x column
// tiles), in rounds of the resident blocks.
//   launch      1: the launch floor and fixed costs (about 0.9 us at batch 1).
//   bound_us    the instruction-stream bound, max of two limits measured on the H100: latency, the
//               rounds x the mean block row's path at 14 cycles an instruction (unrolled code runs
//               cold: every instruction is fetched once, at about that rate per warp), and supply,
//               the busiest SM's instructions at one a cycle, each group's counted once per SMSP its
//               warps run on (min(ceil(n_tile / 32), 4)).
//   fetch_us    instruction fetch from L2: the code bytes each SM fetches (every block row's code, 16
//               bytes an instruction, is fetched by each of the min(column tiles, SMs) SMs that run
//               it) at 2 bytes a cycle. Big unrolled kernels (MBs of code) are bound by it.
//   issue_us    the busiest SM's warp instructions (warps without a live column skipped) at 4 a cycle.
//   dram_us     compulsory DRAM traffic at the target's DRAM bandwidth (3 TB/s): B and C once,
//               streamed values and fragment operands once.
//   reduce_us   the hand-over of groups 1.. to group 0 through shared memory, for plans that do it:
//               waves x (a 64-cycle barrier + 2 cycles per row and extra group).
//   imbalance   the largest block row's nonzeros over the mean, minus 1 (0 when balanced).
//   l2_us       B read from L2 by the SMs at the target's L2 bandwidth (5.5 TB/s): every step of
//               every group reads its row of B across the columns of each column tile, N columns in
//               all. Short block rows (few rows, so few nonzeros share a row of B) and many groups
//               read B more often.
//
// Terms (spmm_predictor_terms): the predictor's inputs, the features above and, derived from them
// (so stored features need no recomputation), bound_imbalance_us = bound_us x imbalance: the time the
// slowest block row adds to the instruction-stream bound, which takes the mean block row's path; and
// fetch_excess_us = max(0, fetch_us - 10): instruction fetch past what the other work hides. Fetch
// costs little until the code fetched (big unrolled kernels over many column tiles) sets the time,
// then nearly all of it: a linear term alone cannot be both (fitted on ResNet-50 layers of both
// kinds, it ranked the Transformer layers' top 3 right on 38 % instead of 91 %).
// Predicted time: the sum over the predictor's terms of coefficient x term (at least 1e-3 us).
//
// Fit (fit_predictor): non-negative least squares on the relative error of the times and of their
// differences within a problem (what ranking its candidates needs),
//   minimise sum_p (1 / n_p) sum_{i in p} [ r_i^2 + alpha (r_i + d_p / t_i)^2 ] + ridge,  c_j >= 0,
//   r_i = (sum_j c_j x_ij - t_i) / t_i,
// over the coefficients c and a free constant d_p (microseconds) a problem: the first part scores
// the predicted times, the second only their differences within a problem (the constant a problem
// shifts all its candidates by does not change their order). n_p is the number of samples of i's
// problem p, so that every problem counts alike; alpha = 5 (kRankWeight); the ridge is lambda x
// s_j^2 c_j^2 with s_j^2 the weighted mean of the objective's squared j-th column (scale-free) and
// lambda = 1e-4. The d_p are eliminated in closed form (each problem's columns projected off its
// 1 / t_i); the rest is solved by cyclic projected coordinate descent on the normal equations, from
// c = 0 in term order until no coefficient moves by more than 1e-13 of the largest: no randomness,
// the same samples in the same order give bit-identical coefficients. alpha was chosen, with the
// bound_imbalance_us term, by cross-validation over the ResNet-50 timings (problems of one matrix
// shape held out at a time).
//
// The shipped coefficients (generator/tune/data/spmm_predictor.json, compiled in by CMake) are the fit
// of three H100 tuning databases of the DLMC ResNet-50 layers at batch 1 (tests/data/tuning: two at
// 90 %, one at 95 %; 86 problems, 1151 timed unrolled plans), scored on DLMC Transformer layers it
// was never fitted on. Evidence: docs/design/evidence.md#predictor-fit
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/plan/spmm_plan.hpp"
#include "sparsecc/target/target.hpp"

namespace sparsecc::tune {

// The version of the feature set (names, order and meaning); a predictor of another version is
// refused by predictor_from_json. Bump when spmm_features changes.
inline constexpr int kSpmmFeatureVersion = 2;

// Analytic features of one candidate plan for matrix a (all finite, deterministic). Names are stable
// strings, in the order spmm_features returns the values.
std::vector<std::string> spmm_feature_names();
// Computed with `target`'s figures. Throws UsageError when the plan's problem does not match A or it
// has no launch configuration.
std::vector<double> spmm_features(const SpmmPlan& plan, const CsrMatrix& a,
                                  const GpuTarget& target = default_gpu_target());
nlohmann::json features_json(const std::vector<double>& f);  // {name: value}; UsageError on a size mismatch
// The values of an object {name: number} in spmm_feature_names() order (other keys are ignored);
// throws UsageError naming a missing or non-numeric feature.
std::vector<double> features_from_json(const nlohmann::json& j);

// The predictor's terms: the features (spmm_feature_names() order) followed by the derived terms.
std::vector<std::string> spmm_predictor_term_names();
// The terms' values for features in spmm_feature_names() order; UsageError on a size mismatch.
std::vector<double> spmm_predictor_terms(const std::vector<double>& features);

struct Predictor {
  int version = kSpmmFeatureVersion;  // bump when the feature set changes
  std::string fitted_on;              // free text: GPU and data set
  std::int64_t samples = 0;
  std::vector<std::string>
      features;  // term names (spmm_predictor_term_names()), in the order of coefficients
  std::vector<double> coefficients;
  // Sum of coefficient x term for `features` in spmm_feature_names() order (the predictor's terms are
  // computed from them and looked up by name); at least 1e-3 us. Throws UsageError on a size mismatch
  // or an unknown name.
  double predict_us(const std::vector<double>& features) const;
};

// {"version", "fitted_on", "samples", "features": [term names, in order], "coefficients": {name: value}}.
nlohmann::json to_json(const Predictor& p);
// Throws InputError naming `name` and the field: missing or mistyped fields, another version,
// unknown terms, coefficients that are not finite and non-negative.
Predictor predictor_from_json(const nlohmann::json& j, const std::string& name);
// A predictor file (what `sparsecc tune --fit` writes): InputError naming the file, and the byte of a
// JSON syntax error.
Predictor load_predictor(const std::string& path);
// The text of generator/tune/data/spmm_predictor.json, compiled into the library at configure time.
const char* shipped_predictor_json();
// Parsed once from shipped_predictor_json().
const Predictor& shipped_predictor();

// A timed candidate of one problem: `problem` groups candidates of the same matrix and N.
struct PredictorSample {
  std::string problem;
  std::vector<double> features;  // spmm_feature_names() order
  double median_us = 0;
  // The tuner's variants of its winner (a raised register cap, two columns a thread) time a plan of
  // the search space again with a knob the predictor does not choose: `variant` marks them and
  // `plan` names the plan they vary (the label without the variant suffixes; empty: the sample is
  // its own plan).
  bool variant = false;
  std::string plan;
};

// The fit described above over every sample. Throws UsageError for no samples, a sample whose
// features are not the feature set's size or not finite, or a time that is not positive and finite.
Predictor fit_predictor(const std::vector<PredictorSample>& samples, const std::string& fitted_on);

// Indices of candidates sorted by predicted time, fastest first (stable: ties keep input order).
std::vector<std::size_t> rank_candidates(const Predictor& p,
                                         const std::vector<std::vector<double>>& features);

struct PredictorEvaluation {
  std::int64_t problems = 0;
  double top1_within_10pct = 0;
  double top3_contains_best = 0;
  double geomean_top1_over_best = 0;
  // One object a problem, in order of first appearance: problem, candidates, best_us (measured),
  // chosen_us (measured time of the predicted best), ratio (chosen / best), best_rank (1-based place
  // of the measured best, or of the plan it is a variant of, in the predicted order; candidates + 1
  // when it is a variant of no ranked plan), predicted_best_us.
  nlohmann::json per_problem = nlohmann::json::array();
};

// Over problems grouped by `problem` (only those with >= 2 ranked samples): fraction where the
// predicted best's measured time is within 10 % of the measured best; fraction where the predicted
// top-3 contains the measured best (a candidate measured as fast as the best counts); geomean
// slowdown of the top choice. With fold_variants (the default), what the predictor is used for:
// variants are not ranked (it chooses among the search space's plans), the best is the fastest of
// all samples, and a ranked plan whose variant is the best counts as holding it. Without, every
// sample is ranked as a candidate of its own. All 0 when no problem has 2 ranked samples.
PredictorEvaluation evaluate_predictor(const Predictor& p, const std::vector<PredictorSample>& samples,
                                       bool fold_variants = true);

}  // namespace sparsecc::tune
