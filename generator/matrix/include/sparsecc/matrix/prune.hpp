// Magnitude pruning: turn a dense weight matrix into the sparse layer sparsecc compiles, either
// unstructured or into a structured pattern the kernels favour (blocks, n:m, RMB blocklets).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/matrix/dense.hpp"

namespace sparsecc {

// Keeps the round((1 - sparsity) * rows * cols) entries of largest magnitude (ties: lower row-major
// index first, so the result is deterministic) and drops the rest. Throws UsageError unless
// 0 <= sparsity <= 1.
CsrMatrix magnitude_prune(const DenseMatrix& dense, double sparsity, DType source_dtype = DType::f32);

// A structured pruning pattern (`sparsecc prune --pattern`). Spellings:
//   unstructured          the magnitude_prune above
//   block:BHxBW           whole aligned BH x BW blocks
//   N:M                   N of every aligned group of M consecutive columns in a row (2:4)
//   rmb:BLHxBLW[@BHxBW]   homogeneous RMB (regularized multi-block) with BLH x BLW blocklets: in every
//                         BH x BW block, each row block of BLH rows keeps K blocklets (thesis Alg. 19/20,
//                         docs/techniques/blocklets-rmb.md section 6). Without @: BH = BLH and BW the
//                         whole row, so every row block of the matrix keeps K blocklets.
enum class PruneKind { unstructured, block, n_m, rmb };

struct PrunePattern {
  PruneKind kind = PruneKind::unstructured;
  // block: the block; rmb: the blocklet.
  std::int64_t tile_rows = 1;
  std::int64_t tile_cols = 1;
  // rmb: the RMB block; 0 means the default (BH = blocklet height, BW = the whole row).
  std::int64_t rmb_rows = 0;
  std::int64_t rmb_cols = 0;
  // n:m.
  std::int64_t n = 0;
  std::int64_t m = 0;
};

// Parses the spellings above (dimensions 1 .. 2^24, 1 <= N <= M, BLH | BH and BLW | BW). Throws
// UsageError naming the pattern and what is wrong.
PrunePattern parse_prune_pattern(const std::string& text);

// The canonical spelling ("rmb:2x2@6x6", "2:4", ...); parse_prune_pattern reads it back.
std::string to_string(const PrunePattern& p);

// The sparsity a pattern fixes by itself: 1 - N/M for n:m, none for the others.
std::optional<double> implied_sparsity(const PrunePattern& p);

// Blocklets an RMB block row keeps: round((1 - sparsity) * BW / BLW), at least 1, where BW is the RMB
// block width for a matrix of `cols` columns (the default: cols rounded up to a multiple of BLW).
std::int64_t rmb_blocklets_per_block(const PrunePattern& p, std::int64_t cols, double sparsity);

// Prunes `dense` to the pattern at `sparsity` (in [0, 1]); the kept entries keep their values, the
// rest become 0. Deterministic: rankings use magnitudes (sums of |a| for tiles) with ties to the lower
// row-major index. Edge tiles and groups that stick out of the matrix count their missing entries as
// zeros. Per kind:
//   unstructured  keeps round((1 - s) * rows * cols) entries (magnitude_prune);
//   block         keeps round((1 - s) * number of blocks) blocks, strongest first;
//   n:m           keeps min(N, group size) largest of each group; `sparsity` must equal 1 - N/M;
//   rmb           keeps rmb_blocklets_per_block(p, cols, s) blocklets in every block row segment.
// Throws UsageError for a sparsity outside [0, 1] or one an n:m pattern contradicts.
DenseMatrix prune_dense(const DenseMatrix& dense, const PrunePattern& pattern, double sparsity);

// Stand-in for the retraining that follows structured pruning (the thesis retrains after RMB pruning)
// when only already-sparse weights exist: every zero inside an aligned tile_rows x tile_cols tile of
// `pruned` that holds a nonzero gets a value drawn (SplitMix64 `seed`) from the nonzeros of `pruned`,
// so kept blocklets / blocks become dense with the layer's own value distribution. Throws UsageError
// unless `pattern` is block or rmb.
DenseMatrix refill_kept_tiles(const DenseMatrix& pruned, const PrunePattern& pattern, std::uint64_t seed);

// How much of a matrix a pruning kept.
struct PruneStats {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t original_nnz = 0;    // nonzeros before pruning
  std::int64_t kept_nnz = 0;        // nonzeros after
  double sparsity = 0.0;            // achieved: 1 - kept_nnz / (rows * cols); 0 for an empty matrix
  double magnitude_fraction = 1.0;  // sum |kept| / sum |original|; 1 when the original is all zeros
  double squared_fraction = 1.0;    // sum kept^2 / sum original^2; likewise
};

// Throws UsageError when the shapes differ.
PruneStats prune_stats(const DenseMatrix& original, const DenseMatrix& pruned);

// A dense matrix of float32-representable values uniform in [-1, 1) from a seed (SplitMix64).
DenseMatrix random_dense(std::int64_t rows, std::int64_t cols, std::uint64_t seed);

}  // namespace sparsecc
