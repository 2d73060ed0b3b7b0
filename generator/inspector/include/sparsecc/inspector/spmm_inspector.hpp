// The SpMM inspector: reads a fixed sparse A and a problem shape and builds the executor plan
// (sparsecc/plan/spmm_plan.hpp). Every option left at 0 / automatic is chosen by a fixed rule, one
// named decision each (sparsecc/inspector/spmm_decisions.hpp; the measurements behind them:
// docs/design/spmm-plan-evidence.md):
//   rows_per_block Ny = the most of 16, 8, 4, 2, 1 that still gives a grid of 100 blocks, capped at
//                  M (1 for rolled plans); 32 for fp32 unrolled plans of one column a thread with
//                  nnz x N of 10M or more whose 32-row grid still has 100 blocks (tall plans), whose
//                  rows are clustered (row_clusters.hpp) at N > 1024 where the clustered panels load
//                  at most 90 % of the equal panels' rows of B; at least ceil(M / the target's grid y limit)
//                  in every case, so that the block rows fit the grid;
//   n_tile T       = 64 for N > 1024, else N rounded up to a warp, at most 128; fp32
//                  unrolled plans of at most 40,000 nonzeros take 64 instead of 128 where that gives
//                  taller block rows that still hold 256 nonzeros;
//   groups Gy      = 4 when a block row holds 256 nonzeros on average, else 1; fewer while the block
//                  would pass 1024 threads (256 above 40,000 nonzeros, 512 in a one-wave grid: at most one
//                  block an SM of the target) or the reduction buffer of the tallest block row the target's
//                  shared memory a block (48 KiB); where Gy > 1 and the threads spent on columns instead (an
//                  n tile of up to 256) still give a grid of 200 blocks, they are; above 40,000 nonzeros,
//                  where the widest tile's grid is one wave more than half full, it takes that tile and the
//                  one-wave groups;
//   row split      = equal row panels, but balanced by nonzeros (each block row at most 2 * Ny rows)
//                  for fp32 unrolled plans at N < 4096 with Ny >= 4 whose heaviest equal panel holds
//                  35 % more nonzeros than the mean and none of which is empty; `balanced` / `equal` options
//                  force either; `clustered` (never automatic; fp32 unrolled plans) takes equal panels of the
//                  rows regrouped by cluster_rows (sparsecc/inspector/row_clusters.hpp) into the plan's
//                  row_order;
//   value mode     = rolled for fp32 layers of at least 50,000 nonzeros, 48 a row on average, at
//                  N <= 64 (their unrolled code, megabytes fetched for one column tile, sets the
//                  time); else baked when the estimated instructions (B loads + FMAs) are at most
//                  baked_instruction_budget, else streamed. Rolled plans take two columns a thread,
//                  one row per block row and the groups (4..16) that bring the grid to about 4096
//                  warps (fewer where their reduction buffer would not fit the target's shared memory a
//                  block), unless the options say otherwise;
//   staging        = none; `stage_min_entries` stages the dense steps of every group, as many as
//                  the slots hold (at most kSpmmMaxStageSlots, and what fits the target's shared memory
//                  beside the reduction buffer), and like clustered rows keeps an automatic value mode
//                  unrolled.
// Half precision (problem dtype f16 / bf16): the same rules with every thread owning two columns
// (the n tile is chosen for ceil(N / 2) threads) and fp32 accumulation unless `accumulate` names the
// dtype. Blocklets (half only): `auto` asks propose_blocklets for the tensor-core shapes (16x8,
// 16x16, 8x8) and keeps the cheapest estimate when it saves at least 5 % over the unrolled path;
// `forced` takes the given shape and fill threshold. With tiles the plan takes block rows of 16 rows
// (equal split), n tiles of whole warps (automatic: one warp for N > 32768, else the rule above), one
// group unless `groups` says otherwise, and one fragment per distinct 16-row x fragment_k block of
// tiles (8x8 tiles at rows 0 and 8 of a block row share one fragment). Plans needing more shared
// memory than the target gives a block (GpuTarget::shared_per_block) are refused.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "sparsecc/common/error.hpp"
#include "sparsecc/inspector/blocklets.hpp"
#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/plan/spmm_plan.hpp"

namespace sparsecc {

enum class SpmmBlockletMode { off, automatic, forced };
// Programmatic dependent launch (SpmmPlan::programmatic and programmatic_trigger): none; the wait for
// the predecessor alone; the wait and the early launch of the next grid.
enum class SpmmProgrammatic { off, wait, trigger };

// Compressed plans (value mode compressed): 0 / empty is the rule's choice.
struct SpmmCompressedOptions {
  std::int32_t warps = 0;                     // warps a block
  std::int32_t strips_per_warp = 0;           // 16-row strips a warp
  std::int32_t chunk_k = 0;                   // columns of A a block stages at a time (a multiple of 64)
  std::int32_t splits = 0;                    // blocks of a cluster splitting a row block's K (1..8)
  std::int32_t stages = 0;                    // chunks in shared memory at once (2..8)
  std::optional<std::uint32_t> formats;       // allowed record formats (bit 1 << SpmmRecordFormat)
  std::optional<std::int32_t> bitmap_weight;  // decode weights of the format choice (SpmmCompressedBody)
  std::optional<std::int32_t> position_weight;
  std::optional<bool> scatter;   // the scatter layout (SpmmCompressedBody::scatter)
  std::int32_t kept_rounds = 0;  // list rounds a warp keeps (SpmmCompressedBody::kept_rounds); 0: automatic
  std::optional<bool> vector;    // the vector layout (SpmmCompressedBody::vector); empty: the rule's
  bool operator==(const SpmmCompressedOptions&) const = default;
};
// Asks for the layout that `layout` names (spmm_compressed_layout's words); false, and `o` as it was,
// for another word.
bool set_compressed_layout(SpmmCompressedOptions& o, std::string_view layout);

struct SpmmOptions {
  std::int32_t rows_per_block = 0;  // Ny; 0: automatic
  std::int32_t n_tile = 0;          // T; 0: automatic
  std::int32_t groups = 0;          // Gy; 0: automatic
  // Columns of C a thread computes: 0 automatic; 2 only for unrolled fp32 plans at a fixed even N
  // (adjacent pairs, one 64-bit load of B a step); f16 / bf16 and rolled plans always take 2.
  std::int32_t cols_per_thread = 0;
  // Rolled plans: lanes of a warp that take different steps (SpmmPlan::step_lanes), a power of two
  // in 1..32; 0: automatic (32 / N rounded up to a power of two for a rolled plan at a fixed N of
  // at most kSpmmStepLaneColumns, 8, whose n tile is automatic or 32 and columns a thread automatic;
  // else 1).
  std::int32_t step_lanes = 0;
  std::int32_t max_registers = 0;  // assembler register cap; 0: automatic
  // Staged steps (fp32 unrolled plans; never automatic): steps whose k holds at least this many
  // nonzeros of the block row copy their B values to shared memory with cp.async at the start of
  // the group (SpmmPlan::stage_min_entries); 0: none.
  std::int32_t stage_min_entries = 0;
  // ptxas -O level 0..3; empty: 3
  std::optional<std::int32_t> assembler_opt_level;
  std::optional<SpmmRowSplit> row_split;           // empty: the rule (equal, balanced or clustered)
  std::optional<SpmmValueMode> value_mode;         // empty: automatic
  std::int64_t baked_instruction_budget = 524288;  // about 8 MB of SASS at 16 bytes an instruction
  std::string kernel_name = "sparsecc_spmm";
  std::optional<DType> accumulate;  // half plans: f32 (empty) or the dtype
  SpmmBlockletMode blocklets = SpmmBlockletMode::off;
  BlockShape blocklet_shape{16, 8};  // forced mode
  double blocklet_fill = 1.0;        // forced mode: the fill threshold
  // Empty: the rule (every plan waits; fp32 plans rolled or unrolled of at most
  // kSpmmProgrammaticTriggerInstructions also trigger; f16 / bf16 plans never trigger).
  std::optional<SpmmProgrammatic> programmatic;
  SpmmCompressedOptions compressed;  // compressed plans; n_tile above is their columns of C a block
};

// The programmatic mode of the command line: "auto" (empty), "off", "wait" or "trigger". Throws
// UsageError naming `what` on another word.
std::optional<SpmmProgrammatic> parse_programmatic(const std::string& word, const std::string& what);

// Sets the blocklet fields of `o` from "off", "auto" or "BHxBW:FILL" (FILL in (0, 1], e.g. 16x8:0.75;
// "BHxBW" alone means fill 1). Throws UsageError naming the text otherwise, or for a shape that
// tensor cores cannot take (16x8, 16x16, 8x8).
void set_blocklets(SpmmOptions& o, const std::string& spec);

// The shapes plan_spmm takes on `target`, as a sentence: 1 to spmm_max_rows(target) rows, at least one
// column.
std::string spmm_shape_rule(const GpuTarget& target = default_gpu_target());

// Throws InputError at `where` (the file A came from) when plan_spmm cannot take A's shape: no rows,
// no columns, or more than spmm_max_rows(target) rows. Commands call it right after loading A.
void require_spmm_matrix(const CsrMatrix& a, const SourceLocation& where,
                         const GpuTarget& target = default_gpu_target());

// Throws UsageError when A has no rows or columns or more than spmm_max_rows(target) rows, when the problem
// does not match A, when explicit rows_per_block make more than the target's grid y limit of block rows, when
// Ny exceeds kSpmmMaxAccumulators, or when T * Gy exceeds 1024 threads. The target supplies the hardware
// figures the rules read: SM count, shared memory and registers a block or thread may take, grid limits
// (default_gpu_target(): an H100, sm_90).
SpmmPlan plan_spmm(const CsrMatrix& a, const SpmmProblem& problem, const SpmmOptions& options = {},
                   const GpuTarget& target = default_gpu_target());

}  // namespace sparsecc
