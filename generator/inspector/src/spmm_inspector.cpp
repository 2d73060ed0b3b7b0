#include "sparsecc/inspector/spmm_inspector.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "sparsecc/common/error.hpp"

namespace sparsecc {

namespace {

constexpr std::int64_t kLoadsInFlight = 16;  // registers of the automatic cap beyond the estimate

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Row borders of `blocks` block rows: equal panels of `ny` rows, or nnz-balanced panels of at most
// `cap` rows each.
std::vector<std::int64_t> row_borders(const CsrMatrix& a, std::int64_t blocks, std::int64_t ny,
                                      std::int64_t cap, SpmmRowSplit split) {
  const std::int64_t m = a.rows;
  std::vector<std::int64_t> borders{0};
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t r = borders.back();
    if (split == SpmmRowSplit::equal) {
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

// The steps of block row [begin, end) split over `groups` groups with balanced nonzeros.
std::vector<SpmmGroup> block_groups(const CsrMatrix& a, std::int64_t begin, std::int64_t end,
                                    std::int32_t groups) {
  struct Nz {
    std::int32_t k, row;
    std::int64_t index;
  };
  std::vector<Nz> nz;
  for (std::int64_t r = begin; r < end; ++r)
    for (std::int64_t i = a.row_ptr[r]; i < a.row_ptr[r + 1]; ++i)
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
//    warp, at most 128;
//  - rows per block: the most of 16, 8, 4, 2, 1 that still gives a grid of kGridTarget blocks
//    (more rows share each B load, but the grid must cover the SMs: the unrolled code is
//    instruction-fetch bound, and every SM fetches only its own block rows' code);
//  - groups: 4 when a block row has kGroupNnz nonzeros or more, else 1; matrices above kLargeNnz
//    keep blocks to 256 threads (their long unrolled bodies take ~140 registers a thread).
constexpr std::int64_t kGridTarget = 100;
constexpr std::int64_t kGroupNnz = 256;
constexpr std::int64_t kLargeNnz = 40000;

std::int32_t auto_n_tile(std::int64_t n) {
  if (n > 1024) return 64;
  return static_cast<std::int32_t>(std::min<std::int64_t>(ceil_div(n, 32) * 32, n <= 64 ? 64 : 128));
}

std::int64_t auto_rows_per_block(std::int64_t m, std::int64_t tiles) {
  for (const std::int64_t r : {16, 8, 4, 2})
    if (ceil_div(m, r) * tiles >= kGridTarget) return std::min<std::int64_t>(r, std::max<std::int64_t>(m, 1));
  return 1;
}

std::int32_t auto_groups(const CsrMatrix& a, std::int64_t blocks, std::int64_t ny, std::int32_t n_tile) {
  const std::int64_t per_block = blocks ? a.nnz() / blocks : 0;
  if (per_block < kGroupNnz) return 1;
  std::int64_t g = 4;
  // At most 1024 threads (256 for large matrices) and 48 KiB of reduction buffer.
  const std::int64_t threads = a.nnz() > kLargeNnz ? 256 : 1024;
  while (g > 1 && (g * n_tile > threads || (g - 1) * ny * n_tile * 4 > 48 * 1024)) --g;
  return static_cast<std::int32_t>(g);
}

}  // namespace

SpmmPlan plan_spmm(const CsrMatrix& a, const SpmmProblem& problem, const SpmmOptions& options) {
  validate(a);
  if (problem.m != a.rows || problem.k != a.cols)
    throw UsageError(
        fmt::format("plan_spmm: problem is {}x{} but A is {}x{}", problem.m, problem.k, a.rows, a.cols));
  if (problem.n < 1) throw UsageError("plan_spmm: n must be positive");
  if (problem.dtype != "f32")
    throw UsageError(fmt::format("plan_spmm: dtype '{}' is not supported", problem.dtype));
  SpmmPlan p;
  p.problem = problem;
  p.kernel_name = options.kernel_name;
  p.row_split = options.row_split;
  p.n_tile = options.n_tile ? options.n_tile : auto_n_tile(problem.n);
  if (p.n_tile < 1) throw UsageError("plan_spmm: the n tile must be positive");
  const std::int64_t ny = options.rows_per_block ? options.rows_per_block
                                                 : auto_rows_per_block(a.rows, ceil_div(problem.n, p.n_tile));
  if (ny < 1 || ny > kSpmmMaxAccumulators)
    throw UsageError(fmt::format("plan_spmm: {} rows per block exceed the {} accumulators a thread may hold",
                                 ny, kSpmmMaxAccumulators));
  const std::int64_t blocks = ceil_div(a.rows, ny);
  if (blocks > kSpmmMaxBlockRows)
    throw UsageError(fmt::format("plan_spmm: {} block rows of {} rows exceed the grid's {}; take more rows per block",
                                 blocks, ny, kSpmmMaxBlockRows));
  p.groups = options.groups ? options.groups : auto_groups(a, blocks, ny, p.n_tile);
  if (p.n_tile < 1 || p.groups < 1 || std::int64_t{p.n_tile} * p.groups > 1024)
    throw UsageError(
        fmt::format("plan_spmm: {} groups of {} threads exceed 1024 threads", p.groups, p.n_tile));
  p.block_x = p.n_tile * p.groups;
  const std::int64_t cap =
      p.row_split == SpmmRowSplit::equal ? ny : std::min<std::int64_t>(2 * ny, kSpmmMaxAccumulators);
  const auto borders = row_borders(a, blocks, ny, cap, p.row_split);
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t begin = borders[b], end = borders[b + 1];
    p.blocks.push_back({begin, end, block_groups(a, begin, end, p.groups)});
    p.rows_per_block = std::max(p.rows_per_block, static_cast<std::int32_t>(end - begin));
  }
  p.rows_per_block = std::max(p.rows_per_block, 1);
  p.shared_bytes = std::int64_t{p.groups - 1} * p.rows_per_block * p.n_tile * 4;
  p.estimated_registers = p.rows_per_block + kSpmmRegisterOverhead;
  // Without a cap ptxas hoists every load of a long unrolled block and takes up to 255 registers
  // (and spills past them); the cap leaves room for the accumulators and some loads in flight.
  p.max_registers = options.max_registers
                        ? options.max_registers
                        : static_cast<std::int32_t>(std::min<std::int64_t>(
                              kSpmmMaxRegisters,
                              ceil_div(p.estimated_registers + kLoadsInFlight, 8) * 8));
  if (p.max_registers < p.estimated_registers || p.max_registers > kSpmmMaxRegisters)
    throw UsageError(fmt::format("plan_spmm: a register cap of {} is outside {}..{}", p.max_registers,
                                 p.estimated_registers, kSpmmMaxRegisters));
  p.estimated_instructions = spmm_plan_loads(p) + a.nnz();
  p.assembler_opt_level = options.assembler_opt_level.value_or(3);
  if (p.assembler_opt_level < 0 || p.assembler_opt_level > 3)
    throw UsageError(fmt::format("plan_spmm: assembler optimization level {} is outside 0..3",
                                 p.assembler_opt_level));
  p.value_mode = options.value_mode.value_or(p.estimated_instructions <= options.baked_instruction_budget
                                                 ? SpmmValueMode::baked
                                                 : SpmmValueMode::streamed);
  if (p.value_mode == SpmmValueMode::streamed)
    for (const auto& b : p.blocks)
      for (const auto& g : b.groups)
        for (const auto& s : g.steps)
          for (const auto& e : s.entries) p.packed_order.push_back(e.value_index);
  return p;
}

}  // namespace sparsecc
