// Search spaces of the tuner: the plan parameters of one operation, declared as data with validity
// rules, and the candidates they give for one matrix and problem.
//
// SpMM dimensions (sparsecc/inspector/spmm_inspector.hpp): rows per block, n tile, thread groups over
// K, balancing strategy (equal panels or nnz-balanced), value mode (baked, streamed or rolled), emitter
// (direct PTX or CUDA C++; fp32 only has both), and for f16 / bf16 the blocklet configuration (off,
// the inspector's proposal, or a forced tensor-core shape at fill 1 and 0.5). Validity rules:
//   - rows per block at most M and kSpmmMaxAccumulators; n tile at most the warp-rounded columns one
//     block can use (ceil(N / cols_per_thread)); groups * n tile at most 1024 threads;
//   - the plan must build (plan_spmm's own limits: 48 KiB of shared memory, 16-row block rows and
//     whole warps with fragments) and its accumulators fit the 255-register budget;
//   - baked plans only within the code-size budget (estimated instructions <= the inspector's baked
//     budget); the CUDA C++ emitter for fp32 only up to `cuda_max_nnz` nonzeros (NVRTC compile time
//     grows much faster than the PTX route's), except for rolled plans, which are CUDA C++ only, fp32,
//     at N <= rolled_max_n, with equal panels of at most rolled_max_rows rows;
//   - candidates whose plans come out the same (an automatic choice meeting an explicit one) are
//     kept once.
// A default plan of the compressed family has a space of its own: its splits, chunk, block shape
// record formats and layout (records or scatter), one dimension at a time (compressed_* below).
// The first candidate is always the default plan: what `sparsecc compile` builds without a tuning
// database (every option automatic).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sparsecc/emit/emitted_kernel.hpp"
#include "sparsecc/inspector/spmm_inspector.hpp"
#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/plan/spmm_plan.hpp"

namespace sparsecc::tune {

// The values each SpMM dimension may take.
struct SpmmSpaceDims {
  std::vector<std::int32_t> rows_per_block{1, 2, 4, 8, 16, 32};
  std::vector<std::int32_t> n_tile{32, 64, 128, 256};
  std::vector<std::int32_t> groups{1, 2, 4, 8};
  std::vector<SpmmRowSplit> row_split{SpmmRowSplit::equal, SpmmRowSplit::balanced};
  std::vector<SpmmValueMode> value_mode{SpmmValueMode::baked, SpmmValueMode::streamed, SpmmValueMode::rolled};
  std::vector<KernelLanguage> emitter{KernelLanguage::ptx, KernelLanguage::cuda};
  // f16 / bf16 only: "off", "auto", or "BHxBW:FILL".
  std::vector<std::string> blocklets{"off", "auto", "16x8:1", "16x8:0.5", "16x16:0.5", "8x8:0.5"};
  // Compressed defaults (f16 / bf16 layers the rules give the compressed family): the space is the
  // default and these values of one dimension at a time, the others the default's.
  std::vector<std::int32_t> compressed_splits{1, 2, 4, 8, 16};
  std::vector<std::int32_t> compressed_chunk_k{64, 128, 256};
  std::vector<std::int32_t> compressed_stages{3, 4};
  std::vector<std::pair<std::int32_t, std::int32_t>> compressed_shapes{{4, 1}, {4, 2}, {4, 4}, {8, 2}};
  std::vector<std::uint32_t> compressed_formats{0b110u, 0b101u, 0b111u};  // positions, bitmap, all (+ dense)
  std::vector<bool> compressed_layouts{false, true};                      // records, scatter
  std::vector<std::int32_t> compressed_vector_warps{4, 8, 16};            // vector layout: warps a block
  std::vector<std::int32_t> compressed_kept_rounds{1, 2, 4};              // scatter plans only
  std::int64_t cuda_max_nnz = 20000;
  // Rolled plans (fp32, always CUDA C++, any size): only at N <= rolled_max_n, where their loop can
  // beat unrolled code, with equal row panels of at most rolled_max_rows rows (every step multiplies
  // into every row of its block row, so taller block rows multiply mostly zeros).
  std::int64_t rolled_max_n = 64;
  std::int32_t rolled_max_rows = 4;
  // Rolled points of an n tile of 32 at a fixed N above kSpmmStepLaneColumns (where the plan takes one
  // step a warp) up to this N are also tried with step lanes (spmm_step_lanes_for): at N = 16 they ran
  // 0.87-1.19x as fast as one step a warp on six layers, a choice per layer.
  std::int64_t step_lanes_max_n = 16;
  // Registers added to the winner's automatic cap once the search has settled (spmm_register_variants):
  // not a dimension of the space, whose candidates each hold a whole plan, but a last step of the
  // search around its best point.
  std::vector<std::int32_t> register_headroom{16, 32};
  // Also the winner with two adjacent columns a thread (spmm_pair_variant) and with clustered rows
  // (spmm_cluster_variant), in the same last step.
  bool try_column_pairs = true;
  bool try_clustered_rows = true;
  // And with staged steps (spmm_stage_variants): one candidate for each of these least entries of a
  // staged step (the ASpT-style choice: dense column segments through shared memory, or plain loads).
  std::vector<std::int32_t> stage_min_entries{1, 2};
};

// One point of the space.
struct SpmmCandidate {
  std::string label;    // the plan it gives, e.g. "R4/T64/G1/equal/baked/ptx" (+ "/bl:16x8:0.5")
  SpmmOptions options;  // reproduce `plan`: the automatic tiling of the default made explicit
  KernelLanguage emitter = KernelLanguage::ptx;
  bool is_default = false;
  SpmmPlan plan;  // plan_spmm(a, problem, options)
};

struct SpmmSpace {
  std::vector<SpmmCandidate> candidates;                      // the default plan first
  std::vector<std::pair<std::string, std::string>> rejected;  // (point, the rule it breaks)
  std::int64_t points = 0;                                    // points enumerated before the rules
};

// The space for A and `problem`. `base` carries what the user fixed (kernel name, accumulation,
// register cap, ...); the dimensions override its tiling, split, value mode and blocklets. The
// default candidate is plan_spmm(a, problem, base) with the emitter `default_emitter`; next comes the
// rules' plan of the other kind (`base` with rolled values when the default is unrolled, fp32 and
// N <= rolled_max_n; with baked values when it is rolled), where the dimensions hold that value mode.
SpmmSpace spmm_space(const CsrMatrix& a, const SpmmProblem& problem, const SpmmOptions& base,
                     KernelLanguage default_emitter, const SpmmSpaceDims& dims = {});

// The label of a plan built with `emitter`: "R{rows per block}/T{n tile}/G{groups}/{split}/{values}/
// {emitter}" (+ "/bl:{blocklets}" for f16 / bf16). `rows_per_block` > 0 names the requested rows per
// block (a balanced plan's tallest block row may be taller), else the plan's.
std::string spmm_label(const SpmmPlan& plan, KernelLanguage emitter, std::int32_t rows_per_block = 0);

// The options that reproduce a candidate, as JSON: the options codec (sparsecc/inspector/options_json.hpp;
// rows_per_block, n_tile, groups, row_split, value_mode, blocklets, accumulate, max_registers, ...)
// and the emitter; and back, where a record must state rows_per_block, n_tile, groups, row_split,
// value_mode and emitter, and absent blocklets are off. spmm_options_from_json throws UsageError
// naming the field.
nlohmann::json candidate_json(const SpmmCandidate& c);
std::pair<SpmmOptions, KernelLanguage> spmm_options_from_json(const nlohmann::json& j,
                                                              const SpmmOptions& base);

// The dimensions, the candidates (label, default flag) and the rejected points with their rules.
nlohmann::json to_json(const SpmmSpace& space, const SpmmSpaceDims& dims);

// The winner `c` again with a higher register cap, one candidate for each of dims.register_headroom
// (added to c's cap): only unrolled fp32 plans of the PTX emitter (the one that caps registers), and
// only caps that change what the assembler is given (at most the target's registers a thread, and for the
// split layout what a block fits). Labels end in "/r{cap}"; the options carry the cap.
std::vector<SpmmCandidate> spmm_register_variants(const CsrMatrix& a, const SpmmCandidate& c,
                                                  const SpmmSpaceDims& dims);

// The winner `c` with two adjacent columns a thread (SpmmOptions::cols_per_thread 2) and the same rows,
// n tile, groups and split, when dims.try_column_pairs and the plan can take it: an unrolled fp32 plan
// at a fixed even N within the baked code budget (the pair's FMAs are twice as many). It helps only
// the largest layers at wide N, so it is a tuning choice, not an automatic one. Label: c's + "/c2".
// Evidence: docs/design/evidence.md#tune-two-columns-a-thread
std::optional<SpmmCandidate> spmm_pair_variant(const CsrMatrix& a, const SpmmCandidate& c,
                                               const SpmmSpaceDims& dims);

// The winner `c` with its rows regrouped (SpmmRowSplit::clustered: equal panels of c's panel height
// whose rows share columns; same n tile, groups and value mode), when dims.try_clustered_rows and c is
// an unrolled fp32 plan of one column a thread that builds that way within c's budget. It gains on
// some problems and loses on others, so it is a tuning choice. Label: c's + "/clu" (its options
// record the split as clustered). Evidence: docs/design/evidence.md#tune-clustered-rows
std::optional<SpmmCandidate> spmm_cluster_variant(const CsrMatrix& a, const SpmmCandidate& c,
                                                  const SpmmSpaceDims& dims);

// The winner `c` with staged steps (SpmmOptions::stage_min_entries, SpmmPlan: B of the steps with at
// least that many nonzeros copied to shared memory with cp.async at the start of each group), one
// candidate for each of dims.stage_min_entries that stages something: unrolled fp32 plans only (the
// same tiling, split, value mode and register cap). It gains on few problems, so it is a tuning
// choice. Label: c's + "/st{N}". Evidence: docs/design/evidence.md#tune-staged-steps
std::vector<SpmmCandidate> spmm_stage_variants(const CsrMatrix& a, const SpmmCandidate& c,
                                               const SpmmSpaceDims& dims);

// The label of the space's plan that a variant of it (spmm_register_variants, spmm_pair_variant,
// spmm_cluster_variant, spmm_stage_variants) times again: `label` without their suffixes (/r{cap},
// /c2, /clu, /st{N}); a plan's own label is returned as is.
std::string spmm_variant_base_label(const std::string& label);

// Candidates differing from `c` in one dimension by one step (the next or previous value of one
// list of `dims`), that are in `space`: the neighbourhood of local search. Indices into
// space.candidates.
std::vector<std::size_t> spmm_neighbours(const SpmmSpace& space, std::size_t c, const SpmmSpaceDims& dims);

}  // namespace sparsecc::tune
