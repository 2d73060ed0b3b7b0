// The compressed family's planner (spmm_rules::plan_compressed): the shape of the blocks, the chunking
// of K sized for this matrix's densest chunk, and splits balanced by the segments' real bytes.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/math.hpp"
#include "sparsecc/inspector/spmm_decisions.hpp"
#include "sparsecc/plan/spmm_compressed.hpp"

namespace sparsecc::spmm_rules {

bool auto_compressed(const SpmmInspection& in, const SpmmProblem& problem, const SpmmOptions& options) {
  return problem.dtype != DType::f32 && !problem.conv && in.nnz >= kCompressedMinNnz &&
         problem.n <= kCompressedColumns && options.blocklets != SpmmBlockletMode::forced &&
         options.accumulate.value_or(DType::f32) == DType::f32 && !options.rows_per_block &&
         !options.groups && options.stage_min_entries == 0 &&
         (!options.row_split || *options.row_split == SpmmRowSplit::equal);
}

namespace {

// Chunks of row block r split into `splits` shares of equal cost (cost[c] of chunk c).
void split_chunks(const std::vector<double>& cost, std::int64_t chunks, std::int64_t splits,
                  std::vector<std::int32_t>& out) {
  double total = 0;
  for (const double c : cost) total += c;
  out.push_back(0);
  std::int64_t c = 0;
  double sum = 0;
  for (std::int64_t s = 1; s < splits; ++s) {
    const double goal = total * static_cast<double>(s) / static_cast<double>(splits);
    while (c < chunks && sum + cost[static_cast<std::size_t>(c)] / 2 <= goal)
      sum += cost[static_cast<std::size_t>(c++)];
    out.push_back(static_cast<std::int32_t>(c));
  }
  out.push_back(static_cast<std::int32_t>(chunks));
}

// What every compressed plan ends with: the epilogue (fp32 sums, one rounding to the dtype), the
// register cap, the assembler level and the programmatic wait (never the trigger).
void finish_compressed(SpmmPlan& p, const SpmmOptions& options, const GpuTarget& target) {
  p.epilogue = {p.problem.bias, p.problem.relu, DType::f32, p.problem.dtype};
  p.hints.max_registers = options.max_registers ? options.max_registers : target.max_registers_per_thread;
  p.hints.assembler_opt_level = options.assembler_opt_level.value_or(3);
  const SpmmProgrammatic mode = options.programmatic.value_or(SpmmProgrammatic::wait);
  if (mode == SpmmProgrammatic::trigger)
    throw UsageError(
        "plan_spmm: compressed kernels wait for their predecessor but never trigger the next grid");
  p.hints.programmatic = mode == SpmmProgrammatic::wait;
}

// The vector layout: warps of one row each (the options' warps and strips aside), nothing staged.
SpmmPlan plan_vector(const CsrMatrix& a, const SpmmProblem& problem, const SpmmOptions& options,
                     const GpuTarget& target) {
  const SpmmCompressedOptions& o = options.compressed;
  if (problem.n_mode != SpmmNMode::fixed || problem.n > rt::kVectorMaxN)
    throw UsageError(fmt::format("plan_spmm: the vector layout computes a fixed N of 1..{}, not {}{}",
                                 rt::kVectorMaxN, problem.n,
                                 problem.n_mode == SpmmNMode::fixed ? "" : " at run time"));
  if (problem.k > rt::kVectorMaxK)
    throw UsageError(fmt::format("plan_spmm: the vector layout takes K up to {} (16-bit columns), not {}",
                                 rt::kVectorMaxK, problem.k));
  if (o.scatter.value_or(false) || o.formats || o.chunk_k || o.stages || o.splits > 1 || o.kept_rounds ||
      (options.n_tile && options.n_tile != round_up(problem.n, 8)))
    throw UsageError(
        "plan_spmm: the vector layout takes no scatter lists, record formats, chunks, stages, splits, kept "
        "rounds or n tile");
  SpmmPlan p;
  p.problem = problem;
  p.hints.kernel_name = options.kernel_name;
  p.body = SpmmCompressedBody{};
  SpmmCompressedBody& b = *p.compressed();
  b.vector = true;
  // One row a warp while the rows fit one wave of the SMs' warp slots, else two.
  const std::int64_t slots = std::int64_t{target.sm_count} * target.max_threads_per_sm / 32;
  b.warps = o.warps ? o.warps : problem.m <= slots ? kCompressedVectorWarps : kCompressedVectorWarps / 2;
  b.strips_per_warp = o.strips_per_warp ? o.strips_per_warp : 1;
  if (b.warps > 16 || b.strips_per_warp > 4 || 16 * b.strips_per_warp % b.warps)
    throw UsageError(fmt::format("plan_spmm: a vector block of {} warps cannot share {} rows evenly", b.warps,
                                 16 * b.strips_per_warp));
  b.chunk_k = rt::kRecordCols;
  b.n_tile = static_cast<std::int32_t>(round_up(problem.n, 8));  // one column tile
  b.bitmap_weight = kCompressedBitmapWeight;
  b.position_weight = kCompressedPositionWeight;
  const std::int64_t rows = spmm_compressed_rows(b), row_blocks = ceil_div(problem.m, rows);
  if (row_blocks > target.max_grid_y)
    throw UsageError(
        fmt::format("plan_spmm: {} row blocks pass the grid's y limit {}", row_blocks, target.max_grid_y));
  b.stream_words = rt::vector_data_word(problem.m) + round_up(a.nnz(), 4);
  const auto chunks = static_cast<std::int32_t>(ceil_div(problem.k, b.chunk_k));
  for (std::int64_t r = 0; r < row_blocks; ++r) b.split_chunks.insert(b.split_chunks.end(), {0, chunks});
  SpmmLayout& l = p.layout;
  l.row_split = SpmmRowSplit::equal;
  l.rows_per_block = l.panel_rows = static_cast<std::int32_t>(rows);
  l.n_tile = l.block_x = 32 * b.warps;
  l.groups = 1;
  l.cols_per_thread = 2;
  for (std::int64_t r = 0; r < row_blocks; ++r)
    l.blocks.push_back({r * rows, std::min(problem.m, (r + 1) * rows), {}, {}});
  l.shared_bytes = 0;
  p.hints.estimated_registers = 40;
  p.hints.estimated_instructions = a.nnz() / 4;  // a lane's 16-byte piece is four entries
  finish_compressed(p, options, target);
  return p;
}

}  // namespace

SpmmPlan plan_compressed(const CsrMatrix& a, const SpmmProblem& problem, const SpmmOptions& options,
                         const GpuTarget& target) {
  if (problem.dtype == DType::f32)
    throw UsageError("plan_spmm: compressed plans run on fp16 / bf16 tensor cores; choose dtype f16 or bf16");
  if (options.accumulate && *options.accumulate != DType::f32)
    throw UsageError("plan_spmm: compressed plans accumulate in f32 (tensor cores)");
  if (options.blocklets == SpmmBlockletMode::forced)
    throw UsageError(
        "plan_spmm: compressed plans take no forced blocklets (every piece is a tensor-core operand)");
  if (!target.mma_f16) throw UsageError(fmt::format("plan_spmm: {} has no f16 tensor cores", target.arch));
  const SpmmCompressedOptions& o = options.compressed;
  // A fixed N up to kCompressedVectorMaxN takes the vector layout unless the options name another layout
  // or record formats.
  if (o.vector.value_or(!o.scatter && !o.formats && problem.n_mode == SpmmNMode::fixed &&
                        problem.n <= kCompressedVectorMaxN && problem.k <= rt::kVectorMaxK))
    return plan_vector(a, problem, options, target);
  SpmmPlan p;
  p.problem = problem;
  p.hints.kernel_name = options.kernel_name;
  p.body = SpmmCompressedBody{};
  SpmmCompressedBody& b = *p.compressed();

  // Block shape: columns of C, warps, strips.
  if (options.n_tile && (options.n_tile < 8 || options.n_tile > 64 || options.n_tile % 8))
    throw UsageError(
        fmt::format("plan_spmm: a compressed n tile of {} columns: expected 8, 16, .., 64", options.n_tile));
  b.n_tile = options.n_tile ? options.n_tile
                            : static_cast<std::int32_t>(std::min<std::int64_t>(64, round_up(problem.n, 8)));
  if (o.warps < 0 || o.warps > 16 || o.strips_per_warp < 0 || o.strips_per_warp > 4)
    throw UsageError(fmt::format("plan_spmm: {} warps of {} strips: expected 1..16 warps of 1..4 strips",
                                 o.warps, o.strips_per_warp));
  // The tallest block (fewer copies of B's rows staged) that still gives kCompressedShapeBlocksPerSm
  // blocks an SM with at most 8 splits.
  const std::int64_t col_tiles = ceil_div(problem.n, b.n_tile);
  const auto blocks_of = [&](std::int64_t rows, std::int64_t splits = rt::kPortableClusterSplits) {
    return ceil_div(problem.m, rows) * col_tiles * (target.clusters ? splits : 1);
  };
  std::int64_t split_cap = rt::kPortableClusterSplits;  // the most splits the automatic count takes
  b.warps = o.warps;
  b.strips_per_warp = o.strips_per_warp;
  // Record formats named without a layout ask for records.
  b.scatter =
      o.scatter.value_or(!o.formats && static_cast<double>(a.nnz()) <= kCompressedScatterDensity *
                                                                           static_cast<double>(problem.m) *
                                                                           static_cast<double>(problem.k));
  std::int64_t scatter_chunk = kCompressedChunk;
  if (b.scatter && !b.warps && !b.strips_per_warp) {
    // The tallest block that still gives the SMs enough blocks: taller blocks share each step's
    // operands of B among more strips, but hold the SMs with fewer blocks.
    // Past the portable cluster only with enough chunks a split to pay for the wider reduction.
    for (const CompressedScatterShape& sh : kCompressedScatterShapes) {
      b.warps = sh.warps;
      b.strips_per_warp = sh.strips;
      scatter_chunk = sh.chunk_k;
      split_cap = sh.splits;
      const bool wide = sh.splits > rt::kPortableClusterSplits;
      if (static_cast<double>(blocks_of(16 * sh.warps * sh.strips, sh.splits)) >=
              kCompressedScatterBlocksPerSm * static_cast<double>(target.sm_count) &&
          (!wide ||
           (target.clusters && ceil_div(problem.k, sh.chunk_k) >= kCompressedWideSplitChunks * sh.splits)))
        break;
    }
  } else if (b.scatter) {
    b.warps = b.warps ? b.warps : kCompressedScatterWarps;
    b.strips_per_warp = b.strips_per_warp ? b.strips_per_warp : 1;
    // A shape of the rule's list named by the options takes the rule's chunk (its portable splits).
    for (const CompressedScatterShape& sh : kCompressedScatterShapes)
      if (sh.warps == b.warps && sh.strips == b.strips_per_warp) scatter_chunk = sh.chunk_k;
  }
  if (!b.warps || !b.strips_per_warp) {
    for (const auto& [w, st] : {std::pair{8, 2}, {4, 2}, {4, 1}}) {
      const std::int32_t ww = b.warps ? b.warps : w, ss = b.strips_per_warp ? b.strips_per_warp : st;
      if (blocks_of(16 * ww * ss) >= kCompressedShapeBlocksPerSm * target.sm_count || (w == 4 && st == 1)) {
        b.warps = ww;
        b.strips_per_warp = ss;
        break;
      }
    }
  }
  b.formats = o.formats.value_or(0b111u);
  if (b.formats == 0 || b.formats > 0b111u)
    throw UsageError(fmt::format(
        "plan_spmm: record formats {} name none of bitmap (1), positions (2), dense (4)", b.formats));
  b.bitmap_weight = o.bitmap_weight.value_or(kCompressedBitmapWeight);
  b.position_weight = o.position_weight.value_or(kCompressedPositionWeight);
  if (b.bitmap_weight < 0 || b.position_weight < 0)
    throw UsageError("plan_spmm: decode weights must not be negative");

  // The census (records) or the nonzeros a segment (scatter), then the chunk: the largest whose stages
  // fit.
  const SpmmPieceCensus census = b.scatter ? SpmmPieceCensus{} : spmm_piece_census(a, b);
  const std::int64_t strips = std::int64_t{b.warps} * b.strips_per_warp, rows = spmm_compressed_rows(b);
  const std::int64_t k64 = std::max<std::int64_t>(rt::kRecordCols, round_up(problem.k, rt::kRecordCols));
  std::vector<std::int64_t> candidates;
  if (o.chunk_k) {
    if (o.chunk_k < rt::kRecordCols || o.chunk_k % rt::kRecordCols || o.chunk_k > 256 * rt::kRecordCols)
      throw UsageError(
          fmt::format("plan_spmm: chunk_k {}: expected a multiple of 64 up to 16384", o.chunk_k));
    candidates = {o.chunk_k};
  } else {
    for (const std::int64_t c : {b.scatter ? scatter_chunk : kCompressedChunk, std::int64_t{rt::kRecordCols}})
      if ((c <= k64 || c == rt::kRecordCols) &&
          std::find(candidates.begin(), candidates.end(), std::min(c, k64)) == candidates.end())
        candidates.push_back(std::min(c, k64));
  }
  if (b.scatter) {
    // The block's tile holds rows x chunk_k values in 16-bit places (one more for the pad slot).
    std::erase_if(candidates, [&](std::int64_t c) { return rows * c > rt::kScatterSlots; });
    if (candidates.empty())
      throw UsageError(fmt::format("plan_spmm: a scatter block of {} rows takes chunks of at most {} columns",
                                   rows, rt::kScatterSlots / rows));
  }
  if (o.stages && (o.stages < 2 || o.stages > kSpmmCompressedMaxStages))
    throw UsageError(fmt::format("plan_spmm: {} stages: expected 2..{}", o.stages, kSpmmCompressedMaxStages));
  if (o.kept_rounds < 0 || o.kept_rounds > kSpmmCompressedMaxKeptRounds)
    throw UsageError(fmt::format("plan_spmm: {} kept rounds: expected 1..{}", o.kept_rounds,
                                 kSpmmCompressedMaxKeptRounds));
  // The largest chunk whose stages leave room for kCompressedSharedBlocks blocks on an SM, else the
  // largest whose stages fit a block's opt-in shared memory.
  const std::int64_t block_limit = target.shared_per_block_optin;
  const std::int64_t shared_limit =
      target.shared_per_sm / kCompressedSharedBlocks - target.shared_reserved_per_block;
  const std::int64_t row_blocks = ceil_div(ceil_div(problem.m, rt::kRecordRows), strips);
  const std::int64_t wanted = std::clamp<std::int64_t>(
      std::min({ceil_div(kCompressedBlocksPerSm * target.sm_count, row_blocks * col_tiles),
                problem.m / row_blocks, target.clusters ? split_cap : 1}),
      1, split_cap);
  std::vector<std::int64_t> seg;
  bool fits = false;
  for (const bool two_blocks : {true, false}) {
    const std::int64_t limit = two_blocks ? shared_limit : block_limit;
    for (const std::int64_t c : candidates) {
      seg =
          b.scatter ? spmm_scatter_segment_bytes(a, rows, c, b.warps) : spmm_segment_bytes(census, strips, c);
      b.chunk_k = static_cast<std::int32_t>(c);
      b.stage_bytes = std::max<std::int64_t>(16, *std::max_element(seg.begin(), seg.end()));
      b.splits = o.splits ? o.splits : static_cast<std::int32_t>(wanted);
      b.stages = o.stages ? o.stages : kCompressedStages;
      if (spmm_compressed_shared_bytes(b) <= limit) {
        fits = true;
        break;
      }
    }
    if (fits) break;
  }
  if (!fits)
    throw UsageError(fmt::format(
        "plan_spmm: the densest chunk of this matrix needs {} bytes of shared memory with {} rows a block "
        "and {} stages, more than the {} a block of {} takes; take fewer warps or strips (--warps, --strips)",
        spmm_compressed_shared_bytes(b), rows, b.stages, target.shared_per_block_optin, target.arch));

  // Splits: enough blocks for the SMs.
  const std::int64_t chunks = ceil_div(problem.k, b.chunk_k);
  if (o.splits < 0 || o.splits > rt::kMaxClusterSplits)
    throw UsageError(fmt::format("plan_spmm: {} splits: expected 1..{}", o.splits, rt::kMaxClusterSplits));
  if (o.splits > 1 && !target.clusters)
    throw UsageError(
        fmt::format("plan_spmm: splits need thread-block clusters, which {} lacks", target.arch));
  b.splits = o.splits ? o.splits : static_cast<std::int32_t>(std::min(wanted, chunks));
  if (row_blocks * b.splits > target.max_grid_y)
    throw UsageError(fmt::format("plan_spmm: {} row blocks x {} splits pass the grid's y limit {}",
                                 row_blocks, b.splits, target.max_grid_y));
  const double b_bytes =
      static_cast<double>(b.chunk_k) * static_cast<double>(b.n_tile);  // half of 2 bytes each
  b.split_chunks.reserve(static_cast<std::size_t>(row_blocks * (b.splits + 1)));
  std::vector<double> cost(static_cast<std::size_t>(chunks));
  for (std::int64_t r = 0; r < row_blocks; ++r) {
    for (std::int64_t c = 0; c < chunks; ++c) {
      const std::int64_t s = seg[static_cast<std::size_t>(r * chunks + c)];
      cost[static_cast<std::size_t>(c)] = s ? static_cast<double>(s) + b_bytes : 0.0;
    }
    split_chunks(cost, chunks, b.splits, b.split_chunks);
  }

  // What the stream will hold.
  const rt::CompressedShape shape{.row_blocks = row_blocks,
                                  .chunks = chunks,
                                  .splits = b.splits,
                                  .strips = strips,
                                  .chunk_k = b.chunk_k,
                                  .stage_bytes = b.stage_bytes,
                                  .scatter = b.scatter,
                                  .warp_lists = b.scatter ? b.warps : 0};
  std::int64_t data = 0, live = 0;
  for (const std::int64_t s : seg) data += s, live += s > 0;
  b.stream_words = shape.data_word() + data / 4;
  // Scatter: the rounds of 32 entries (16 bytes each) a warp's list takes on average where a chunk
  // holds any (the segments' list ends aside).
  const std::int64_t list_quads =
      b.scatter && live ? ceil_div(data - live * shape.list_header_bytes(), 16 * live * b.warps) : 0;
  b.kept_rounds = o.kept_rounds ? o.kept_rounds
                                : static_cast<std::int32_t>(std::clamp<std::int64_t>(
                                      ceil_div(list_quads, 32), 1, kCompressedKeptRounds));
  for (const std::uint8_t f : census.format) ++b.records[f];

  // Layout, epilogue, hints.
  SpmmLayout& l = p.layout;
  l.row_split = SpmmRowSplit::equal;
  l.rows_per_block = static_cast<std::int32_t>(rows);
  l.panel_rows = l.rows_per_block;
  l.n_tile = 32 * b.warps;
  l.groups = 1;
  l.block_x = 32 * b.warps;
  l.cols_per_thread = 2;
  for (std::int64_t r = 0; r < row_blocks; ++r)
    l.blocks.push_back({r * l.rows_per_block, std::min(problem.m, (r + 1) * l.rows_per_block), {}, {}});
  l.shared_bytes = spmm_compressed_shared_bytes(b);
  p.hints.estimated_registers = 64;
  std::int64_t records = 0;
  for (const std::int64_t r : b.records) records += r;
  p.hints.estimated_instructions = b.scatter ? 4 * chunks * row_blocks : 64 * records;
  finish_compressed(p, options, target);
  return p;
}

}  // namespace sparsecc::spmm_rules
