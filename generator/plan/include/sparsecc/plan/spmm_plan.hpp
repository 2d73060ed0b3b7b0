// The SpMM executor plan: plain data that fully determine one SparseRT-style kernel for a fixed sparse
// A (M x K) times a dense B (K x N), C = A*B (+bias[row]) (ReLU), in fp32 or with 16-bit B and C.
// A plan is made of parts, each described at its struct below:
//
//   SpmmPlan
//   ├── problem    SpmmProblem       what is computed: shapes, N fixed or at run time, bias, ReLU, dtype
//   ├── layout     SpmmLayout        common to every family: block rows, groups, row order, grid
//   ├── body       SpmmBody          one executor family's own data (std::variant, below):
//   │                                  SpmmUnrolledBody  straight-line code (baked / streamed values,
//   │                                                    staged steps)
//   │                                  SpmmRolledBody    a loop over a step table (step lanes)
//   ├── fragments  optional<SpmmFragments>  tensor-core fragments (half plans with blocklets)
//   ├── epilogue   SpmmEpilogue      bias, ReLU, accumulation type, rounding of C
//   └── hints      SpmmCodegenHints  kernel name, register cap, assembler level, programmatic launch
//
// Why a variant for the body: the families share the layout and the epilogue but nothing else, and a
// field of one family is meaningless in another (a rolled plan has no packed order, an unrolled plan
// no step lanes). With std::variant a plan holds exactly one body, check_plan need not test that the
// other families' fields are at rest, and a new family (a compressed half-precision tensor-core body,
// condensed windows, ...) joins as one struct, one alternative of SpmmBody and one enumerator of
// SpmmFamily (in the variant's order); the compiler then names every std::visit that must learn it.
// Code common to several families reads a body through the plan's views (value_mode(), step_lanes(),
// stage_slots(), ...), which give the neutral value for the other families; a family's own emitter
// reads its body directly.
//
// ---- Layout (SpmmLayout) ----
// Grid (ceil(n / block_columns), layout.blocks.size()): column tiles along x, so that consecutive
// blocks run the same block row's code; block (groups * n_tile). Block row b (blockIdx.y) owns rows
// [row_begin, row_end) of C (positions of row_order in clustered plans); inside it thread group g
// (threadIdx.x / n_tile) owns a contiguous, nnz-balanced range of k and thread t of the group owns
// output column blockIdx.x * n_tile + t. A group runs its steps in order: load B[k][col] once, then
// one FMA per entry into accumulator `row`. Groups 1.. hand their partial sums to group 0 through
// shared memory (added in group order), then group 0 runs the epilogue and stores.
//
// ---- Unrolled body (SpmmUnrolledBody) ----
// Value order: entry.value_index indexes the CSR value array of A. The emission order is blocks,
// then groups, then steps, then entries; in streamed mode the kernel reads values[p] for the p-th
// entry in that order, and packed_order[p] is the CSR index of that value.
//
// Staged steps (ASpT-style dense column segments, fp32 unrolled plans only): a step whose k holds at
// least stage_min_entries nonzeros of its block row is "dense"; the first stage_slots dense steps of
// each group are staged. At the start of its group a thread copies its own B[k][col] of every staged
// step into its slot of shared memory with cp.async (in commits of kSpmmStageChunk steps, so they
// are all in flight at once, holding no registers), then runs its steps in order as before: a
// staged step waits for its commit and reads the slot instead of loading B. The arithmetic, and so
// every result bit, is the unstaged plan's. Slot j of thread x (threadIdx.x) is the cols_per_thread
// floats at spmm_stage_offset + (j * block_x + x) * 4 * cols_per_thread bytes: consecutive threads,
// consecutive words (no bank conflicts), and no thread reads another's slot (no barrier).
//
// ---- Rolled body (SpmmRolledBody; fp32 only) ----
// The same block rows, groups and steps, but the kernel is a loop over a step table instead of
// straight-line code, so its size does not grow with A (an unrolled kernel of 100k+ nonzeros is
// megabytes of code that every SM fetches while it runs; at small N that fetch sets the time). Every
// thread owns two columns, blockIdx.x * 2 T + t and + T (cols_per_thread 2, coalesced per warp). The
// `values` array is the table (spmm_rolled_table): a header of block_rows * groups + 1 int32 record
// indices (where each (block row, group) begins, padded to a multiple of 4 words), then one record a
// step of spmm_rolled_record_words words: the step's k (int32), then one weight per row of the block
// row (0 for rows without an entry), padded with zeros. Integer words are stored as their bit
// patterns. A step multiplies B[k] into every row of its block row, zeros included: the sums equal
// the unrolled ones (adding x * 0 changes at most the sign of a zero), but a non-finite B[k] reaches
// every row of the block row, not just the rows with an entry at k.
//
// Step lanes (rolled plans at small N, step_lanes > 1): each group is one warp (n_tile 32) whose
// lanes form step_lanes slots of 32 / step_lanes column lanes (one column a thread, cols_per_thread
// 1; a block covers 32 / step_lanes columns). Slot s runs the group's steps s, s + step_lanes, ...,
// each from zero, so a row's nonzeros are spread over the lanes (at N = 1 a warp is a CSR-vector
// SpMV) instead of running one after another in a lane of its own column. The slots' sums are then
// added pairwise (slot 0 + slot 1, slot 2 + slot 3, then those pairs, ...: a butterfly of shuffles)
// before the groups' reduction. Same table as every rolled plan.
//
// ---- Tensor-core fragments (SpmmFragments; half unrolled plans with blocklets) ----
// A plan may take dense tiles of A out of the unrolled path (sparsecc/inspector/blocklets.hpp). Such
// plans have block rows of exactly 16 rows and groups of whole warps; every block row lists its
// fragments: 16 x fragment_k sub-matrices of A at column k (rows of the block row beyond its end, and
// columns beyond K, are zero). Group g takes an equal, contiguous share of them
// (spmm_group_fragments). Its warp w multiplies each by B[k .. k + fragment_k) [the warp's 64
// columns] with mma.sync m16n8k{fragment_k} (fp32 accumulation) into a 16 x 64 fp32 tile of its own.
// The epilogue adds the groups' tiles, in group order, after the unrolled path's partial sums (a block
// row without unrolled nonzeros stores straight from group 0's tile). Fragment operands differ from
// lane to lane, so they cannot be literals of SIMT code: the kernel reads them from the `fragments`
// array (16 * fragment_k / 2 words of packed pairs each, in lane order: one 8- or 16-byte load per
// lane), whatever the value mode of the unrolled path.
//
// ---- Convolution (SpmmProblem::conv) ----
// The same plans compute a convolution without im2col (sparsecc/runtime/conv_geometry.hpp): column
// `col` of the product is output pixel p = col % N, (oy, ox) = (p / OW, p % OW), of image col / N (the
// kernel's columns are the batch's pixels: its run-time n is the images times N), and step k
// = (i * kh + dy) * kw + dx reads X at channel i, row oy * sh - pt + dy, column ox * sw - pl + dx: a
// thread's pointer to its pixel's corner plus an offset fixed by k (a literal of unrolled code; a
// rolled kernel derives it from the table's k), where the tap dy * kw + dx is inside the image. A
// thread's taps inside the image form a mask computed once; a column tile whose pixels have every
// tap inside (an interior tile) runs without the test in rolled code. C's row r of column col is
// Y[image, r, oy, ox] in the layout. Families: fp32 unrolled (one column a thread, no staged steps,
// CUDA C++) and rolled (groups of whole warps, no step lanes).
//
// ---- Epilogue (SpmmEpilogue) ----
// Half precision (dtype f16 or bf16): B and C hold 16-bit values, the weights are A's values rounded
// to the dtype, and every thread owns two adjacent columns (cols_per_thread 2), loading one 32-bit
// pair of B per step. `accumulate` is f32 (each pair is widened and takes two fp32 FMAs: exact
// products, fp32 sums) or the dtype itself (one paired f16x2 / bf16x2 FMA per entry, sums rounded to
// the dtype). The epilogue runs in fp32: partial sums, tensor-core results, bias, ReLU, then one
// rounding to `output` (the dtype) per output.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "sparsecc/common/dtype.hpp"
#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/runtime/compressed_stream.hpp"
#include "sparsecc/runtime/conv_geometry.hpp"

namespace sparsecc {

struct GpuTarget;                       // sparsecc/target/target.hpp
const GpuTarget& default_gpu_target();  // likewise

enum class SpmmNMode { fixed, runtime };  // N compiled in, or read from the kernel's `n` argument
// Weights as literals, read from `values` in emission order, a loop over a step table (above), or
// compressed records decoded into tensor-core fragments (the compressed family, half plans).
enum class SpmmValueMode { baked, streamed, rolled, compressed };
// Equal row panels; nnz-balanced panels (SparseRT (b)); or equal panels of the rows regrouped so that
// a panel's rows share columns (row_order below: fewer distinct k a block row, so fewer loads of B).
enum class SpmmRowSplit { equal, balanced, clustered };

struct SpmmProblem {
  std::int64_t m = 0, k = 0, n = 0;  // in runtime-N mode, n is the N the defaults were chosen for
  SpmmNMode n_mode = SpmmNMode::fixed;
  bool bias = false;
  bool relu = false;
  DType dtype = DType::f32;  // f32, f16 or bf16 (spmm_dtypes)
  // A convolution executor (see "Convolution" above): A is the filter bank (m = O, k = conv->k()) and
  // B the implicit im2col matrix of one image (n = conv->pixels(), fixed); the kernel reads the
  // images X and writes Y in conv->layout; the batch's pixels are the kernel's columns.
  std::optional<rt::ConvGeometry> conv = std::nullopt;
};

// The problem of a convolution executor for `out_channels` filters of geometry `g`.
SpmmProblem conv_problem(const rt::ConvGeometry& g, std::int64_t out_channels, bool bias, bool relu,
                         DType dtype = DType::f32);

struct SpmmEntry {
  std::int32_t row = 0;          // row inside the block row (accumulator index)
  std::int64_t value_index = 0;  // index into A's CSR value (and column) arrays
};

struct SpmmStep {
  std::int32_t k = 0;
  std::vector<SpmmEntry> entries;  // distinct rows, ascending
};

struct SpmmGroup {
  std::vector<SpmmStep> steps;  // strictly ascending k
};

// One tensor-core operand: the 16 x fragment_k block of A at rows [row_begin, row_begin + 16) of its
// block row and columns [k, k + fragment_k).
struct SpmmFragment {
  std::int32_t k = 0;  // a multiple of fragment_k
  // 16 * fragment_k entries, row-major: the CSR index of A at (row_begin + r, k + c), or -1 (zero).
  std::vector<std::int64_t> entries;
};

struct SpmmBlockRow {
  std::int64_t row_begin = 0, row_end = 0;
  std::vector<SpmmGroup> groups;        // exactly `groups` entries
  std::vector<SpmmFragment> fragments;  // strictly ascending k; empty without blocklets
};

// The blocklet configuration a plan was built with (sparsecc/inspector/blocklets.hpp), as plain data
// for printing; `shape` is empty when blocklets are off.
struct SpmmBlocklets {
  std::string shape;  // "16x8", "16x16" or "8x8"
  double fill_threshold = 0.0;
  std::string chosen_by;  // "auto" or "forced"
  std::int64_t tiles = 0, nnz_covered = 0, explicit_zeros = 0;
};

// The layout every family shares: how A's rows are cut into block rows, how a block row's k range is
// split over thread groups, and the grid.
struct SpmmLayout {
  SpmmRowSplit row_split = SpmmRowSplit::equal;
  std::int32_t rows_per_block = 0;   // Ny: accumulators per thread (tallest block row)
  std::int32_t panel_rows = 0;       // rows of the equal panels the block rows were cut from
                                     // (a balanced block row holds up to twice that)
  std::int32_t n_tile = 0;           // T: threads per group, cols_per_thread output columns each
  std::int32_t groups = 1;           // Gy: thread groups splitting K
  std::int32_t block_x = 0;          // groups * n_tile
  std::int32_t cols_per_thread = 1;  // 2 for f16 / bf16 and rolled plans; 1 or 2 for unrolled f32;
                                     // 1 for rolled plans with step lanes
  std::int64_t shared_bytes = 0;     // spmm_shared_bytes: group reduction (+ stage slots or tiles)
  std::vector<SpmmBlockRow> blocks;  // grid y = blocks.size()
  // Clustered plans (fp32 unrolled only): block rows cover positions 0..M, and position p computes row
  // row_order[p] of A and C (a permutation of 0..M; entries' value indices are A's own). Empty for
  // the other splits: position p is row p. The rows are literals of the code, so the order costs
  // nothing at run time.
  std::vector<std::int64_t> row_order;

  std::int64_t block_rows() const { return static_cast<std::int64_t>(blocks.size()); }  // grid y
};

// The executor families, in the order of SpmmBody's alternatives.
enum class SpmmFamily { unrolled, rolled, compressed };

// Straight-line code: every step and entry of the layout is an instruction of the kernel.
struct SpmmUnrolledBody {
  SpmmValueMode values = SpmmValueMode::baked;  // baked (literals) or streamed (read in emission order)
  std::vector<std::int64_t> packed_order;       // streamed: CSR index of the p-th emitted value
  std::int32_t stage_min_entries = 0;           // staged steps (above): entries a step needs; 0: none
  std::int32_t stage_slots = 0;                 // staged steps a group may hold (0 with stage_min_entries 0)
};

// A loop over the step table (spmm_rolled_table).
struct SpmmRolledBody {
  std::int32_t step_lanes = 1;  // lanes of a warp that take different steps (a power of two, 1..32)
};

// The formats of a compressed record (16 rows x kSpmmRecordCols columns of A; see "Compressed body"),
// in the order of their codes in the stream.
enum class SpmmRecordFormat : std::uint8_t { bitmap = 0, positions = 1, dense = 2 };
inline constexpr int kSpmmRecordFormats = 3;

// Compressed tiles decoded on chip into tensor-core fragments (half plans): a block of `warps` warps
// computes rows_per_block = 16 * warps * strips_per_warp rows of C for n_tile columns over its split's
// chunks of K; the matrix goes to the stream (spmm_compressed_stream), not into the code.
struct SpmmCompressedBody {
  std::int32_t warps = 4;            // warps a block
  std::int32_t strips_per_warp = 1;  // 16-row strips a warp owns
  std::int32_t chunk_k = 256;        // rows of B (columns of A) a block stages at a time
  std::int32_t stages = 2;           // chunks a block has in shared memory at once (2..8): loads in flight
  std::int32_t splits = 1;           // blocks (one thread-block cluster) splitting a row block's chunks
  std::int32_t n_tile = 16;          // columns of C a block (a multiple of 8, 8..64)
  // The scatter layout: each segment holds one list of (value, place) entries a warp, which the warp
  // scatters into its strips of a dense operand tile of rows x chunk_k (formats and weights unused);
  // else records.
  bool scatter = false;
  // The vector layout (a fixed N of 1..rt::kVectorMaxN, K at most rt::kVectorMaxK): the stream holds
  // A's rows as entries value << 16 | column behind a row table (rt::walk_vector_stream), and warp w of
  // a block computes rows w, w + warps, .. of the block's rows (16 * strips_per_warp) as the row's
  // entries times their rows of B, on the CUDA cores (fp32 products and sums). Nothing is staged:
  // chunk_k is 64, stages 2, splits 1, n_tile N rounded up to 8 (one column tile), stage_bytes 0 and
  // the shared memory 0; formats and weights are unused.
  bool vector = false;
  // The scatter layout: rounds of 32 entries of its list a warp loads at once, keeping their places in
  // registers for the zeros it writes back (later rounds are loaded again for those); 1..8.
  std::int32_t kept_rounds = 1;
  // The format of a record is the allowed one of least cost: its bytes, plus bitmap_weight bytes a
  // bitmap sub-tile it decodes, plus position_weight bytes a nonzero it scatters.
  std::uint32_t formats = 7;  // allowed formats, bit 1 << SpmmRecordFormat
  std::int32_t bitmap_weight = 0;
  std::int32_t position_weight = 0;
  // (row blocks) x (splits + 1) chunk indices: split s of row block r takes chunks
  // [split_chunks[r * (splits + 1) + s], split_chunks[r * (splits + 1) + s + 1]).
  std::vector<std::int32_t> split_chunks;
  std::int64_t stage_bytes = 0;  // bytes of the largest segment (what a block stages for one chunk)
  // What the stream holds, for printing: its 32-bit words and records of each format.
  std::int64_t stream_words = 0;
  std::int64_t records[kSpmmRecordFormats] = {0, 0, 0};
};

using SpmmBody = std::variant<SpmmUnrolledBody, SpmmRolledBody, SpmmCompressedBody>;

// Compressed plans: the bytes of a staged row of B (n_tile columns; 16 bytes more against bank
// conflicts unless n_tile is 8, 16, 32 or 64, whose rows are swizzled instead), and the block's shared
// memory: `stages` stages of a chunk's rows of B and its segment (stage_bytes), then 4 KiB a warp
// where positions are scattered (two buffers), or for the scatter layout the block's operand tile
// (rows x chunk_k values and a 16-byte pad slot); split plans reuse the stages for the row block's
// fp32 partial sums (rows_per_block x n_tile).
inline constexpr std::int32_t kSpmmCompressedMaxStages = 8;
// 16-byte pieces of four entries a lane of a vector kernel loads before it uses the first, by N: each
// piece's entries bring N values of B a lane (evidence: docs/design/spmm-plan-evidence.md#compressed-plans).
inline constexpr std::int32_t spmm_vector_unroll(std::int64_t n) { return n == 1 ? 4 : n <= 4 ? 2 : 1; }
inline constexpr std::int32_t kSpmmCompressedMaxKeptRounds = 8;
inline constexpr std::int64_t kSpmmCompressedScratchBytes = 4096;  // a warp's
bool spmm_compressed_swizzled(std::int64_t n_tile);
std::int64_t spmm_compressed_pitch(std::int64_t n_tile);
std::int64_t spmm_compressed_shared_bytes(const SpmmCompressedBody& body);
// The body's layout as plans, options and tools name it: "records", "scatter" or "vector".
inline const char* spmm_compressed_layout(const SpmmCompressedBody& body) {
  return body.vector ? "vector" : body.scatter ? "scatter" : "records";
}
inline std::int64_t spmm_compressed_rows(const SpmmCompressedBody& body) {
  return std::int64_t{16} * (body.vector ? 1 : body.warps) * body.strips_per_warp;
}

// Tensor-core fragments: the per-block-row fragment lists are SpmmBlockRow::fragments.
struct SpmmFragments {
  std::int32_t fragment_k = 16;  // the mma K: 8 or 16
  SpmmBlocklets blocklets;       // how the tiles were chosen, for printing
};

// What group 0 does with the sums before it stores C (above).
struct SpmmEpilogue {
  bool bias = false;              // add bias[row] (the problem's)
  bool relu = false;              // then max(0, .) (the problem's)
  DType accumulate = DType::f32;  // f32, or the dtype (half plans only)
  DType output = DType::f32;      // C's type: every output is rounded to it once (the problem's dtype)
};

// What the emitters and the assembler are told beyond the computation.
struct SpmmCodegenHints {
  std::string kernel_name = "sparsecc_spmm";
  std::int32_t estimated_registers = 0;     // accumulators + overhead (+ fragment tiles)
  std::int32_t max_registers = 255;         // register cap given to the assembler (PTX .maxnreg)
  std::int64_t estimated_instructions = 0;  // B loads + FMAs (+ fragment work)
  // ptxas optimization level (0..3); automatic plans take 3.
  // Evidence: docs/design/spmm-plan-evidence.md#assembler-optimization-level
  std::int32_t assembler_opt_level = 3;
  // Programmatic dependent launch (the kernel's arch sm_90 on, rt::arch_has_programmatic_launch): the
  // kernel waits for the grid it depends on before it touches B or C, so that a programmatic launch
  // overlaps its start with the previous kernel's end. The inspector sets it for every plan.
  bool programmatic = false;
  // Programmatic fp32 plans only: the kernel also lets the next grid launch once its block row's sums are
  // done (griddepcontrol.launch_dependents), so that grid's blocks take free SMs and wait there.
  // Without it the next grid launches as this one's blocks exit. The inspector sets it for rolled
  // plans and unrolled ones of at most kSpmmProgrammaticTriggerInstructions (see there).
  bool programmatic_trigger = false;
};

struct SpmmPlan {
  SpmmProblem problem;
  SpmmLayout layout;
  SpmmBody body;
  std::optional<SpmmFragments> fragments;  // tensor-core fragments; empty without blocklets
  SpmmEpilogue epilogue;
  SpmmCodegenHints hints;

  SpmmFamily family() const { return static_cast<SpmmFamily>(body.index()); }
  // The family's body, or null for another family.
  const SpmmUnrolledBody* unrolled() const { return std::get_if<SpmmUnrolledBody>(&body); }
  SpmmUnrolledBody* unrolled() { return std::get_if<SpmmUnrolledBody>(&body); }
  const SpmmRolledBody* rolled() const { return std::get_if<SpmmRolledBody>(&body); }
  SpmmRolledBody* rolled() { return std::get_if<SpmmRolledBody>(&body); }
  const SpmmCompressedBody* compressed() const { return std::get_if<SpmmCompressedBody>(&body); }
  SpmmCompressedBody* compressed() { return std::get_if<SpmmCompressedBody>(&body); }

  // Views for code common to several families: the body's value, or the neutral one of a family
  // without it.
  SpmmValueMode value_mode() const {
    return unrolled() ? unrolled()->values : rolled() ? SpmmValueMode::rolled : SpmmValueMode::compressed;
  }
  std::int32_t step_lanes() const { return rolled() ? rolled()->step_lanes : 1; }
  std::int32_t stage_min_entries() const { return unrolled() ? unrolled()->stage_min_entries : 0; }
  std::int32_t stage_slots() const { return unrolled() ? unrolled()->stage_slots : 0; }
  const std::vector<std::int64_t>& packed_order() const;  // empty outside streamed mode
  std::int32_t fragment_k() const { return fragments ? fragments->fragment_k : 0; }  // 0: none
  const SpmmBlocklets& blocklets() const;  // empty shape without fragments

  // Unrolled fp32 with two adjacent columns a thread (fixed even N): one 64-bit load of B a step.
  bool fp32_pairs() const {
    return !half() && layout.cols_per_thread == 2 && family() == SpmmFamily::unrolled;
  }
  // grid y: the block rows (compressed plans: each row block once a split)
  std::int64_t block_rows() const {
    return compressed() ? layout.block_rows() * compressed()->splits : layout.block_rows();
  }
  // C columns a block covers
  std::int64_t block_columns() const {
    return compressed() ? compressed()->n_tile
                        : std::int64_t{layout.n_tile} / step_lanes() * layout.cols_per_thread;
  }
  std::int64_t column_tiles(std::int64_t n) const {
    return (n + block_columns() - 1) / block_columns();
  }  // grid x
  bool half() const { return problem.dtype != DType::f32; }
  std::int64_t fragment_count() const;
};

// The body of `family` with its defaults (the planner fills it in).
SpmmBody spmm_body(SpmmFamily family);
// "unrolled", "rolled".
const char* to_string(SpmmFamily family);

// Accumulators one thread may hold; plans with more rows per block row are rejected.
inline constexpr std::int32_t kSpmmMaxAccumulators = 64;
// Registers a thread needs beside its accumulators (addresses, indices, loads in flight).
inline constexpr std::int32_t kSpmmRegisterOverhead = 24;
// The hardware limits a plan is held to come from its GpuTarget: block rows run along grid y
// (target.max_grid_y), a block takes at most target.shared_per_block bytes of dynamic shared memory
// (the runtime launches without opting in to more), and max_registers is at most
// target.max_registers_per_thread.
// Unrolled convolutions of at most this many taps read through one pointer a tap (a pixel's; f16 / bf16
// kernels hold two pixels, so two a tap): no test a load (see conv_setup in sparsecc/emit/spmm_cuda.hpp);
// larger kernels test a mask of the taps.
inline constexpr std::int64_t kSpmmConvTapPointers = 9;
// The registers an unrolled f16 / bf16 convolution holds beside the SpMM's and its tap pointers or
// masks: the pair's second window corner and output pointer and Y's pitch, 64-bit each.
inline constexpr std::int32_t kSpmmConvPairRegisters = 6;
// Beside those, f16 / bf16 convolutions of more than kSpmmConvTapPointers taps hold two 64-bit taps masks
// and the offsets of the loads they guard.
// Evidence: docs/performance/2026-11-28-conv.md#f16-and-bf16-executors-runs-2830
inline constexpr std::int32_t kSpmmConvMaskRegisters = 8;
// Whether `problem` is a convolution of at most kSpmmConvTapPointers taps: its unrolled kernels read
// through tap pointers, and (fp32) the PTX emitter takes it.
inline bool spmm_conv_tap_pointers(const SpmmProblem& problem) {
  return problem.conv && problem.conv->taps() <= kSpmmConvTapPointers;
}
// The most rows of A an SpMM executor takes: max_grid_y block rows of kSpmmMaxAccumulators rows.
std::int64_t spmm_max_rows(const GpuTarget& target = default_gpu_target());
// Unrolled plans above this many estimated instructions wait for their predecessor but do not let the
// next grid launch early (the trigger slowed large unrolled kernels down).
// Evidence: docs/design/spmm-plan-evidence.md#programmatic-trigger
inline constexpr std::int64_t kSpmmProgrammaticTriggerInstructions = 12000;
// Rolled plans: steps whose B loads a thread keeps in flight before it multiplies them.
inline constexpr std::int32_t kSpmmRolledBatch = 8;
// Rolled plans at a fixed N of at most this many columns take step lanes automatically.
// Evidence: docs/design/spmm-plan-evidence.md#step-lanes
inline constexpr std::int32_t kSpmmStepLaneColumns = 8;
// The step lanes that give every lane of a warp a column at N: 32 / N rounded up to a power of two
// (1 from N = 32).
std::int32_t spmm_step_lanes_for(std::int64_t n);
// Staged plans: the most slots a thread may hold, and staged steps a cp.async commit (the kernel
// waits for the commits in order with cp.async.wait_group, whose count the chunking keeps below 8).
inline constexpr std::int32_t kSpmmMaxStageSlots = 64;
inline constexpr std::int32_t kSpmmStageChunk = 8;
// Fragment plans: rows of a block row (the mma M), and the fp32 row pitch of a warp's 16 x 64 stage in
// shared memory (64 columns and 8 of padding against bank conflicts).
inline constexpr std::int32_t kSpmmFragmentRows = 16;
inline constexpr std::int32_t kSpmmFragmentStagePitch = 72;

// The row of A and C that position `position` of the block rows computes (row_order above; throws
// std::out_of_range past a short row_order, which check_plan reports).
inline std::int64_t spmm_row(const SpmmPlan& plan, std::int64_t position) {
  return plan.layout.row_order.empty() ? position
                                       : plan.layout.row_order.at(static_cast<std::size_t>(position));
}

// The fragments of block row `b` that group `g` of `groups` multiplies: [first, second) of b.fragments,
// the g-th of `groups` equal contiguous shares (sizes differ by one at most, larger shares last).
std::pair<std::size_t, std::size_t> spmm_group_fragments(const SpmmBlockRow& b, std::int32_t groups,
                                                         std::int32_t g);

// Staged plans: which steps of `g` are staged (one flag a step; all 0 without staging), and the byte
// offset of the stage slots in the block's shared memory (after the group reduction, 16-aligned).
std::vector<char> spmm_staged_steps(const SpmmPlan& plan, const SpmmGroup& g);
std::int64_t spmm_stage_offset(const SpmmPlan& plan);
// The cp.async commits of a group whose staged steps `staged` flags (kSpmmStageChunk a commit);
// whether a commit follows the copy-th of its `copies` copies (the last of a chunk, or of all); and
// what its slot-th staged step waits for: the commits still allowed in flight (cp.async.wait_group)
// at the first step of a commit, else -1 (no wait).
std::int64_t spmm_stage_commits(const std::vector<char>& staged);
bool spmm_stage_commit_after(std::int64_t copy, std::int64_t copies);
std::int64_t spmm_stage_wait(std::int64_t slot, std::int64_t commits);

// Whether block row `bi` is a plain empty one: no steps and no fragments, the rows bi * panel_rows ..
// min(M, (bi + 1) * panel_rows), each computing its own row of C. The emitters give all of them one
// shared piece of code that finds the rows from the block row's index (C = bias, ReLU, or 0), so that
// empty rows cost no code of their own.
bool spmm_plain_empty_block(const SpmmPlan& plan, std::size_t bi);
// Whether some block row of the plan is a plain empty one.
bool spmm_has_plain_empty_blocks(const SpmmPlan& plan);

// Rows of C an unrolled executor writes with code of their own: the rows of every block row that is not
// a plain empty one. Its code grows with them (each gets its own epilogue per column), so a tall matrix
// whose few nonzeros are spread over many block rows would assemble for minutes in gigabytes.
std::int64_t spmm_rows_with_code(const SpmmPlan& plan);
// The most rows with code of their own an unrolled plan may have. Above it the automatic fp32 plan is
// rolled (one loop whatever the matrix) and other plans are refused, naming the limit. The evidence:
// docs/input-safety.md ("Compile cost of degenerate shapes").
inline constexpr std::int64_t kSpmmMaxRowsWithCode = 32768;

// Whether block row `b` hands partial sums from groups 1.. to group 0. Always for fp32 plans; half
// plans skip the hand-over (and the interpreter the addition) where those groups have no steps.
bool spmm_block_reduces(const SpmmPlan& plan, const SpmmBlockRow& b);

// Shared memory of a plan: the group reduction ((groups - 1) * rows_per_block * n_tile threads *
// cols_per_thread floats, when some block row reduces), then, where spmm_fragment_stages, one 16 x
// kSpmmFragmentStagePitch float stage per warp, or with staged steps their slots (stage_slots *
// block_x * cols_per_thread floats at spmm_stage_offset).
std::int64_t spmm_shared_bytes(const SpmmPlan& plan);

// The group reduction's buffer alone: (groups - 1) slabs of rows x n_tile threads x cols_per_thread
// floats (what the inspector sizes its automatic groups by).
std::int64_t spmm_reduction_bytes(std::int64_t groups, std::int64_t rows, std::int64_t n_tile,
                                  std::int64_t cols_per_thread);

// True when a fragment plan hands warp tiles over through shared memory: several groups, the scalar
// path (runtime N, or N not a multiple of 8), or a block row with both fragments and unrolled
// nonzeros. Otherwise every block row stores its tiles straight to C and the plan needs no stage (a
// kernel without shared memory keeps the whole L1 as cache and fits more blocks on an SM).
bool spmm_fragment_stages(const SpmmPlan& plan);

// The fragments array, in emission order (block rows, then their fragments): for each fragment,
// 32 lanes x (fragment_k / 4) words, lane-major; each word packs two weights of the dtype (low half
// first) at the positions mma.sync's A operand gives that lane. Empty without fragments. Compressed
// plans: the stream (spmm_compressed_stream), which their kernel takes as its fragments argument.
std::vector<std::uint32_t> spmm_fragment_words(const SpmmPlan& plan, const CsrMatrix& a);

// The element types of B and C an SpMM executor takes.
inline constexpr std::initializer_list<DType> kSpmmDtypes = {DType::f32, DType::f16, DType::bf16};
bool spmm_dtype(DType t);  // one of kSpmmDtypes

// "baked", "streamed", "rolled"; parse_value_mode throws UsageError naming `what` on another word.
const char* to_string(SpmmValueMode mode);
SpmmValueMode parse_value_mode(const std::string& word, const std::string& what = "value mode");
// "equal", "balanced", "clustered"; parse_row_split likewise.
const char* to_string(SpmmRowSplit split);
SpmmRowSplit parse_row_split(const std::string& word, const std::string& what = "row split");

// Rolled plans: words of one step record (the k and rows_per_block weights, rounded up to a multiple of
// 4 so that records load as 16-byte vectors), and of the header (block_rows * groups + 1 record
// indices, rounded up to a multiple of 4).
std::int32_t spmm_rolled_record_words(const SpmmPlan& plan);
std::int64_t spmm_rolled_header_words(const SpmmPlan& plan);
// The step table of a rolled plan (layout above), as the float words of the `values` array.
std::vector<float> spmm_rolled_table(const SpmmPlan& plan, const CsrMatrix& a);

// A weight as the kernel uses it: rounded to the plan's dtype (exact in float). Throws UsageError
// when it overflows the dtype.
float spmm_weight(const SpmmPlan& plan, double v);

// Emission-order traversal count helpers, filled from the steps.
std::int64_t spmm_plan_loads(const SpmmPlan& plan);
std::int64_t spmm_plan_nnz(const SpmmPlan& plan);

// The `values` array the kernel reads, as float32: in streamed mode A's values in emission order
// (packed_order); in baked mode A's CSR values (the literals the kernel carries); in rolled mode the
// step table (spmm_rolled_table). Half plans round every value to the dtype (spmm_weight).
std::vector<float> spmm_kernel_values(const SpmmPlan& plan, const CsrMatrix& a);

// Every broken invariant, as a sentence (empty when the plan is valid for `a`): shapes and launch
// fields agree, block rows cover positions 0..M exactly once in order, row_order is a permutation of
// 0..M exactly when the split is clustered (fp32 unrolled plans only), every nonzero of A appears
// exactly once at its own (row, k), max_registers is in estimated_registers..target.max_registers_per_thread,
// assembler_opt_level in 0..3, steps ascend in k and groups take consecutive k ranges, every group's nnz is
// at most ceil(block nnz / groups) + (nonzeros of the block row in one column) - 1, packed_order is the
// emission order in streamed mode, and the accumulators fit the register budget. Rolled plans: dtype
// f32, no fragments, cols_per_thread 2. Half plans: dtype
// f16 / bf16 with cols_per_thread 2 and accumulate f32 or the dtype. Fragment plans: a half dtype,
// fragment_k 8 or 16, block rows of 16 rows at multiples of 16, groups of whole warps; each fragment
// at a distinct multiple of fragment_k, its entries A's own (row, column) or -1 (a nonzero of A is
// in exactly one step or fragment).
std::vector<std::string> check_plan(const SpmmPlan& plan, const CsrMatrix& a,
                                    const GpuTarget& target = default_gpu_target());

nlohmann::json to_json(const SpmmPlan& plan);
// Throws UsageError on a malformed document.
SpmmPlan plan_from_json(const nlohmann::json& j);

}  // namespace sparsecc
