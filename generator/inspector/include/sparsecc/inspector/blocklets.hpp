// Blocklet decomposition of a fixed sparse A for dense-tile (tensor-core) execution, after the
// blocklet / multi-blocklet / RMB patterns of Vooturi's thesis (docs/techniques/blocklets-rmb.md).
//
// The thesis prunes a matrix into blocklets and retrains; a fixed matrix has to be represented as it
// is, so here the decomposition is lossless: A = A_blocks + A_residual, where A_blocks is a set of
// disjoint dense bh x bw tiles on the aligned grid (explicit zeros allowed inside them, down to a fill
// threshold) and A_residual, a CSR matrix, holds every nonzero no tile covers.
//
// Greedy extraction (thesis Alg. 19/20, made lossless). The block strength of an aligned block is
// the sum of the magnitudes of its entries; its fill is its nonzero count over bh * bw. Pass p takes,
// in every row block, the strongest remaining block (first maximum: lowest column block on ties) among
// those whose fill reaches the threshold; the blocks of one pass form one blocklet matrix, the passes
// together a multi-blocklet matrix. Because aligned blocks are disjoint, extracting one never changes
// the strength of another, so pass p picks the p-th strongest qualifying block of each row block and
// the union of all passes is exactly the set of blocks whose fill reaches the threshold; the order
// only matters for the blocklet layout and for the cap on blocks. When the cap falls inside a pass,
// the strongest blocks of that pass are kept (lower row block on ties).
//
// Conventions:
//  - a tile's entries are A's values, bit for bit, or +0.0 (the explicit zeros);
//  - "nonzero" means a stored entry whose value is not zero: entries A stores with the value 0.0 or
//    -0.0 always stay in the residual, so the tiles' nonzero values alone say which entries of A they
//    hold and recombine_blocklets() returns A exactly;
//  - the last row block and column block may be partial when M or K is not a multiple of the shape:
//    tiles there are still bh x bw, and their entries outside the matrix are zero padding (counted as
//    explicit zeros; an executor must not read B past row K for them);
//  - strengths holding a NaN rank below every other block (they still qualify by fill).
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sparsecc/matrix/csr.hpp"

namespace sparsecc {

// Height (rows of A, the M direction) and width (columns of A, the K direction) of a block.
struct BlockShape {
  int bh = 0;
  int bw = 0;
  bool operator==(const BlockShape&) const = default;
};

// Largest block side accepted anywhere in this header (tiles are stored densely).
inline constexpr int kMaxBlockletSide = 256;
// Largest RMB block side accepted by the CRMB layout.
inline constexpr int kMaxRmbBlockSide = 4096;
inline constexpr std::int64_t kUnlimitedBlocks = std::numeric_limits<std::int64_t>::max();

// "16x8" (bh x bw).
std::string block_shape_name(BlockShape s);

// A blocklet configuration: what the inspector proposes and the plan records.
struct BlockletConfig {
  BlockShape shape{16, 8};
  double fill_threshold = 0.5;                 // a tile needs nnz / (bh * bw) >= this; in (0, 1]
  std::int64_t max_blocks = kUnlimitedBlocks;  // cap on tiles; 0 turns blocklets off
  std::string precision = "f16";               // tile operand type: "f16", "bf16" or "f32"
  bool operator==(const BlockletConfig&) const = default;
};

// Throws UsageError when a side is outside 1..kMaxBlockletSide, the fill threshold is outside (0, 1]
// (or NaN), max_blocks is negative or the precision is not one of "f16", "bf16", "f32".
void validate_blocklet_config(const BlockletConfig& cfg);

// One aligned block of A that holds at least one nonzero.
struct BlockStrength {
  std::int64_t row_block = 0;
  std::int64_t col_block = 0;
  std::int64_t nnz = 0;    // nonzeros of A inside the block
  double magnitude = 0.0;  // sum of |a| over the block: the thesis's block strength
  double fill = 0.0;       // nnz / (bh * bw)
};

struct BlockStrengths {
  BlockShape shape;
  std::int64_t row_blocks = 0;        // ceil(M / bh)
  std::int64_t col_blocks = 0;        // ceil(K / bw)
  std::vector<BlockStrength> blocks;  // blocks without a nonzero are left out; row-major order
};

// Throws UsageError for an invalid matrix or a side outside 1..kMaxBlockletSide.
BlockStrengths block_strengths(const CsrMatrix& a, BlockShape shape);

// One dense tile of A_blocks.
struct BlockletTile {
  std::int64_t row = 0;        // first row; a multiple of bh
  std::int64_t col = 0;        // first column; a multiple of bw
  std::int32_t pass = 0;       // greedy pass that extracted it: the blocklet it belongs to
  std::int32_t nnz = 0;        // nonzeros of A it holds
  std::vector<double> values;  // bh * bw, row-major; A's values, +0.0 elsewhere and in the padding
  bool operator==(const BlockletTile&) const = default;
};

struct BlockletDecomposition {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  BlockletConfig config;
  std::vector<BlockletTile> tiles;  // distinct aligned blocks, sorted by (row, col)
  CsrMatrix residual;               // rows x cols: every entry of A no tile holds

  std::int64_t nnz_covered() const;     // nonzeros held by tiles
  std::int64_t explicit_zeros() const;  // tile entries that are not nonzeros of A (padding included)
  std::int32_t passes() const;          // 1 + the largest pass; 0 without tiles
};

// The lossless greedy decomposition. Throws UsageError for an invalid matrix or configuration.
BlockletDecomposition decompose_blocklets(const CsrMatrix& a, const BlockletConfig& cfg);

// A_blocks + A_residual as one CSR matrix (source dtype of the residual). For a decomposition of A this
// is A itself: same row pointers, columns and value bits. Throws UsageError when tiles overlap in a
// nonzero, lie off the grid, or hold a nonzero outside the matrix or where the residual has an entry.
CsrMatrix recombine_blocklets(const BlockletDecomposition& d);

// Summary keys: shape ("16x8"), fill_threshold, max_blocks (null when unlimited), precision, rows,
// cols, nnz, blocks, passes, nnz_covered, explicit_zeros, residual_nnz, coverage (nnz_covered / nnz,
// 0 without nonzeros).
nlohmann::json to_json(const BlockletDecomposition& d);

// ---- Proposal by cost estimate ----

struct BlockletProposalOptions {
  // Tile operand type; empty: the matrix's source dtype (f16 -> "f16", bf16 -> "bf16", else "f32").
  std::string precision;
};

// One candidate shape as the estimate saw it. Costs are in issue slots per output column.
struct BlockletCandidate {
  BlockShape shape;
  bool tensor_cores = false;    // tiles would run as mma fragments (else register-blocked SIMT FMAs)
  double tile_cost = 0.0;       // estimated cost of one tile
  std::int64_t min_nnz = 0;     // fewest nonzeros for which a tile is cheaper than its residual FMAs
  double fill_threshold = 0.0;  // min_nnz / (bh * bw); 0 when no tile can pay (min_nnz > bh * bw)
  std::int64_t blocks = 0;      // tiles at that threshold
  std::int64_t nnz_covered = 0;
  double estimated_cost = 0.0;  // tiles * tile_cost + residual nonzeros * residual cost
};

// The candidate shapes, in the order ties are broken: the tensor-core fragment shapes 16x8, 16x16 and
// 8x8 (register-blocked into a 16-row fragment), then the thesis's 4x4 and 2x2 for the SIMT path.
std::vector<BlockShape> blocklet_candidate_shapes();

// Proposes a configuration: for each candidate shape the fill threshold is the break-even fill of the
// cost model, and the shape with the lowest estimated cost wins (the first in candidate order on ties).
// When no shape saves at least 5 % of the estimate for running every nonzero through the residual
// path, the result has max_blocks == 0 (blocklets off) and the first candidate's shape. `candidates`,
// when given, receives the estimate of every shape.
// Throws UsageError for an invalid matrix or precision.
BlockletConfig propose_blocklets(const CsrMatrix& a, const BlockletProposalOptions& options = {},
                                 std::vector<BlockletCandidate>* candidates = nullptr);

// ---- The thesis's storage layouts (section 7.1.2) ----
//
// The thesis requires bh | rows; here the last row block (and column block) may be partial, and the
// layout then stores its padding, which must be zero. The layouts hold A_blocks only: a decomposition's
// residual travels separately as CSR. Values are doubles, like CsrMatrix.

// CBL: one blocklet matrix of type (bh, bw): exactly one stored block per row block.
struct CblMatrix {
  BlockShape type;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  // ceil(rows / bh) * bh rows of bw entries, row-major: row r holds the entries of row r inside the
  // stored block of row block r / bh, so column k concatenates column k of every block in row-block
  // order, as in the thesis; the values of one block are contiguous.
  std::vector<double> values;
  std::vector<std::int32_t> indices;  // ceil(rows / bh) column-block indices
  bool operator==(const CblMatrix&) const = default;
};

// CMBL: a multi-blocklet matrix, the sum of its blocklet matrices (all rows x cols).
struct CmblMatrix {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::vector<CblMatrix> bl_matrices;
  bool operator==(const CmblMatrix&) const = default;
};

// CRMB: an RMB matrix with block size (BH, BW): CSR over blocks, one CMBL (BH x BW, in the block's own
// coordinates) per nonzero block. Every blocklet type divides the block: blh | BH, blw | BW.
struct CrmbMatrix {
  BlockShape block;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::vector<CmblMatrix> mbl_matrices;     // one per nonzero block, row-major block order
  std::vector<std::int32_t> indices;        // column-block index of each nonzero block
  std::vector<std::int64_t> row_block_ptr;  // ceil(rows / BH) + 1 entries, into mbl_matrices
  bool operator==(const CrmbMatrix&) const = default;
};

// Throw UsageError describing the first broken invariant: sizes, index ranges, block order, blocklet
// types, nonzero padding, or two blocklets storing a nonzero at the same position (a multi-blocklet
// matrix is a disjoint sum; overlaps of zeros, which the thesis's greedy produces on ties, are fine).
void validate(const CblMatrix& m);
void validate(const CmblMatrix& m);
void validate(const CrmbMatrix& m);

// The matrix a layout stores, exactly: every nonzero value at its position (zeros dropped).
CsrMatrix csr_from_cbl(const CblMatrix& m, DType source_dtype = DType::f64);
CsrMatrix csr_from_cmbl(const CmblMatrix& m, DType source_dtype = DType::f64);
CsrMatrix csr_from_crmb(const CrmbMatrix& m, DType source_dtype = DType::f64);

// Export of A_blocks. Blocklet k of a row block (of the matrix, or of an RMB block) is its k-th tile in
// (pass, column) order; a row block with fewer tiles stores a zero block at column block 0 there.
CmblMatrix cmbl_from_blocklets(const BlockletDecomposition& d);
// Throws UsageError unless bh | BH and bw | BW (and BH, BW within 1..kMaxRmbBlockSide).
CrmbMatrix crmb_from_blocklets(const BlockletDecomposition& d, BlockShape rmb_block);

// Import: every stored block holding a nonzero becomes a tile (blocks landing on the same aligned
// position are merged), pass = its blocklet index (within its RMB block for CRMB), the residual is
// empty. The configuration records the blocklet type, the smallest tile fill as the threshold (1 when
// there are no tiles), the tile count as the cap and `precision`. Every blocklet must have the same
// type; mixed types throw UsageError (use csr_from_crmb and decompose_blocklets instead). A layout
// without blocklets gives an empty decomposition of shape 1x1.
BlockletDecomposition blocklets_from_cmbl(const CmblMatrix& m, const std::string& precision = "f16");
BlockletDecomposition blocklets_from_crmb(const CrmbMatrix& m, const std::string& precision = "f16");

}  // namespace sparsecc
