#include "sparsecc/inspector/spmm_inspector.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "sparsecc/common/error.hpp"
#include "sparsecc/inspector/row_clusters.hpp"
#include "sparsecc/target/target.hpp"

namespace sparsecc {

namespace {

constexpr std::int64_t kLoadsInFlight = 16;  // registers of the automatic cap beyond the estimate
// Fragment plans hold the warp's 32-float tile, a fragment's operand words and its B loads (up to 32
// 16-bit values for m16n8k16) beside the unrolled path's accumulators.
constexpr std::int64_t kFragmentLoadsInFlight = 48;

// Row borders of `blocks` block rows: equal panels of `ny` rows, or nnz-balanced panels of at most
// `cap` rows each.
std::vector<std::int64_t> row_borders(const CsrMatrix& a, std::int64_t blocks, std::int64_t ny,
                                      std::int64_t cap, SpmmRowSplit split) {
  const std::int64_t m = a.rows;
  std::vector<std::int64_t> borders{0};
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t r = borders.back();
    if (split != SpmmRowSplit::balanced) {
      borders.push_back(std::min(m, r + ny));
      continue;
    }
    const std::int64_t after = blocks - b - 1;  // block rows still to place after this one
    const std::int64_t lo = std::max(r + 1, m - cap * after);
    const std::int64_t hi = std::min(r + cap, m - after);
    const std::int64_t target = ceil_div(a.nnz() * (b + 1), blocks);
    std::int64_t end = lo;
    while (end < hi && a.row_ptr[end] < target) ++end;
    borders.push_back(end);
  }
  return borders;
}

// The steps of block row [begin, end) split over `groups` groups with balanced nonzeros; nonzeros
// marked in `covered` (taken by fragments) are left out.
std::vector<SpmmGroup> block_groups(const CsrMatrix& a, std::int64_t begin, std::int64_t end,
                                    std::int32_t groups, const std::vector<char>& covered) {
  struct Nz {
    std::int32_t k, row;
    std::int64_t index;
  };
  std::vector<Nz> nz;
  for (std::int64_t r = begin; r < end; ++r)
    for (std::int64_t i = a.row_ptr[r]; i < a.row_ptr[r + 1]; ++i)
      if (covered.empty() || !covered[static_cast<std::size_t>(i)])
        nz.push_back({a.col_idx[i], static_cast<std::int32_t>(r - begin), i});
  std::sort(nz.begin(), nz.end(),
            [](const Nz& x, const Nz& y) { return x.k != y.k ? x.k < y.k : x.row < y.row; });
  std::vector<SpmmGroup> out(static_cast<std::size_t>(groups));
  const auto total = static_cast<std::int64_t>(nz.size());
  std::int64_t g = 0, done = 0;
  for (std::size_t i = 0; i < nz.size();) {
    SpmmStep step{nz[i].k, {}};
    for (; i < nz.size() && nz[i].k == step.k; ++i) step.entries.push_back({nz[i].row, nz[i].index});
    done += static_cast<std::int64_t>(step.entries.size());
    out[static_cast<std::size_t>(g)].steps.push_back(std::move(step));
    while (g < groups - 1 && done >= ceil_div(total * (g + 1), groups)) ++g;
  }
  return out;
}

// The automatic tiling, fitted to a sweep of 51 plans on each of 18 SparseRT problems on an H100
// (sparsecc_bench --sweep; 2.3 % above the sweep's best plan in geometric mean on those problems):
//  - n tile: 64 columns for N > 1024 (more column tiles) and for N <= 64, else N rounded up to a
//    warp, at most 128; but 64 (kNarrowTile) for fp32 unrolled plans of at most kLargeNnz nonzeros
//    where the extra column tiles let the rule below take taller block rows (each B load then feeds
//    more rows) that still hold kGroupNnz nonzeros (so the groups keep the block's threads).
//    Measured on an H100 at batch 1 against the 128 tile in the same run (µs): SparseRT p03 3.21 ->
//    3.04 (90 %) and 2.95 -> 2.69 (95 %), p05 3.89 -> 3.86 and 3.17 -> 2.96, p11 3.34 -> 3.14 and
//    3.40 -> 2.87, p17 2.80 -> 2.61 (90 %), p18 3.49 -> 3.31 and 3.40 -> 2.85; DLMC ResNet-50
//    128x512 at N = 784 3.22 -> 2.92, 256x1024 at N = 196 3.88 -> 3.74, 128x1152 at N = 784 5.80 ->
//    5.61, a Transformer 512x512 at N = 256 3.46 -> 3.16. What the two conditions leave out lost:
//    block rows too light for groups (p17 at 95 %, one group of 64 threads, 2.25 -> 2.50) and the
//    large one-wave layers, whose 512-thread blocks of 128-column tiles it would halve (SparseRT p10
//    10.82 -> 11.22 and 6.68 -> 7.28, DLMC 256x2304 at N = 196 7.34 -> 7.77, 512x1024 5.57 -> 6.13);
//    where the 128 tile already had 16 rows the narrow one only doubled the grid (p06 0.94x, p09
//    0.65x in an earlier run);
//  - rows per block: the most of 16, 8, 4, 2, 1 that still gives a grid of kGridTarget blocks
//    (more rows share each B load, but the grid must cover the SMs: the unrolled code is
//    instruction-fetch bound, and every SM fetches only its own block rows' code);
//  - tall block rows: kTallRows (32) rows for fp32 unrolled plans of one column a thread that hold
//    kTallWork multiply-adds (nnz x N) or more and whose 32-row grid still has kGridTarget blocks.
//    Such kernels stream B from L2 (each block row reads every column of B its rows touch, and at
//    90 % sparsity 16 rows touch 81 % of K, 32 rows 97 %: the same row of B serves twice the rows),
//    so halving the block rows cuts the L2 traffic by 40 %. Measured on an H100 against the 16-row
//    rule in the same run (SparseRT suite): at batch 16, 90 %, all 20 problems faster, 1.02-1.52x,
//    1.22x in geometric mean (p09 and p10, 105k nonzeros at N = 4096, 116 -> 84 and 114 -> 83 us);
//    at 95 % 1.09x (17 faster, up to 1.34x; p19 0.83x: its 32-row grid keeps four groups of 128
//    columns where 16 rows took the wide T256/G2); at batch 1 the 2048x512 Transformer layer at
//    N = 256 10.17 -> 7.45 us (90 %) and 6.06 -> 5.70 (95 %). Light kernels lose (they are bound by
//    a launch and a round trip to L2, and 32 rows double each thread's chain: the batch-1 problems of
//    up to 30k nonzeros 0.85x in geometric mean), and so do grids below kGridTarget (the 512x2048
//    Transformer layer at N = 256, 32 blocks: 10.98 -> 16.27 us); 64 rows (104 registers) lost on all
//    five problems tried at batch 16 (0.73-0.94x).
//  - clustered rows: tall plans at N > kClusterMinColumns (many column tiles: every tile reads its
//    block row's rows of B again) take clustered rows (row_clusters.hpp) where the clustered panels
//    load at most kClusterLoads of the equal panels' rows of B. Measured on an H100 with 32 rows at
//    batch 16 (SparseRT suite, every plan clustered against the tall plans above, two device calls):
//    1.045x (90 %) and 1.09x (95 %) in geometric mean over all 20 problems, but the losses (p07 0.86x,
//    p17 0.90x, p05 and p10 0.96x at 90 %; p10 0.91x, p11 0.90x at 95 %) are mostly where clustering
//    saves few loads (p07 4 %, p10 4-7 %, p11 2-5 %, p05 7 %). The problems the rule keeps (11 at
//    90 %, 13 at 95 %) ran 1.078x and 1.135x faster in geometric mean (p15 1.23x and 1.31x; p17 at
//    90 %, 28 % fewer loads, the one loss of more than 3 %, 0.90x). At batch 1 (16 rows, kernels bound
//    by latency) clustering followed no rule (0.95x and 0.98x over the suite), hence the N condition.
//  - groups: 4 when a block row has kGroupNnz nonzeros or more, else 1; matrices above kLargeNnz
//    keep blocks to 256 threads (their long unrolled bodies need registers), or 512 where the grid
//    is one wave (at most one block an SM of the target, so an SM holds one block and would run only 8 warps):
//    measured on an H100 at batch 1 (same run, 4 groups against 2 at an n tile of 128), the
//    512x2048 Transformer layer at N = 256 12.74 -> 11.01 us (90 %) and 7.67 -> 6.73 (95 %), the
//    DLMC ResNet-50 layers at N = 196 256x2304 8.18 -> 7.30, 1024x512 5.63 -> 4.48 and 512x1024
//    5.94 -> 5.58; two-wave grids lost (2048x512 at N = 256 9.56 -> 11.17), and so did 8 groups of
//    64 columns (2048x512 at N = 49, 95 %: 4.10 -> 6.22), which the cap of 4 groups rules out.
//  - wide tiles instead of groups: where that rule splits K over groups but the block's threads,
//    spent on columns instead (an n tile of up to 256, fewer or no groups), still leave a grid of
//    kWideGrid blocks or more, they are. Fitted on the tuning runs of the SparseRT suite at batch 16
//    (H100): 1.23x in geometric mean over the 13 problems it changes (no loss above 1 %); none of
//    the recorded batch-1 problems (SparseRT, DLMC ResNet-50 and Transformer) changes. Matrices
//    above kLargeNnz whose wide grid would instead be one wave, more than half full (the 2048x512
//    Transformer layers at N = 256: 128 blocks), take the wide tile with the one-wave rule's groups
//    (T256/G2: one block of 512 threads an SM). The H100 tuning runs chose that tiling on 11 of the
//    12 such layers at 95 % (1.06-1.20x over the T128/G2 default) and T256 with 2 or 4 groups on
//    all 12 at 90 % (1.03-1.17x). Where the widest tile's grid stays below kWideGrid, a tile of
//    half that width (a multiple of 32 columns, still wider than the rule's) that keeps kWideGrid
//    blocks is taken instead, with the groups that keep the block's threads: SparseRT p03 and p05 at
//    batch 16 (R32/T64/G4 -> R32/T128/G2, 196 and 104 blocks at T256 but 392 and 200 at T128), the
//    only plans of the SparseRT suites (batch 1 and 16, 90 and 95 %) and DLMC sets it changes.
//    Measured on an H100, two runs each, against the T64/G4 plans in the same device call: 90 %
//    p03 16.35 -> 13.86 us, p05 22.18 -> 18.18; 95 % p03 10.22 -> 9.91, p05 15.63 -> 13.17.
//  - row split: equal panels of rows per block, but panels balanced by nonzeros (a block row may
//    then take up to twice the rows) for fp32 unrolled plans at N below kBalanceMaxColumns with
//    block rows of kBalanceMinRows rows or more whose equal panels are uneven: the heaviest holds
//    kBalanceImbalance more nonzeros than the mean or more. Chosen from the H100 tuning runs of the
//    54 DLMC ResNet-50 layers (batch 1) and 20 DLMC Transformer layers (N = 256), which timed both
//    splits of the same plans, and measured against equal panels in one run (batch 1) on the 28
//    problems it changes there (12 of the SparseRT suite at 90 and 95 %, 11 DLMC ResNet-50 layers,
//    5 Transformer layers the fit had not seen): 1.043x in geometric mean (0.966-1.135x; the three
//    losses, at most 3.4 %, are a 256x2304 and a 1024x256 layer at N = 196 and a 512x128 one at N
//    = 784); at batch 16 (N of 4096 and more, many column tiles) it lost (SparseRT p11 at N = 4096
//    0.85x, p04 0.95x); below 4096 it changes two plans of the 95 % suite at batch 16 (p06 at N =
//    3136 0.97x, p08 at N = 784 1.01x). Single-row block rows cannot be evened out by moving panel
//    borders.
constexpr std::int64_t kGridTarget = 100;
constexpr std::int64_t kTallRows = 32;
constexpr std::int64_t kTallWork = 10'000'000;
constexpr std::int64_t kClusterMinColumns = 1024;
constexpr double kClusterLoads = 0.9;
constexpr std::int32_t kNarrowTile = 64;
constexpr std::int64_t kGroupNnz = 256;
constexpr std::int64_t kLargeNnz = 40000;
constexpr std::int32_t kWideTile = 256;
constexpr std::int64_t kWideGrid = 200;
constexpr double kBalanceImbalance = 0.35;
constexpr std::int64_t kBalanceMinRows = 4;
constexpr std::int64_t kBalanceMaxColumns = 4096;

// The heaviest equal panel of ny rows over the mean panel, minus 1 (0 for an empty matrix).
double equal_panel_imbalance(const CsrMatrix& a, std::int64_t ny) {
  if (a.nnz() == 0 || a.rows == 0) return 0;
  const std::int64_t blocks = ceil_div(a.rows, ny);
  std::int64_t heaviest = 0;
  for (std::int64_t b = 0; b < blocks; ++b)
    heaviest = std::max(heaviest, a.row_ptr[std::min(a.rows, (b + 1) * ny)] - a.row_ptr[b * ny]);
  return static_cast<double>(heaviest) * static_cast<double>(blocks) / static_cast<double>(a.nnz()) - 1.0;
}

// Whether an equal panel of ny rows holds no nonzero. Such panels take no code of their own
// (spmm_plain_empty_block), which balanced borders would undo, so the automatic rule keeps equal panels.
bool has_empty_panel(const CsrMatrix& a, std::int64_t ny) {
  for (std::int64_t r = 0; r < a.rows; r += ny)
    if (a.row_ptr[std::min(a.rows, r + ny)] == a.row_ptr[r]) return true;
  return false;
}

std::int32_t auto_n_tile(std::int64_t n) {
  if (n > 1024) return 64;
  return static_cast<std::int32_t>(std::min<std::int64_t>(ceil_div(n, 32) * 32, n <= 64 ? 64 : 128));
}

// Whether the automatic tiling takes kTallRows rows a block row (see the rule above).
bool auto_tall(const CsrMatrix& a, std::int64_t n, std::int64_t tiles) {
  return a.nnz() * n >= kTallWork && ceil_div(a.rows, kTallRows) * tiles >= kGridTarget;
}

std::int64_t auto_rows_per_block(std::int64_t m, std::int64_t tiles) {
  for (const std::int64_t r : {16, 8, 4, 2})
    if (ceil_div(m, r) * tiles >= kGridTarget) return std::min<std::int64_t>(r, std::max<std::int64_t>(m, 1));
  return 1;
}

// Whether g groups keep the reduction buffer of the tallest block row within the shared memory a
// block is launched with.
bool reduction_fits(std::int64_t g, std::int64_t tallest, std::int64_t n_tile, std::int64_t cols_per_thread,
                    const GpuTarget& target) {
  return spmm_reduction_bytes(g, tallest, n_tile, cols_per_thread) <= target.shared_per_block;
}

std::int32_t auto_groups(const CsrMatrix& a, std::int64_t blocks, std::int64_t tiles, std::int64_t tallest,
                         std::int32_t n_tile, std::int32_t cols_per_thread, const GpuTarget& target) {
  const std::int64_t per_block = blocks ? a.nnz() / blocks : 0;
  if (per_block < kGroupNnz) return 1;
  std::int64_t g = 4;
  // At most 1024 threads (256 for large matrices, 512 in a one-wave grid) and 48 KiB of reduction
  // buffer.
  const std::int64_t threads = a.nnz() <= kLargeNnz ? 1024 : blocks * tiles <= target.sm_count ? 512 : 256;
  while (g > 1 && (g * n_tile > threads || !reduction_fits(g, tallest, n_tile, cols_per_thread, target))) --g;
  return static_cast<std::int32_t>(g);
}

// Rolled plans (a loop over a step table instead of unrolled code). Automatic value mode: rolled for
// fp32 layers of at least kRolledNnz nonzeros and kRolledRowNnz per row on average whose N fits one
// warp of two columns a thread (N <= kRolledColumns): their unrolled code is a megabyte or more that
// each SM fetches for a single column tile. Measured on an H100 with the warp-wide table loads
// (SparseRT suite, batch 1, rolled against the unrolled default): 105k nonzeros at 51 and 205 per
// row 1.20x and 1.26x faster, 52k nonzeros at 51 per row 1.08x and 1.34x, at 102 per row 1.18x;
// at 25 per row (2048x512 at 95 %) rolled lost (6.0 against 5.6 us), and N = 196 or 256 ran
// 1.4-1.7x slower (every column tile reads the table again). Tiling: one row per block row, a warp
// of columns, and the groups that bring the grid to about kRolledWarps warps (4..16 of them, a
// power of two: the faster of 4 and 8 on all ten layers tried; 16 and 32 were slower on each).
constexpr std::int64_t kRolledNnz = 50000;
constexpr std::int64_t kRolledRowNnz = 48;
constexpr std::int64_t kRolledColumns = 64;
constexpr std::int64_t kRolledWarps = 4096;

// Step lanes (SpmmPlan::step_lanes): a rolled plan at a fixed N of at most kSpmmStepLaneColumns
// splits each warp into step_lanes = 32 / N' slots of N' column lanes (N' = N rounded up to a power
// of two), so every lane has a column to work on and the slots share a block row's steps; with a
// column a lane (the layout above) N = 1 leaves 63 of a warp's 64 columns idle. Measured on an H100
// (SparseRT shapes at 90 %, the layers of 52k+ nonzeros, against that layout): N = 1 1.05-1.88x
// (p10 5.33 -> 2.84 us; the ResNet-50 classifier, 1000 x 2048 at 205k nonzeros, 6.41 -> 3.24),
// N = 4 1.27-1.84x, N = 8 1.12-1.56x; at N = 16 0.87-1.19x, so N = 16 keeps that layout. Rolled
// plans at N <= kStepLaneRolledColumns start at kStepLaneNnz nonzeros (still kRolledRowNnz a row):
// the 26k-nonzero layers of 51-102 a row ran 1.05-1.51x faster rolled than unrolled at N = 1 and 4,
// while unrolled plans stayed as fast or faster at 13k and fewer (1.3-1.6x on the smallest), on
// rows of 26 nonzeros (1024 x 256 at N = 1: 2.33 against 2.72 us) and from N = 8 below 50k (p05 at
// N = 16: 3.18 against 4.04 us).
constexpr std::int64_t kStepLaneNnz = 20000;
constexpr std::int64_t kStepLaneRolledColumns = 4;
// Step-lane plans of A with at least kStepLaneTwoRows rows take two rows a block row (a step's record
// then holds both rows' weights): at N = 1 the 2048 x 512 layers ran 4.08 -> 2.90 us and 4.12 ->
// 2.91, 1024 x 512 2.86 -> 2.32, 1024 x 1024 2.99 -> 2.44; layers of 256 and 512 rows gained nothing
// or lost (256 x 1024 2.20 -> 2.34), and four rows were slower than two on every layer; at N = 4
// and 8 two rows moved the same layers within +-20 % either way, geomean unchanged.
constexpr std::int64_t kStepLaneTwoRows = 1000;

bool auto_step_lanes(const SpmmProblem& problem) {
  return problem.dtype == DType::f32 && problem.n_mode == SpmmNMode::fixed && problem.n <= kSpmmStepLaneColumns;
}

bool auto_rolled(const CsrMatrix& a, const SpmmProblem& problem) {
  if (problem.dtype != DType::f32 || a.nnz() < kRolledRowNnz * a.rows) return false;
  const bool few_columns = problem.n_mode == SpmmNMode::fixed && problem.n <= kStepLaneRolledColumns;
  return (problem.n <= kRolledColumns && a.nnz() >= kRolledNnz) || (few_columns && a.nnz() >= kStepLaneNnz);
}

// Step-lane plans also keep a lane's share of a block row's steps at one or more (fewer groups where
// the rule above would leave lanes without a step): at N = 1 the classifier's 8 groups (0.8 steps a
// lane, 8000 warps) took 3.96 us against 3.06 with 4; at N = 4 and 16 the rule's groups were
// 1.1-2.8x faster than 1 or 2 on the layers of 50k+ nonzeros.
std::int32_t rolled_groups(std::int64_t blocks, std::int64_t tiles, std::int32_t n_tile, std::int64_t tallest,
                           std::int32_t step_lanes, std::int64_t nnz, const GpuTarget& target) {
  std::int32_t g = 4;
  while (g < 16 && blocks * tiles * g * ceil_div(n_tile, 32) < kRolledWarps && 2 * g * n_tile <= 1024) g *= 2;
  while (g > 1 && (g * n_tile > 1024 || !reduction_fits(g, tallest, n_tile, 2, target))) g /= 2;
  if (step_lanes > 1)
    while (g > 1 && std::int64_t{g} * step_lanes * blocks > nnz) g /= 2;
  return g;
}

// Fragment plans: the n tile, fitted on the RMB-pruned MobileNet / ResNet-50 suite on an H100
// (sparsecc_bench blocklets --n-tile): one warp per block for N > kFragmentOneWarpColumns (the
// memory-bound layers of 50k columns ran 5-12 % faster with more, smaller blocks), else the usual
// rule (layers of N <= 12544 ran 5-25 % slower with one warp). Groups: splitting a block row's
// fragments over two groups (added through shared memory) pays only where the grid is short of warps
// and block rows are long: the ResNet-50 3x3 layer of block group 3 (800 warps, 29 fragments per
// block row) ran 5 % faster with two; every other layer of the suite 11-79 % slower. So two groups
// when the grid has fewer than kFragmentSplitWarpsPerSm warps an SM of the target and block rows average kFragmentSplitMin
// fragments or more, else one; `groups` is honored when given. (Before the fragments were
// straight-line code, more groups were 1.2-1.6x slower on every layer tried.)
constexpr std::int64_t kFragmentOneWarpColumns = 32768;
constexpr std::int64_t kFragmentSplitWarpsPerSm = 8;
constexpr std::int64_t kFragmentSplitMin = 16;

std::int32_t fragment_groups(const std::vector<std::vector<SpmmFragment>>& fragments, std::int64_t thread_columns,
                             std::int32_t n_tile, const GpuTarget& target) {
  std::int64_t total = 0;
  for (const auto& f : fragments) total += static_cast<std::int64_t>(f.size());
  const auto rows = static_cast<std::int64_t>(fragments.size());
  const std::int64_t warps = rows * ceil_div(thread_columns, n_tile) * ceil_div(n_tile, 32);
  return rows > 0 && total >= kFragmentSplitMin * rows && warps < kFragmentSplitWarpsPerSm * target.sm_count ? 2 : 1;
}

bool tensor_core_shape(BlockShape s) {
  return s == BlockShape{16, 8} || s == BlockShape{16, 16} || s == BlockShape{8, 8};
}

// The blocklet configuration of `o` for `a` (max_blocks 0: none), with how it was chosen.
BlockletConfig choose_blocklets(const CsrMatrix& a, const SpmmProblem& problem, const SpmmOptions& o) {
  BlockletConfig cfg;
  cfg.precision = std::string(dtype_name(problem.dtype));
  cfg.max_blocks = 0;
  if (o.blocklets == SpmmBlockletMode::forced) {
    cfg.shape = o.blocklet_shape;
    cfg.fill_threshold = o.blocklet_fill;
    cfg.max_blocks = kUnlimitedBlocks;
    validate_blocklet_config(cfg);
  } else if (o.blocklets == SpmmBlockletMode::automatic) {
    // The proposal's own winner may be a SIMT shape; the executor runs tensor-core shapes only, so
    // the choice is made here from its estimates.
    std::vector<BlockletCandidate> candidates;
    propose_blocklets(a, {std::string(dtype_name(problem.dtype))}, &candidates);
    // A shape that finds no tile keeps every nonzero in the residual: the largest estimate is the
    // all-residual cost the 5 % saving is measured against.
    double baseline = 0;
    for (const auto& c : candidates) baseline = std::max(baseline, c.estimated_cost);
    const BlockletCandidate* best = nullptr;
    for (const auto& c : candidates)
      if (c.tensor_cores && tensor_core_shape(c.shape) && c.blocks > 0 && c.estimated_cost < 0.95 * baseline &&
          (!best || c.estimated_cost < best->estimated_cost))
        best = &c;
    if (best) {
      cfg.shape = best->shape;
      cfg.fill_threshold = best->fill_threshold;
      cfg.max_blocks = kUnlimitedBlocks;
    }
  }
  return cfg;
}

// Turns the tiles of `d` into fragments of 16-row block rows, marking the nonzeros they take in
// `covered`. 8-row tiles at rows 0 and 8 of a block row at the same k share one fragment.
std::vector<std::vector<SpmmFragment>> fragments_of(const CsrMatrix& a, const BlockletDecomposition& d,
                                                    std::int32_t fk, std::vector<char>& covered) {
  std::vector<std::map<std::int32_t, SpmmFragment>> rows(
      static_cast<std::size_t>(ceil_div(a.rows, kSpmmFragmentRows)));
  const BlockShape s = d.config.shape;
  for (const BlockletTile& t : d.tiles) {
    const auto k = static_cast<std::int32_t>(t.col);
    auto [it, fresh] = rows[static_cast<std::size_t>(t.row / kSpmmFragmentRows)].try_emplace(k);
    SpmmFragment& f = it->second;
    if (fresh) f = {k, std::vector<std::int64_t>(static_cast<std::size_t>(kSpmmFragmentRows * fk), -1)};
    const std::int64_t r0 = t.row % kSpmmFragmentRows;
    for (int r = 0; r < s.bh && t.row + r < a.rows; ++r) {
      const std::int64_t row = t.row + r;
      for (std::int64_t i = a.row_ptr[row]; i < a.row_ptr[row + 1]; ++i) {
        const std::int64_t c = a.col_idx[i] - t.col;
        if (c < 0 || c >= s.bw || a.values[i] == 0.0) continue;  // stored zeros stay in the residual
        f.entries[static_cast<std::size_t>((r0 + r) * fk + c)] = i;
        covered[static_cast<std::size_t>(i)] = 1;
      }
    }
  }
  std::vector<std::vector<SpmmFragment>> out(rows.size());
  for (std::size_t b = 0; b < rows.size(); ++b)
    for (auto& [k, f] : rows[b]) out[b].push_back(std::move(f));
  return out;
}

}  // namespace

void set_blocklets(SpmmOptions& o, const std::string& spec) {
  if (spec == "off") {
    o.blocklets = SpmmBlockletMode::off;
    return;
  }
  if (spec == "auto") {
    o.blocklets = SpmmBlockletMode::automatic;
    return;
  }
  int bh = 0, bw = 0;
  double fill = 1.0;
  char x = 0;
  std::size_t used = 0;
  const std::string shape = spec.substr(0, spec.find(':'));
  if (std::sscanf(shape.c_str(), "%d%c%d%zn", &bh, &x, &bw, &used) < 3 || x != 'x' || used != shape.size())
    throw UsageError(fmt::format("--blocklets '{}': expected off, auto or BHxBW[:FILL] (e.g. 16x8:0.75)", spec));
  if (spec.size() > shape.size()) {
    const std::string f = spec.substr(shape.size() + 1);
    char* end = nullptr;
    fill = std::strtod(f.c_str(), &end);
    if (f.empty() || *end != '\0' || !(fill > 0.0 && fill <= 1.0))
      throw UsageError(fmt::format("--blocklets '{}': the fill threshold must be a number in (0, 1]", spec));
  }
  if (!tensor_core_shape({bh, bw}))
    throw UsageError(fmt::format("--blocklets '{}': tensor-core tiles are 16x8, 16x16 or 8x8", spec));
  o.blocklets = SpmmBlockletMode::forced;
  o.blocklet_shape = {bh, bw};
  o.blocklet_fill = fill;
}

std::optional<SpmmProgrammatic> parse_programmatic(const std::string& word, const std::string& what) {
  if (word == "auto") return std::nullopt;
  if (word == "off") return SpmmProgrammatic::off;
  if (word == "wait") return SpmmProgrammatic::wait;
  if (word == "trigger") return SpmmProgrammatic::trigger;
  throw UsageError(fmt::format("{} '{}': expected auto, off, wait or trigger", what, word));
}

std::string spmm_shape_rule(const GpuTarget& target) {
  return fmt::format("SpMM executors take matrices of 1 to {} rows (the grid's {} block rows of up to {} rows) and "
                     "at least one column",
                     spmm_max_rows(target), target.max_grid_y, kSpmmMaxAccumulators);
}

void require_spmm_matrix(const CsrMatrix& a, const SourceLocation& where, const GpuTarget& target) {
  if (a.rows < 1 || a.cols < 1 || a.rows > spmm_max_rows(target))
    throw InputError(where, fmt::format("the matrix is {}x{}; {}", a.rows, a.cols, spmm_shape_rule(target)));
}

namespace {

SpmmPlan plan_spmm_once(const CsrMatrix& a, const SpmmProblem& problem, const SpmmOptions& options,
                        const GpuTarget& target) {
  validate(a);
  if (problem.m != a.rows || problem.k != a.cols)
    throw UsageError(
        fmt::format("plan_spmm: problem is {}x{} but A is {}x{}", problem.m, problem.k, a.rows, a.cols));
  if (problem.n < 1) throw UsageError("plan_spmm: n must be positive");
  if (a.rows < 1 || a.cols < 1 || a.rows > spmm_max_rows(target))
    throw UsageError(fmt::format("plan_spmm: A is {}x{}; {}", a.rows, a.cols, spmm_shape_rule(target)));
  if (options.rows_per_block > 0 && options.rows_per_block <= kSpmmMaxAccumulators &&
      ceil_div(a.rows, options.rows_per_block) > target.max_grid_y)
    throw UsageError(fmt::format(
        "plan_spmm: {} rows in block rows of {} rows make {} block rows, more than the grid's {}; take at least {} "
        "rows per block",
        a.rows, options.rows_per_block, ceil_div(a.rows, options.rows_per_block), target.max_grid_y,
        ceil_div(a.rows, target.max_grid_y)));
  if (!spmm_dtype(problem.dtype))
    throw UsageError(fmt::format("plan_spmm: dtype '{}' is not f32, f16 or bf16", problem.dtype));
  SpmmPlan p;
  p.problem = problem;
  p.epilogue.bias = problem.bias;
  p.epilogue.relu = problem.relu;
  p.epilogue.output = problem.dtype;
  p.hints.kernel_name = options.kernel_name;
  p.layout.row_split = options.row_split.value_or(SpmmRowSplit::equal);
  const bool rolled = options.value_mode ? *options.value_mode == SpmmValueMode::rolled
                                         : options.blocklets == SpmmBlockletMode::off &&
                                               options.row_split != SpmmRowSplit::clustered && options.stage_min_entries == 0 &&
                                               auto_rolled(a, problem);
  if (rolled && (problem.dtype != DType::f32 || options.blocklets != SpmmBlockletMode::off))
    throw UsageError("plan_spmm: rolled plans are fp32 without blocklets");
  if (rolled && p.layout.row_split != SpmmRowSplit::equal)
    throw UsageError("plan_spmm: rolled plans take equal row panels (the kernel finds a block row's rows by its index)");
  bool clustered = p.layout.row_split == SpmmRowSplit::clustered;
  if (clustered && (problem.dtype != DType::f32 || options.blocklets != SpmmBlockletMode::off))
    throw UsageError("plan_spmm: clustered rows need an fp32 plan without blocklets");
  if (options.step_lanes < 0 || options.step_lanes > 32 ||
      (options.step_lanes & (options.step_lanes - 1)) != 0)
    throw UsageError(
        fmt::format("plan_spmm: {} step lanes: expected a power of two in 1..32", options.step_lanes));
  if (options.step_lanes > 1 && !rolled)
    throw UsageError("plan_spmm: step lanes need a rolled plan (--values rolled)");
  p.body = spmm_body(rolled ? SpmmFamily::rolled : SpmmFamily::unrolled);
  const std::int32_t step_lanes = options.step_lanes ? options.step_lanes
                 : rolled && auto_step_lanes(problem) && (!options.n_tile || options.n_tile == 32) &&
                         !options.cols_per_thread
                     ? spmm_step_lanes_for(problem.n)
                     : 1;
  if (rolled) p.rolled()->step_lanes = step_lanes;
  if (p.step_lanes() > 1 && options.n_tile && options.n_tile != 32)
    throw UsageError(fmt::format("plan_spmm: step lanes need groups of one warp (an n tile of 32, not {})",
                                 options.n_tile));
  p.layout.cols_per_thread = problem.dtype == DType::f32 && (!rolled || p.step_lanes() > 1) ? 1 : 2;
  if (options.cols_per_thread != 0 && options.cols_per_thread != p.layout.cols_per_thread) {
    if (options.cols_per_thread != 2 || p.layout.cols_per_thread != 1 || rolled)
      throw UsageError(fmt::format(
          "plan_spmm: {} columns a thread: {} plans take {}", options.cols_per_thread,
          rolled ? p.step_lanes() > 1 ? "rolled step-lane" : "rolled" : dtype_name(problem.dtype), p.layout.cols_per_thread));
    if (problem.n_mode != SpmmNMode::fixed || problem.n % 2 != 0)
      throw UsageError(fmt::format("plan_spmm: two fp32 columns a thread need a fixed even N (N is {}{})",
                                   problem.n, problem.n_mode == SpmmNMode::fixed ? "" : ", at run time"));
    p.layout.cols_per_thread = 2;
  }
  p.epilogue.accumulate = options.accumulate;
  if (p.epilogue.accumulate != DType::f32 && p.epilogue.accumulate != problem.dtype)
    throw UsageError(fmt::format("plan_spmm: accumulation in {} needs dtype {} (or f32 accumulation)",
                                 p.epilogue.accumulate, p.epilogue.accumulate));
  // Blocklets: tiles of A for the tensor cores, decided before the tiling (they fix it).
  std::vector<char> covered;
  std::vector<std::vector<SpmmFragment>> fragments;
  if (options.blocklets != SpmmBlockletMode::off) {
    if (!p.half()) throw UsageError("plan_spmm: blocklets run on fp16 / bf16 tensor cores; choose dtype f16 or bf16");
    const BlockletConfig cfg = choose_blocklets(a, problem, options);
    if (cfg.max_blocks > 0) {
      const BlockletDecomposition d = decompose_blocklets(a, cfg);
      if (!d.tiles.empty()) {
        if ((options.rows_per_block && options.rows_per_block != kSpmmFragmentRows) ||
            (options.n_tile % 32) != 0 || p.layout.row_split != SpmmRowSplit::equal)
          throw UsageError(fmt::format(
              "plan_spmm: tensor-core tiles need 16 rows per block, equal rows and an n tile of whole warps"));
        p.fragments = SpmmFragments{cfg.shape.bw, {}};
        covered.assign(static_cast<std::size_t>(a.nnz()), 0);
        fragments = fragments_of(a, d, p.fragment_k(), covered);
        p.fragments->blocklets = {block_shape_name(cfg.shape), cfg.fill_threshold,
                       options.blocklets == SpmmBlockletMode::forced ? "forced" : "auto",
                       static_cast<std::int64_t>(d.tiles.size()), d.nnz_covered(), d.explicit_zeros()};
      }
    }
  }
  const std::int64_t thread_columns = ceil_div(problem.n, p.layout.cols_per_thread);
  p.layout.n_tile = options.n_tile                                        ? options.n_tile
             : p.step_lanes() > 1                                    ? 32
             : p.fragment_k() && problem.n > kFragmentOneWarpColumns ? 32
                                                                   : auto_n_tile(thread_columns);
  if (p.layout.n_tile < 1) throw UsageError("plan_spmm: the n tile must be positive");
  const bool tall = !options.rows_per_block && !p.fragment_k() && !p.half() && !rolled &&
                    p.layout.cols_per_thread == 1 && auto_tall(a, problem.n, ceil_div(thread_columns, p.layout.n_tile));
  if (!tall && !options.n_tile && !options.rows_per_block && !p.fragment_k() && !p.half() && !rolled &&
      p.layout.n_tile > kNarrowTile && a.nnz() <= kLargeNnz) {
    const std::int64_t narrow_rows = auto_rows_per_block(a.rows, ceil_div(thread_columns, kNarrowTile));
    if (narrow_rows > auto_rows_per_block(a.rows, ceil_div(thread_columns, p.layout.n_tile)) &&
        a.nnz() / ceil_div(a.rows, narrow_rows) >= kGroupNnz)
      p.layout.n_tile = kNarrowTile;
  }
  // Automatic block rows take at least the rows that keep the block rows within the grid.
  const std::int64_t ny = p.fragment_k()             ? kSpmmFragmentRows
                          : options.rows_per_block ? options.rows_per_block
                                                   : std::max(ceil_div(a.rows, target.max_grid_y),
                                                              rolled ? (p.step_lanes() > 1 && a.rows >= kStepLaneTwoRows ? 2 : 1)
                                                              : tall ? kTallRows
                                                                     : auto_rows_per_block(a.rows, ceil_div(thread_columns, p.layout.n_tile)));
  if (ny < 1 || ny > kSpmmMaxAccumulators)
    throw UsageError(fmt::format("plan_spmm: {} rows per block exceed the {} accumulators a thread may hold",
                                 ny, kSpmmMaxAccumulators));
  const std::int64_t blocks = ceil_div(a.rows, ny);
  if (blocks > target.max_grid_y)
    throw UsageError(fmt::format("plan_spmm: {} block rows of {} rows exceed the grid's {}; take more rows per block",
                                 blocks, ny, target.max_grid_y));
  // Clustered rows: the block rows are equal panels of A's rows regrouped by cluster_rows, planned as
  // the regrouped matrix; its nonzeros' indices are mapped back to A's below.
  // Tall plans over many column tiles cluster their rows where that cuts the B loads enough (see the
  // rule above).
  CsrMatrix regrouped;
  std::vector<std::int64_t> source_index;
  if (clustered) p.layout.row_order = cluster_rows(a, ny);
  if (tall && !options.row_split && problem.n > kClusterMinColumns) {
    std::vector<std::int64_t> order = cluster_rows(a, ny);
    if (static_cast<double>(panel_column_pairs(a, order, ny)) <=
        kClusterLoads * static_cast<double>(panel_column_pairs(a, {}, ny))) {
      clustered = true;
      p.layout.row_split = SpmmRowSplit::clustered;
      p.layout.row_order = std::move(order);
    }
  }
  if (clustered) regrouped = permute_rows(a, p.layout.row_order, &source_index);
  const CsrMatrix& rows = clustered ? regrouped : a;
  // The row split does not depend on the groups; the groups' reduction buffer depends on the tallest
  // block row (the plan's rows_per_block, at least 1), which a balanced split may make up to twice Ny.
  if (!options.row_split && !clustered && !rolled && !p.fragment_k() && !p.half() && ny >= kBalanceMinRows &&
      problem.n < kBalanceMaxColumns && !has_empty_panel(a, ny) && equal_panel_imbalance(a, ny) >= kBalanceImbalance)
    p.layout.row_split = SpmmRowSplit::balanced;
  const std::int64_t cap =
      p.layout.row_split != SpmmRowSplit::balanced ? ny : std::min<std::int64_t>(2 * ny, kSpmmMaxAccumulators);
  const auto borders = row_borders(rows, blocks, ny, cap, p.layout.row_split);
  std::int64_t tallest = 1;
  for (std::int64_t b = 0; b < blocks; ++b) tallest = std::max(tallest, borders[b + 1] - borders[b]);
  p.layout.groups =
      options.groups ? options.groups
      : p.fragment_k() ? fragment_groups(fragments, thread_columns, p.layout.n_tile, target)
      : rolled
          ? rolled_groups(blocks,
                          ceil_div(problem.n, std::int64_t{p.layout.n_tile} / p.step_lanes() * p.layout.cols_per_thread),
                          p.layout.n_tile, tallest, p.step_lanes(), a.nnz(), target)
          : auto_groups(a, blocks, ceil_div(thread_columns, p.layout.n_tile), tallest, p.layout.n_tile, p.layout.cols_per_thread, target);
  if (!options.n_tile && !options.groups && !p.fragment_k() && !p.half() && !rolled && p.layout.groups > 1) {
    const auto wide = static_cast<std::int32_t>(std::min<std::int64_t>(
        {std::int64_t{p.layout.n_tile} * p.layout.groups, kWideTile, ceil_div(thread_columns, 32) * 32}));
    const std::int64_t wide_grid = ceil_div(thread_columns, wide) * blocks;
    if (wide > p.layout.n_tile && wide_grid >= kWideGrid) {
      p.layout.groups = std::max(1, p.layout.n_tile * p.layout.groups / wide);
      p.layout.n_tile = wide;
    } else if (wide > p.layout.n_tile && a.nnz() > kLargeNnz && wide_grid <= target.sm_count && 2 * wide_grid > target.sm_count) {
      p.layout.n_tile = wide;  // one wave of wide blocks, with the groups of the one-wave rule
      p.layout.groups = auto_groups(a, blocks, ceil_div(thread_columns, wide), tallest, wide, p.layout.cols_per_thread, target);
    } else {  // a tile of half the width (or a quarter), where that grid still has kWideGrid blocks
      for (std::int32_t half = wide / 2; half > p.layout.n_tile && half % 32 == 0; half /= 2)
        if (ceil_div(thread_columns, half) * blocks >= kWideGrid) {
          p.layout.groups = std::max(1, p.layout.n_tile * p.layout.groups / half);
          p.layout.n_tile = half;
          break;
        }
    }
  }
  if (p.layout.n_tile < 1 || p.layout.groups < 1 || std::int64_t{p.layout.n_tile} * p.layout.groups > 1024)
    throw UsageError(
        fmt::format("plan_spmm: {} groups of {} threads exceed 1024 threads", p.layout.groups, p.layout.n_tile));
  p.layout.block_x = p.layout.n_tile * p.layout.groups;
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t begin = borders[b], end = borders[b + 1];
    p.layout.blocks.push_back({begin, end, block_groups(rows, begin, end, p.layout.groups, covered),
                        fragments.empty() ? std::vector<SpmmFragment>{} : std::move(fragments[b])});
  }
  if (clustered)
    for (auto& b : p.layout.blocks)
      for (auto& g : b.groups)
        for (auto& s : g.steps)
          for (auto& e : s.entries) e.value_index = source_index[static_cast<std::size_t>(e.value_index)];
  p.layout.rows_per_block = static_cast<std::int32_t>(tallest);
  p.layout.panel_rows = static_cast<std::int32_t>(ny);
  if (p.fragment_k()) p.layout.rows_per_block = kSpmmFragmentRows;
  if (options.stage_min_entries < 0)
    throw UsageError(fmt::format("plan_spmm: stage_min_entries {} is negative", options.stage_min_entries));
  if (options.stage_min_entries > 0) {
    if (rolled || p.half() || p.fragment_k())
      throw UsageError("plan_spmm: staged steps need an fp32 unrolled plan");
    std::int64_t dense = 0;  // the most dense steps of one group
    for (const auto& b : p.layout.blocks)
      for (const auto& g : b.groups)
        dense = std::max<std::int64_t>(
            dense, std::count_if(g.steps.begin(), g.steps.end(), [&](const SpmmStep& s) {
              return static_cast<std::int64_t>(s.entries.size()) >= options.stage_min_entries;
            }));
    const std::int64_t slot_bytes = std::int64_t{p.layout.block_x} * p.layout.cols_per_thread * 4;
    const std::int64_t fit = (target.shared_per_block - spmm_stage_offset(p)) / slot_bytes;
    const auto slots = static_cast<std::int32_t>(std::min<std::int64_t>({dense, fit, kSpmmMaxStageSlots}));
    if (slots > 0) {  // else nothing is dense (or nothing fits): the plan is the unstaged one
      p.unrolled()->stage_min_entries = options.stage_min_entries;
      p.unrolled()->stage_slots = slots;
    }
  }
  p.layout.shared_bytes = spmm_shared_bytes(p);
  if (p.layout.shared_bytes > target.shared_per_block)
    throw UsageError(fmt::format("plan_spmm: {} groups of {} threads need {} bytes of shared memory, more than the {} "
                                 "a block is launched with; take fewer groups or a smaller n tile",
                                 p.layout.groups, p.layout.n_tile, p.layout.shared_bytes, target.shared_per_block));
  // One float accumulator per row, two for half plans accumulating in fp32 (a column pair); fragment
  // plans add the 8 x 4 floats of a warp's mma tile and a fragment's operand words.
  const bool pairs = !p.half() && !rolled && p.layout.cols_per_thread == 2;  // two FMAs an entry
  const std::int32_t per_row =
      (p.half() && p.epilogue.accumulate == DType::f32) || (rolled && p.step_lanes() == 1) || pairs ? 2 : 1;
  p.hints.estimated_registers = p.layout.rows_per_block * per_row + kSpmmRegisterOverhead + (p.fragment_k() ? 36 : 0);
  // A rolled kernel keeps step records and a batch of B loads (kSpmmRolledBatch steps) in flight.
  const std::int64_t in_flight = p.fragment_k() ? kFragmentLoadsInFlight
                                 : rolled     ? std::int64_t{kSpmmRolledBatch} * ((1 + ny + 3) / 4 * 4 + 2)
                                 : pairs      ? 2 * kLoadsInFlight  // a pair of floats a load
                                              : kLoadsInFlight;
  // Without a cap ptxas hoists every load of a long unrolled block and takes up to 255 registers
  // (and spills past them); the cap leaves room for the accumulators and some loads in flight.
  p.hints.max_registers = options.max_registers
                        ? options.max_registers
                        : static_cast<std::int32_t>(std::min<std::int64_t>(
                              std::int64_t{target.max_registers_per_thread},
                              ceil_div(p.hints.estimated_registers + in_flight, 8) * 8));
  if (p.hints.max_registers < p.hints.estimated_registers || p.hints.max_registers > target.max_registers_per_thread)
    throw UsageError(fmt::format("plan_spmm: a register cap of {} is outside {}..{}", p.hints.max_registers,
                                 p.hints.estimated_registers, target.max_registers_per_thread));
  // B loads + FMAs (two an entry with fp32 pairs); a fragment takes its operand load and, for each
  // of the warp's 8 column groups, fragment_k / 2 B loads, their packing and one mma.
  p.hints.estimated_instructions = spmm_plan_loads(p) + spmm_plan_nnz(p) * (pairs ? 2 : 1) +
                             p.fragment_count() * (1 + 8 * (p.fragment_k() / 2 + p.fragment_k() / 4 + 1));
  p.hints.assembler_opt_level = options.assembler_opt_level.value_or(3);
  if (p.hints.assembler_opt_level < 0 || p.hints.assembler_opt_level > 3)
    throw UsageError(fmt::format("plan_spmm: assembler optimization level {} is outside 0..3",
                                 p.hints.assembler_opt_level));
  // A plan whose nonzeros all sit in fragments has no unrolled values to stream.
  if (SpmmUnrolledBody* u = p.unrolled())
    u->values = options.value_mode.value_or(p.hints.estimated_instructions <= options.baked_instruction_budget ||
                                                       spmm_plan_nnz(p) == 0
                                                   ? SpmmValueMode::baked
                                                   : SpmmValueMode::streamed);
  if (p.value_mode() == SpmmValueMode::streamed)
    for (const auto& b : p.layout.blocks)
      for (const auto& g : b.groups)
        for (const auto& s : g.steps)
          for (const auto& e : s.entries) p.unrolled()->packed_order.push_back(e.value_index);
  const SpmmProgrammatic programmatic = options.programmatic.value_or(
      !p.half() && (rolled || p.hints.estimated_instructions <= kSpmmProgrammaticTriggerInstructions)
          ? SpmmProgrammatic::trigger
          : SpmmProgrammatic::wait);
  if (programmatic == SpmmProgrammatic::trigger && p.half())
    throw UsageError(
        "plan_spmm: f16 / bf16 kernels wait for their predecessor but do not let the next grid "
        "launch early (programmatic wait or off)");
  p.hints.programmatic = programmatic != SpmmProgrammatic::off;
  p.hints.programmatic_trigger = programmatic == SpmmProgrammatic::trigger;
  return p;
}

}  // namespace

SpmmPlan plan_spmm(const CsrMatrix& a, const SpmmProblem& problem, const SpmmOptions& options,
                   const GpuTarget& target) {
  SpmmPlan p = plan_spmm_once(a, problem, options, target);
  if (p.value_mode() == SpmmValueMode::rolled) return p;
  const std::int64_t rows = spmm_rows_with_code(p);
  if (rows <= kSpmmMaxRowsWithCode) return p;
  // Unrolled code would grow with the rows (see kSpmmMaxRowsWithCode): the automatic fp32 plan rolls.
  const bool automatic = !options.value_mode && problem.dtype == DType::f32 &&
                         options.blocklets == SpmmBlockletMode::off &&
                         (!options.row_split || *options.row_split == SpmmRowSplit::equal) &&
                         options.stage_min_entries == 0 && options.step_lanes == 0 && options.cols_per_thread == 0;
  if (automatic) {
    SpmmOptions rolled = options;
    rolled.value_mode = SpmmValueMode::rolled;
    rolled.row_split = SpmmRowSplit::equal;
    return plan_spmm_once(a, problem, rolled, target);
  }
  throw UsageError(fmt::format(
      "plan_spmm: this {} plan writes {} rows of C with code of their own, more than the {} an unrolled "
      "executor takes (its code would take minutes and gigabytes to assemble); {}",
      problem.dtype, rows, kSpmmMaxRowsWithCode,
      problem.dtype == DType::f32 ? "take --values rolled, or the automatic plan"
                             : "f16 / bf16 executors unroll every row with nonzeros, so this matrix needs fp32"));
}

}  // namespace sparsecc
