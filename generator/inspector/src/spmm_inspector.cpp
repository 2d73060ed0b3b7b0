#include "sparsecc/inspector/spmm_inspector.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <tuple>

#include "sparsecc/common/error.hpp"
#include "sparsecc/inspector/row_clusters.hpp"
#include "sparsecc/inspector/spmm_decisions.hpp"
#include "sparsecc/target/target.hpp"

namespace sparsecc {

namespace spmm_rules {

SpmmInspection inspect_for_spmm(const CsrMatrix& a) {
  SpmmInspection in;
  in.rows = a.rows;
  in.cols = a.cols;
  in.nnz = a.nnz();
  for (std::int64_t r = 0; r < a.rows; ++r) {
    const std::int64_t n = a.row_nnz(r);
    in.max_row_nnz = std::max(in.max_row_nnz, n);
    in.empty_rows += n == 0;
  }
  return in;
}

// ---- Family and body ----

bool auto_rolled(const SpmmInspection& in, const SpmmProblem& problem) {
  if (problem.dtype != DType::f32 || in.nnz < kRolledRowNnz * in.rows) return false;
  const bool few_columns = problem.n_mode == SpmmNMode::fixed && problem.n <= kStepLaneRolledColumns;
  return (problem.n <= kRolledColumns && in.nnz >= kRolledNnz) || (few_columns && in.nnz >= kStepLaneNnz);
}

SpmmFamily choose_family(const SpmmInspection& in, const SpmmProblem& problem, const SpmmOptions& options) {
  if (options.value_mode ? *options.value_mode == SpmmValueMode::compressed
                         : auto_compressed(in, problem, options))
    return SpmmFamily::compressed;
  const bool rolled = options.value_mode ? *options.value_mode == SpmmValueMode::rolled
                                         : options.blocklets == SpmmBlockletMode::off &&
                                               options.row_split != SpmmRowSplit::clustered &&
                                               options.stage_min_entries == 0 && auto_rolled(in, problem);
  if (rolled && (problem.dtype != DType::f32 || options.blocklets != SpmmBlockletMode::off))
    throw UsageError("plan_spmm: rolled plans are fp32 without blocklets");
  return rolled ? SpmmFamily::rolled : SpmmFamily::unrolled;
}

SpmmOptions conv_options(const SpmmInspection& in, const SpmmProblem& problem, SpmmOptions o) {
  const rt::ConvGeometry& g = *problem.conv;
  if (const auto errors = rt::check_conv_geometry(g); !errors.empty())
    throw UsageError(fmt::format("plan_spmm: convolution {}: {}", rt::describe(g), errors.front()));
  if (problem.k != g.k() || problem.n != g.pixels() || problem.n_mode != SpmmNMode::fixed)
    throw UsageError(fmt::format(
        "plan_spmm: the convolution {} multiplies {} filter columns into {} output pixels (a fixed N), "
        "not {} into {}",
        rt::describe(g), g.k(), g.pixels(), problem.k, problem.n));
  const bool half = problem.dtype != DType::f32;
  // f16 / bf16: the unrolled half family, two pixels a thread; the automatic blocklet choice is off.
  if (half && o.blocklets == SpmmBlockletMode::automatic) o.blocklets = SpmmBlockletMode::off;
  if (o.blocklets != SpmmBlockletMode::off || o.stage_min_entries > 0 || o.step_lanes > 1 ||
      (!half && o.cols_per_thread == 2) || (o.value_mode && *o.value_mode == SpmmValueMode::compressed))
    throw UsageError(
        "plan_spmm: convolution executors take no blocklets, staged steps, step lanes, two fp32 columns a "
        "thread or compressed values");
  if (half && o.value_mode && *o.value_mode == SpmmValueMode::rolled)
    throw UsageError(
        fmt::format("plan_spmm: rolled convolution executors are fp32; {} is not taken", problem.dtype));
  const bool rolled = half           ? false
                      : o.value_mode ? *o.value_mode == SpmmValueMode::rolled
                                     : (in.nnz > kConvUnrolledNnz && !spmm_conv_tap_pointers(problem)) ||
                                           auto_rolled(in, problem);
  if (rolled) {
    if (o.n_tile % 32 != 0)
      throw UsageError(
          fmt::format("plan_spmm: a rolled convolution takes an n tile of whole warps, not {}", o.n_tile));
    o.value_mode = SpmmValueMode::rolled;
    o.step_lanes = 1;
    o.row_split = SpmmRowSplit::equal;
  } else if (!half) {
    o.cols_per_thread = 1;  // the value mode stays the options' or the rule's (not rolled: see above)
  }
  return o;
}

std::int32_t choose_step_lanes(const SpmmProblem& problem, const SpmmOptions& options, SpmmFamily family) {
  const bool rolled = family == SpmmFamily::rolled;
  if (options.step_lanes < 0 || options.step_lanes > 32 ||
      (options.step_lanes & (options.step_lanes - 1)) != 0)
    throw UsageError(
        fmt::format("plan_spmm: {} step lanes: expected a power of two in 1..32", options.step_lanes));
  if (options.step_lanes > 1 && !rolled)
    throw UsageError("plan_spmm: step lanes need a rolled plan (--values rolled)");
  const bool automatic =
      problem.dtype == DType::f32 && problem.n_mode == SpmmNMode::fixed && problem.n <= kSpmmStepLaneColumns;
  const std::int32_t lanes =
      options.step_lanes ? options.step_lanes
      : rolled && automatic && (!options.n_tile || options.n_tile == 32) && !options.cols_per_thread
          ? spmm_step_lanes_for(problem.n)
          : 1;
  if (lanes > 1 && options.n_tile && options.n_tile != 32)
    throw UsageError(fmt::format("plan_spmm: step lanes need groups of one warp (an n tile of 32, not {})",
                                 options.n_tile));
  return lanes;
}

std::int32_t choose_cols_per_thread(const SpmmProblem& problem, const SpmmOptions& options, SpmmFamily family,
                                    std::int32_t step_lanes) {
  const bool rolled = family == SpmmFamily::rolled;
  const std::int32_t rule = problem.dtype == DType::f32 && (!rolled || step_lanes > 1) ? 1 : 2;
  if (options.cols_per_thread == 0 || options.cols_per_thread == rule) return rule;
  if (options.cols_per_thread != 2 || rule != 1 || rolled)
    throw UsageError(fmt::format(
        "plan_spmm: {} columns a thread: {} plans take {}", options.cols_per_thread,
        rolled ? step_lanes > 1 ? "rolled step-lane" : "rolled" : dtype_name(problem.dtype), rule));
  if (problem.n_mode != SpmmNMode::fixed || problem.n % 2 != 0)
    throw UsageError(fmt::format("plan_spmm: two fp32 columns a thread need a fixed even N (N is {}{})",
                                 problem.n, problem.n_mode == SpmmNMode::fixed ? "" : ", at run time"));
  return 2;
}

SpmmEpilogue choose_epilogue(const SpmmProblem& problem, const SpmmOptions& options) {
  const DType accumulate = options.accumulate.value_or(DType::f32);
  if (accumulate != DType::f32 && accumulate != problem.dtype)
    throw UsageError(fmt::format("plan_spmm: accumulation in {} needs dtype {} (or f32 accumulation)",
                                 accumulate, accumulate));
  return {problem.bias, problem.relu, accumulate, problem.dtype};
}

// ---- Tensor-core fragments ----

bool tensor_core_shape(BlockShape s) {
  return s == BlockShape{16, 8} || s == BlockShape{16, 16} || s == BlockShape{8, 8};
}

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
      if (c.tensor_cores && tensor_core_shape(c.shape) && c.blocks > 0 &&
          c.estimated_cost < 0.95 * baseline && (!best || c.estimated_cost < best->estimated_cost))
        best = &c;
    if (best) {
      cfg.shape = best->shape;
      cfg.fill_threshold = best->fill_threshold;
      cfg.max_blocks = kUnlimitedBlocks;
    }
  }
  return cfg;
}

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

// ---- Tiling ----

std::int32_t auto_n_tile(std::int64_t n) {
  if (n > 1024) return 64;
  return static_cast<std::int32_t>(std::min<std::int64_t>(ceil_div(n, 32) * 32, n <= 64 ? 64 : 128));
}

std::int32_t choose_n_tile(const SpmmProblem& problem, const SpmmOptions& options,
                           std::int64_t thread_columns, std::int32_t step_lanes, bool fragments) {
  const std::int32_t t = options.n_tile                                     ? options.n_tile
                         : step_lanes > 1                                   ? 32
                         : fragments && problem.n > kFragmentOneWarpColumns ? 32
                                                                            : auto_n_tile(thread_columns);
  if (t < 1) throw UsageError("plan_spmm: the n tile must be positive");
  return t;
}

bool choose_tall(const SpmmInspection& in, std::int64_t n, std::int64_t tiles) {
  return in.nnz * n >= kTallWork && ceil_div(in.rows, kTallRows) * tiles >= kGridTarget;
}

std::int64_t auto_rows_per_block(std::int64_t m, std::int64_t tiles) {
  for (const std::int64_t r : {16, 8, 4, 2})
    if (ceil_div(m, r) * tiles >= kGridTarget) return std::min<std::int64_t>(r, std::max<std::int64_t>(m, 1));
  return 1;
}

std::int32_t choose_narrow_tile(const SpmmInspection& in, std::int64_t thread_columns, std::int32_t n_tile) {
  if (n_tile <= kNarrowTile || in.nnz > kLargeNnz) return n_tile;
  const std::int64_t narrow_rows = auto_rows_per_block(in.rows, ceil_div(thread_columns, kNarrowTile));
  if (narrow_rows > auto_rows_per_block(in.rows, ceil_div(thread_columns, n_tile)) &&
      in.nnz / ceil_div(in.rows, narrow_rows) >= kGroupNnz)
    return kNarrowTile;
  return n_tile;
}

std::int64_t choose_rows_per_block(const SpmmInspection& in, const SpmmOptions& options,
                                   const SpmmRowsContext& c, const GpuTarget& target) {
  // Automatic block rows take at least the rows that keep the block rows within the grid.
  const std::int64_t ny = c.fragments ? kSpmmFragmentRows
                          : options.rows_per_block
                              ? options.rows_per_block
                              : std::max(ceil_div(in.rows, target.max_grid_y),
                                         c.family == SpmmFamily::rolled
                                             ? (c.step_lanes > 1 && in.rows >= kStepLaneTwoRows ? 2 : 1)
                                         : c.tall ? kTallRows
                                                  : auto_rows_per_block(in.rows, c.tiles));
  if (ny < 1 || ny > kSpmmMaxAccumulators)
    throw UsageError(fmt::format("plan_spmm: {} rows per block exceed the {} accumulators a thread may hold",
                                 ny, kSpmmMaxAccumulators));
  const std::int64_t blocks = ceil_div(in.rows, ny);
  if (blocks > target.max_grid_y)
    throw UsageError(
        fmt::format("plan_spmm: {} block rows of {} rows exceed the grid's {}; take more rows per block",
                    blocks, ny, target.max_grid_y));
  return ny;
}

std::optional<std::vector<std::int64_t>> choose_clustered_rows(const CsrMatrix& a, std::int64_t ny,
                                                               std::int64_t n) {
  if (n <= kClusterMinColumns) return std::nullopt;
  std::vector<std::int64_t> order = cluster_rows(a, ny);
  if (static_cast<double>(panel_column_pairs(a, order, ny)) <=
      kClusterLoads * static_cast<double>(panel_column_pairs(a, {}, ny)))
    return order;
  return std::nullopt;
}

double equal_panel_imbalance(const CsrMatrix& a, std::int64_t ny) {
  if (a.nnz() == 0 || a.rows == 0) return 0;
  const std::int64_t blocks = ceil_div(a.rows, ny);
  std::int64_t heaviest = 0;
  for (std::int64_t b = 0; b < blocks; ++b)
    heaviest = std::max(heaviest, a.row_ptr[std::min(a.rows, (b + 1) * ny)] - a.row_ptr[b * ny]);
  return static_cast<double>(heaviest) * static_cast<double>(blocks) / static_cast<double>(a.nnz()) - 1.0;
}

// Empty panels take no code of their own (spmm_plain_empty_block), which balanced borders would undo,
// so the automatic rule keeps equal panels where one is empty.
bool has_empty_panel(const CsrMatrix& a, std::int64_t ny) {
  for (std::int64_t r = 0; r < a.rows; r += ny)
    if (a.row_ptr[std::min(a.rows, r + ny)] == a.row_ptr[r]) return true;
  return false;
}

SpmmRowSplit choose_row_split(const CsrMatrix& a, std::int64_t ny, std::int64_t n, bool eligible,
                              SpmmRowSplit current) {
  if (eligible && ny >= kBalanceMinRows && n < kBalanceMaxColumns && !has_empty_panel(a, ny) &&
      equal_panel_imbalance(a, ny) >= kBalanceImbalance)
    return SpmmRowSplit::balanced;
  return current;
}

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

// ---- Groups ----

bool reduction_fits(std::int64_t g, std::int64_t tallest, std::int64_t n_tile, std::int64_t cols_per_thread,
                    const GpuTarget& target) {
  return spmm_reduction_bytes(g, tallest, n_tile, cols_per_thread) <= target.shared_per_block;
}

std::int32_t auto_groups(std::int64_t nnz, std::int64_t blocks, std::int64_t tiles, std::int64_t tallest,
                         std::int32_t n_tile, std::int32_t cols_per_thread, const GpuTarget& target) {
  const std::int64_t per_block = blocks ? nnz / blocks : 0;
  if (per_block < kGroupNnz) return 1;
  std::int64_t g = 4;
  // At most 1024 threads (256 for large matrices, 512 in a one-wave grid) and the shared memory of a
  // block for the reduction buffer.
  const std::int64_t threads = nnz <= kLargeNnz ? 1024 : blocks * tiles <= target.sm_count ? 512 : 256;
  while (g > 1 && (g * n_tile > threads || !reduction_fits(g, tallest, n_tile, cols_per_thread, target))) --g;
  return static_cast<std::int32_t>(g);
}

std::int32_t rolled_groups(std::int64_t blocks, std::int64_t tiles, std::int32_t n_tile, std::int64_t tallest,
                           std::int32_t step_lanes, std::int64_t nnz, const GpuTarget& target) {
  std::int32_t g = 4;
  while (g < 16 && blocks * tiles * g * ceil_div(n_tile, 32) < kRolledWarps && 2 * g * n_tile <= 1024) g *= 2;
  while (g > 1 && (g * n_tile > 1024 || !reduction_fits(g, tallest, n_tile, 2, target))) g /= 2;
  if (step_lanes > 1)
    while (g > 1 && std::int64_t{g} * step_lanes * blocks > nnz) g /= 2;
  return g;
}

std::int32_t fragment_groups(const std::vector<std::vector<SpmmFragment>>& fragments,
                             std::int64_t thread_columns, std::int32_t n_tile, const GpuTarget& target) {
  std::int64_t total = 0;
  for (const auto& f : fragments) total += static_cast<std::int64_t>(f.size());
  const auto rows = static_cast<std::int64_t>(fragments.size());
  const std::int64_t warps = rows * ceil_div(thread_columns, n_tile) * ceil_div(n_tile, 32);
  return rows > 0 && total >= kFragmentSplitMin * rows && warps < kFragmentSplitWarpsPerSm * target.sm_count
             ? 2
             : 1;
}

std::pair<std::int32_t, std::int32_t> choose_wide_tile(std::int64_t nnz, std::int64_t thread_columns,
                                                       std::int64_t blocks, std::int64_t tallest,
                                                       std::int32_t n_tile, std::int32_t groups,
                                                       std::int32_t cols_per_thread,
                                                       const GpuTarget& target) {
  const auto wide = static_cast<std::int32_t>(
      std::min<std::int64_t>({std::int64_t{n_tile} * groups, kWideTile, ceil_div(thread_columns, 32) * 32}));
  const std::int64_t wide_grid = ceil_div(thread_columns, wide) * blocks;
  if (wide > n_tile && wide_grid >= kWideGrid) return {wide, std::max(1, n_tile * groups / wide)};
  if (wide > n_tile && nnz > kLargeNnz && wide_grid <= target.sm_count && 2 * wide_grid > target.sm_count)
    // one wave of wide blocks, with the groups of the one-wave rule
    return {wide,
            auto_groups(nnz, blocks, ceil_div(thread_columns, wide), tallest, wide, cols_per_thread, target)};
  // a tile of half the width (or a quarter), where that grid still has kWideGrid blocks
  for (std::int32_t half = wide / 2; half > n_tile && half % 32 == 0; half /= 2)
    if (ceil_div(thread_columns, half) * blocks >= kWideGrid)
      return {half, std::max(1, n_tile * groups / half)};
  return {n_tile, groups};
}

// ---- Block rows, staging, estimates ----

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

std::vector<SpmmBlockRow> build_block_rows(const CsrMatrix& rows, const std::vector<std::int64_t>& borders,
                                           std::int32_t groups, const std::vector<char>& covered,
                                           std::vector<std::vector<SpmmFragment>> fragments,
                                           const std::vector<std::int64_t>& source_index) {
  std::vector<SpmmBlockRow> out;
  const auto blocks = static_cast<std::int64_t>(borders.size()) - 1;
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t begin = borders[b], end = borders[b + 1];
    out.push_back({begin, end, block_groups(rows, begin, end, groups, covered),
                   fragments.empty() ? std::vector<SpmmFragment>{} : std::move(fragments[b])});
  }
  if (!source_index.empty())
    for (auto& b : out)
      for (auto& g : b.groups)
        for (auto& s : g.steps)
          for (auto& e : s.entries) e.value_index = source_index[static_cast<std::size_t>(e.value_index)];
  return out;
}

std::int32_t choose_stage_slots(const SpmmPlan& p, std::int32_t min_entries, const GpuTarget& target) {
  std::int64_t dense = 0;  // the most dense steps of one group
  for (const auto& b : p.layout.blocks)
    for (const auto& g : b.groups)
      dense =
          std::max<std::int64_t>(dense, std::count_if(g.steps.begin(), g.steps.end(), [&](const SpmmStep& s) {
                                   return static_cast<std::int64_t>(s.entries.size()) >= min_entries;
                                 }));
  const std::int64_t slot_bytes = std::int64_t{p.layout.block_x} * p.layout.cols_per_thread * 4;
  const std::int64_t fit = (target.shared_per_block - spmm_stage_offset(p)) / slot_bytes;
  return static_cast<std::int32_t>(std::min<std::int64_t>({dense, fit, kSpmmMaxStageSlots}));
}

std::int32_t estimate_registers(const SpmmPlan& p) {
  // One float accumulator per row, two for half plans accumulating in fp32 (a column pair); fragment
  // plans add the 8 x 4 floats of a warp's mma tile and a fragment's operand words.
  const bool rolled = p.family() == SpmmFamily::rolled;
  const std::int32_t per_row =
      (p.half() && p.epilogue.accumulate == DType::f32) || (rolled && p.step_lanes() == 1) || p.fp32_pairs()
          ? 2
          : 1;
  // Unrolled convolutions of up to kSpmmConvTapPointers taps hold a 64-bit pointer a tap and pixel (f16 /
  // bf16: two pixels, and the second's corner, output pointer and Y's pitch); larger f16 / bf16 ones the
  // two taps masks and the offsets they test beside those.
  const bool conv = p.unrolled() && p.problem.conv;
  const auto pixels = static_cast<std::int32_t>(p.half() ? 2 : 1);
  const std::int32_t taps = !conv ? 0
                            : spmm_conv_tap_pointers(p.problem)
                                ? 2 * pixels * static_cast<std::int32_t>(p.problem.conv->taps()) +
                                      (p.half() ? kSpmmConvPairRegisters : 0)
                            : p.half() ? kSpmmConvPairRegisters + kSpmmConvMaskRegisters
                                       : 0;
  return p.layout.rows_per_block * per_row + kSpmmRegisterOverhead + (p.fragment_k() ? 36 : 0) + taps;
}

std::int32_t choose_max_registers(const SpmmPlan& p, const SpmmOptions& options, const GpuTarget& target) {
  // A rolled kernel keeps step records and a batch of B loads (kSpmmRolledBatch steps) in flight.
  const std::int64_t in_flight =
      p.fragment_k() ? kFragmentLoadsInFlight
      : p.family() == SpmmFamily::rolled
          ? std::int64_t{kSpmmRolledBatch} * ((1 + p.layout.panel_rows + 3) / 4 * 4 + 2)
      : p.fp32_pairs() ? 2 * kLoadsInFlight  // a pair of floats a load
                       : kLoadsInFlight;
  // Without a cap ptxas hoists every load of a long unrolled block and takes up to 255 registers
  // (and spills past them); the cap leaves room for the accumulators and some loads in flight.
  // A block launches only if its threads' registers fit the block's file (allocated in units of 8 a
  // thread): a block of 1,024 threads takes at most 64 a thread.
  const std::int32_t block_cap = std::min<std::int32_t>(
      target.max_registers_per_thread, target.registers_per_block / p.layout.block_x / 8 * 8);
  const std::int32_t cap =
      options.max_registers
          ? options.max_registers
          : static_cast<std::int32_t>(std::min<std::int64_t>(
                std::int64_t{block_cap}, ceil_div(p.hints.estimated_registers + in_flight, 8) * 8));
  if (cap < p.hints.estimated_registers || cap > block_cap)
    throw UsageError(fmt::format(
        "plan_spmm: a register cap of {} is outside {}..{} (a block of {} threads shares {} registers)", cap,
        p.hints.estimated_registers, block_cap, p.layout.block_x, target.registers_per_block));
  return cap;
}

std::int64_t estimate_instructions(const SpmmPlan& p) {
  return spmm_plan_loads(p) + spmm_plan_nnz(p) * (p.fp32_pairs() ? 2 : 1) +
         p.fragment_count() * (1 + 8 * (p.fragment_k() / 2 + p.fragment_k() / 4 + 1));
}

SpmmValueMode choose_value_mode(const SpmmPlan& p, const SpmmOptions& options) {
  // A plan whose nonzeros all sit in fragments has no unrolled values to stream.
  return options.value_mode.value_or(p.hints.estimated_instructions <= options.baked_instruction_budget ||
                                             spmm_plan_nnz(p) == 0
                                         ? SpmmValueMode::baked
                                         : SpmmValueMode::streamed);
}

SpmmProgrammatic choose_programmatic(const SpmmPlan& p, const SpmmOptions& options) {
  const SpmmProgrammatic mode = options.programmatic.value_or(
      !p.half() && (p.family() == SpmmFamily::rolled ||
                    p.hints.estimated_instructions <= kSpmmProgrammaticTriggerInstructions)
          ? SpmmProgrammatic::trigger
          : SpmmProgrammatic::wait);
  if (mode == SpmmProgrammatic::trigger && p.half())
    throw UsageError(
        "plan_spmm: f16 / bf16 kernels wait for their predecessor but do not let the next grid "
        "launch early (programmatic wait or off)");
  return mode;
}

}  // namespace spmm_rules

using namespace spmm_rules;

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
    throw UsageError(
        fmt::format("--blocklets '{}': expected off, auto or BHxBW[:FILL] (e.g. 16x8:0.75)", spec));
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
  return fmt::format(
      "SpMM executors take matrices of 1 to {} rows (the grid's {} block rows of up to {} rows) and "
      "at least one column",
      spmm_max_rows(target), target.max_grid_y, kSpmmMaxAccumulators);
}

void require_spmm_matrix(const CsrMatrix& a, const SourceLocation& where, const GpuTarget& target) {
  if (a.rows < 1 || a.cols < 1 || a.rows > spmm_max_rows(target))
    throw InputError(where, fmt::format("the matrix is {}x{}; {}", a.rows, a.cols, spmm_shape_rule(target)));
}

namespace {

// The request's shape and options checks that come before any decision.
void check_spmm_request(const CsrMatrix& a, const SpmmProblem& problem, const SpmmOptions& options,
                        const GpuTarget& target) {
  if (problem.m != a.rows || problem.k != a.cols)
    throw UsageError(
        fmt::format("plan_spmm: problem is {}x{} but A is {}x{}", problem.m, problem.k, a.rows, a.cols));
  if (problem.n < 1) throw UsageError("plan_spmm: n must be positive");
  if (a.rows < 1 || a.cols < 1 || a.rows > spmm_max_rows(target))
    throw UsageError(fmt::format("plan_spmm: A is {}x{}; {}", a.rows, a.cols, spmm_shape_rule(target)));
  if (options.rows_per_block > 0 && options.rows_per_block <= kSpmmMaxAccumulators &&
      ceil_div(a.rows, options.rows_per_block) > target.max_grid_y)
    throw UsageError(
        fmt::format("plan_spmm: {} rows in block rows of {} rows make {} block rows, more than the grid's "
                    "{}; take at least {} "
                    "rows per block",
                    a.rows, options.rows_per_block, ceil_div(a.rows, options.rows_per_block),
                    target.max_grid_y, ceil_div(a.rows, target.max_grid_y)));
  if (!spmm_dtype(problem.dtype))
    throw UsageError(fmt::format("plan_spmm: dtype '{}' is not f32, f16 or bf16", problem.dtype));
}

// The plan: the decisions of spmm_decisions.hpp in order.
SpmmPlan plan_spmm_once(const CsrMatrix& a, const SpmmProblem& problem, const SpmmOptions& options,
                        const GpuTarget& target) {
  validate(a);
  check_spmm_request(a, problem, options, target);
  const SpmmInspection in = inspect_for_spmm(a);
  SpmmPlan p;
  p.problem = problem;
  p.hints.kernel_name = options.kernel_name;
  SpmmLayout& l = p.layout;
  l.row_split = options.row_split.value_or(SpmmRowSplit::equal);

  // Family and body.
  const SpmmFamily family = choose_family(in, problem, options);
  if (family == SpmmFamily::compressed) return plan_compressed(a, problem, options, target);
  const bool rolled = family == SpmmFamily::rolled;
  if (rolled && l.row_split != SpmmRowSplit::equal)
    throw UsageError(
        "plan_spmm: rolled plans take equal row panels (the kernel finds a block row's rows by its index)");
  bool clustered = l.row_split == SpmmRowSplit::clustered;
  if (clustered && (problem.dtype != DType::f32 || options.blocklets != SpmmBlockletMode::off))
    throw UsageError("plan_spmm: clustered rows need an fp32 plan without blocklets");
  p.body = spmm_body(family);
  const std::int32_t step_lanes = choose_step_lanes(problem, options, family);
  if (rolled) p.rolled()->step_lanes = step_lanes;
  l.cols_per_thread = choose_cols_per_thread(problem, options, family, step_lanes);
  p.epilogue = choose_epilogue(problem, options);

  // Blocklets: tiles of A for the tensor cores, decided before the tiling (they fix it).
  std::vector<char> covered;
  std::vector<std::vector<SpmmFragment>> fragments;
  if (options.blocklets != SpmmBlockletMode::off) {
    if (!p.half())
      throw UsageError("plan_spmm: blocklets run on fp16 / bf16 tensor cores; choose dtype f16 or bf16");
    const BlockletConfig cfg = choose_blocklets(a, problem, options);
    if (cfg.max_blocks > 0) {
      const BlockletDecomposition d = decompose_blocklets(a, cfg);
      if (!d.tiles.empty()) {
        if ((options.rows_per_block && options.rows_per_block != kSpmmFragmentRows) ||
            (options.n_tile % 32) != 0 || l.row_split != SpmmRowSplit::equal)
          throw UsageError(
              fmt::format("plan_spmm: tensor-core tiles need 16 rows per block, equal rows and an n tile of "
                          "whole warps"));
        covered.assign(static_cast<std::size_t>(a.nnz()), 0);
        fragments = fragments_of(a, d, cfg.shape.bw, covered);
        p.fragments =
            SpmmFragments{cfg.shape.bw,
                          {block_shape_name(cfg.shape), cfg.fill_threshold,
                           options.blocklets == SpmmBlockletMode::forced ? "forced" : "auto",
                           static_cast<std::int64_t>(d.tiles.size()), d.nnz_covered(), d.explicit_zeros()}};
      }
    }
  }
  const bool fragment_plan = p.fragments.has_value();
  // The rules that shape fp32 unrolled plans without fragments alone.
  const bool plain_fp32 = !fragment_plan && !p.half() && !rolled;

  // Tiling: n tile, tall or narrow, rows per block.
  const std::int64_t thread_columns = ceil_div(problem.n, l.cols_per_thread);
  l.n_tile = choose_n_tile(problem, options, thread_columns, step_lanes, fragment_plan);
  const bool tall = !options.rows_per_block && plain_fp32 && l.cols_per_thread == 1 &&
                    choose_tall(in, problem.n, ceil_div(thread_columns, l.n_tile));
  if (!tall && !options.n_tile && !options.rows_per_block && plain_fp32)
    l.n_tile = choose_narrow_tile(in, thread_columns, l.n_tile);
  const std::int64_t ny = choose_rows_per_block(
      in, options, {family, step_lanes, fragment_plan, tall, ceil_div(thread_columns, l.n_tile)}, target);
  const std::int64_t blocks = ceil_div(a.rows, ny);

  // Row order and split. Clustered rows: the block rows are equal panels of A's rows regrouped by
  // cluster_rows, planned as the regrouped matrix; its nonzeros' indices are mapped back to A's.
  CsrMatrix regrouped;
  std::vector<std::int64_t> source_index;
  if (clustered) l.row_order = cluster_rows(a, ny);
  if (tall && !options.row_split)
    if (auto order = choose_clustered_rows(a, ny, problem.n)) {
      clustered = true;
      l.row_split = SpmmRowSplit::clustered;
      l.row_order = std::move(*order);
    }
  if (clustered) regrouped = permute_rows(a, l.row_order, &source_index);
  const CsrMatrix& rows = clustered ? regrouped : a;
  // The row split does not depend on the groups; the groups' reduction buffer depends on the tallest
  // block row (the plan's rows_per_block, at least 1), which a balanced split may make up to twice Ny.
  l.row_split =
      choose_row_split(a, ny, problem.n, !options.row_split && !clustered && plain_fp32, l.row_split);
  const std::int64_t cap =
      l.row_split != SpmmRowSplit::balanced ? ny : std::min<std::int64_t>(2 * ny, kSpmmMaxAccumulators);
  const auto borders = row_borders(rows, blocks, ny, cap, l.row_split);
  std::int64_t tallest = 1;
  for (std::int64_t b = 0; b < blocks; ++b) tallest = std::max(tallest, borders[b + 1] - borders[b]);

  // Groups (and wide tiles instead of groups).
  l.groups = options.groups  ? options.groups
             : fragment_plan ? fragment_groups(fragments, thread_columns, l.n_tile, target)
             : rolled
                 ? rolled_groups(blocks,
                                 ceil_div(problem.n, std::int64_t{l.n_tile} / step_lanes * l.cols_per_thread),
                                 l.n_tile, tallest, step_lanes, a.nnz(), target)
                 : auto_groups(a.nnz(), blocks, ceil_div(thread_columns, l.n_tile), tallest, l.n_tile,
                               l.cols_per_thread, target);
  if (!options.n_tile && !options.groups && plain_fp32 && l.groups > 1)
    std::tie(l.n_tile, l.groups) = choose_wide_tile(a.nnz(), thread_columns, blocks, tallest, l.n_tile,
                                                    l.groups, l.cols_per_thread, target);
  if (l.n_tile < 1 || l.groups < 1 || std::int64_t{l.n_tile} * l.groups > 1024)
    throw UsageError(
        fmt::format("plan_spmm: {} groups of {} threads exceed 1024 threads", l.groups, l.n_tile));
  l.block_x = l.n_tile * l.groups;

  // Block rows.
  l.blocks = build_block_rows(rows, borders, l.groups, covered, std::move(fragments),
                              clustered ? source_index : std::vector<std::int64_t>{});
  l.rows_per_block = static_cast<std::int32_t>(fragment_plan ? kSpmmFragmentRows : tallest);
  l.panel_rows = static_cast<std::int32_t>(ny);

  // Staged steps.
  if (options.stage_min_entries < 0)
    throw UsageError(fmt::format("plan_spmm: stage_min_entries {} is negative", options.stage_min_entries));
  if (options.stage_min_entries > 0) {
    if (!plain_fp32) throw UsageError("plan_spmm: staged steps need an fp32 unrolled plan");
    const std::int32_t slots = choose_stage_slots(p, options.stage_min_entries, target);
    if (slots > 0) {  // else nothing is dense (or nothing fits): the plan is the unstaged one
      p.unrolled()->stage_min_entries = options.stage_min_entries;
      p.unrolled()->stage_slots = slots;
    }
  }
  l.shared_bytes = spmm_shared_bytes(p);
  if (l.shared_bytes > target.shared_per_block)
    throw UsageError(
        fmt::format("plan_spmm: {} groups of {} threads need {} bytes of shared memory, more than the {} "
                    "a block is launched with; take fewer groups or a smaller n tile",
                    l.groups, l.n_tile, l.shared_bytes, target.shared_per_block));

  // Codegen hints and the value mode.
  p.hints.estimated_registers = estimate_registers(p);
  p.hints.max_registers = choose_max_registers(p, options, target);
  p.hints.estimated_instructions = estimate_instructions(p);
  p.hints.assembler_opt_level = options.assembler_opt_level.value_or(3);
  if (p.hints.assembler_opt_level < 0 || p.hints.assembler_opt_level > 3)
    throw UsageError(fmt::format("plan_spmm: assembler optimization level {} is outside 0..3",
                                 p.hints.assembler_opt_level));
  if (SpmmUnrolledBody* u = p.unrolled()) {
    u->values = choose_value_mode(p, options);
    if (u->values == SpmmValueMode::streamed)
      for (const auto& b : l.blocks)
        for (const auto& g : b.groups)
          for (const auto& s : g.steps)
            for (const auto& e : s.entries) u->packed_order.push_back(e.value_index);
  }
  const SpmmProgrammatic programmatic = choose_programmatic(p, options);
  p.hints.programmatic = programmatic != SpmmProgrammatic::off;
  p.hints.programmatic_trigger = programmatic == SpmmProgrammatic::trigger;
  return p;
}

}  // namespace

SpmmPlan plan_spmm(const CsrMatrix& a, const SpmmProblem& problem, const SpmmOptions& options,
                   const GpuTarget& target) {
  if (problem.conv) {
    validate(a);
    SpmmOptions o = conv_options(inspect_for_spmm(a), problem, options);
    SpmmPlan p = plan_spmm_once(a, problem, o, target);
    if (p.rolled() && p.layout.n_tile % 32 != 0) {  // the automatic n tile of a narrow image
      o.n_tile = 32;
      p = plan_spmm_once(a, problem, o, target);
    }
    if (p.unrolled() && spmm_rows_with_code(p) > kSpmmMaxRowsWithCode) {
      o.value_mode = SpmmValueMode::rolled;
      o.cols_per_thread = 0;
      return plan_spmm(a, problem, o, target);
    }
    return p;
  }
  SpmmPlan p = plan_spmm_once(a, problem, options, target);
  if (p.value_mode() == SpmmValueMode::rolled || p.compressed()) return p;
  const std::int64_t rows = spmm_rows_with_code(p);
  if (rows <= kSpmmMaxRowsWithCode) return p;
  // Unrolled code would grow with the rows (see kSpmmMaxRowsWithCode): the automatic fp32 plan rolls.
  const bool automatic =
      !options.value_mode && problem.dtype == DType::f32 && options.blocklets == SpmmBlockletMode::off &&
      (!options.row_split || *options.row_split == SpmmRowSplit::equal) && options.stage_min_entries == 0 &&
      options.step_lanes == 0 && options.cols_per_thread == 0;
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
      problem.dtype == DType::f32
          ? "take --values rolled, or the automatic plan"
          : "f16 / bf16 executors unroll every row with nonzeros, so this matrix needs fp32"));
}

bool set_compressed_layout(SpmmCompressedOptions& o, std::string_view layout) {
  if (layout == "vector") {
    o.vector = true;
    return true;
  }
  if (layout != "records" && layout != "scatter") return false;
  o.scatter = layout == "scatter";
  return true;
}

}  // namespace sparsecc
