#include "sparsecc/plan/spmm_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>

#include "sparsecc/common/dtype.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/common/math.hpp"
#include "sparsecc/plan/spmm_compressed.hpp"
#include "sparsecc/runtime/compressed_stream.hpp"
#include "sparsecc/target/target.hpp"

namespace sparsecc {

namespace {

using json = nlohmann::json;

const char* name(SpmmNMode m) { return m == SpmmNMode::fixed ? "fixed" : "runtime"; }

SpmmFamily parse_family(const std::string& word) {
  for (const SpmmFamily f : {SpmmFamily::unrolled, SpmmFamily::rolled, SpmmFamily::compressed})
    if (word == to_string(f)) return f;
  throw UsageError(fmt::format("SpMM plan: family '{}' is not unrolled, rolled or compressed", word));
}

SpmmNMode parse_n_mode(const json& j) {
  const std::string s = j.at("n_mode").get<std::string>();
  if (s == name(SpmmNMode::fixed)) return SpmmNMode::fixed;
  if (s == name(SpmmNMode::runtime)) return SpmmNMode::runtime;
  throw UsageError(fmt::format("SpMM plan: bad n_mode '{}'", s));
}

// Calls fn(block, group, step, entry) for every entry in emission order.
template <typename Fn>
void for_each_entry(const SpmmPlan& plan, Fn&& fn) {
  for (const auto& b : plan.layout.blocks)
    for (const auto& g : b.groups)
      for (const auto& s : g.steps)
        for (const auto& e : s.entries) fn(b, g, s, e);
}

void check_block(const SpmmPlan& p, const CsrMatrix& a, std::size_t bi, std::vector<char>& seen,
                 std::vector<std::string>& errors) {
  const SpmmBlockRow& b = p.layout.blocks[bi];
  const auto err = [&](const std::string& s) { errors.push_back(fmt::format("block row {}: {}", bi, s)); };
  if (b.row_end - b.row_begin > p.layout.rows_per_block) err("more rows than rows_per_block");
  if (static_cast<std::int32_t>(b.groups.size()) != p.layout.groups) err("group count differs from groups");
  std::int64_t total = 0;
  std::vector<std::int64_t> group_nnzs;
  std::int64_t max_col = 0;  // most nonzeros of one step (one column), for the balance bound
  for (std::int64_t r = b.row_begin; r < b.row_end && r < a.rows; ++r) total += a.row_nnz(spmm_row(p, r));
  std::int64_t last_k = -1;
  for (std::size_t gi = 0; gi < b.groups.size(); ++gi) {
    std::int64_t group_nnz = 0;
    for (const auto& s : b.groups[gi].steps) {
      if (s.k <= last_k) err(fmt::format("group {}: step k {} does not ascend", gi, s.k));
      if (s.entries.empty()) err(fmt::format("group {}: step k {} has no entries", gi, s.k));
      last_k = s.k;
      std::int32_t last_row = -1;
      for (const auto& e : s.entries) {
        if (e.row <= last_row || b.row_begin + e.row >= b.row_end) {
          err(fmt::format("k {}: bad row {}", s.k, e.row));
          continue;
        }
        last_row = e.row;
        const std::int64_t row = spmm_row(p, b.row_begin + e.row);
        if (e.value_index < 0 || e.value_index >= a.nnz() || e.value_index < a.row_ptr[row] ||
            e.value_index >= a.row_ptr[row + 1] || a.col_idx[e.value_index] != s.k) {
          err(fmt::format("k {} row {}: value index {} is not A[{}][{}]", s.k, e.row, e.value_index, row,
                          s.k));
          continue;
        }
        if (seen[e.value_index]++) err(fmt::format("nonzero {} appears twice", e.value_index));
      }
      group_nnz += static_cast<std::int64_t>(s.entries.size());
      max_col = std::max<std::int64_t>(max_col, static_cast<std::int64_t>(s.entries.size()));
    }
    group_nnzs.push_back(group_nnz);
  }
  const std::int64_t bound =
      (total + p.layout.groups - 1) / std::max(p.layout.groups, 1) + std::max<std::int64_t>(max_col - 1, 0);
  for (std::size_t gi = 0; gi < group_nnzs.size(); ++gi)
    if (group_nnzs[gi] > bound)
      err(fmt::format("group {} has {} nonzeros, above the balance bound {}", gi, group_nnzs[gi], bound));
  const std::int32_t fk = p.fragment_k();
  if (!b.fragments.empty() && fk == 0) err("fragments in a plan without fragment_k");
  std::int64_t last_fk = -1;
  for (const SpmmFragment& f : b.fragments) {
    if (fk == 0) break;
    if (f.k <= last_fk || f.k % fk != 0 || f.k >= a.cols)
      err(fmt::format("fragment at k {} is not a new multiple of {} inside K", f.k, fk));
    last_fk = f.k;
    if (f.entries.size() != static_cast<std::size_t>(kSpmmFragmentRows * fk)) {
      err(fmt::format("fragment at k {} has {} entries, not {}", f.k, f.entries.size(),
                      kSpmmFragmentRows * fk));
      continue;
    }
    for (std::int32_t r = 0; r < kSpmmFragmentRows; ++r)
      for (std::int32_t c = 0; c < fk; ++c) {
        const std::int64_t e = f.entries[static_cast<std::size_t>(r * fk + c)];
        if (e < 0) continue;
        const std::int64_t row = b.row_begin + r, col = f.k + c;
        if (row >= b.row_end || e >= a.nnz() || e < a.row_ptr[row] || e >= a.row_ptr[row + 1] ||
            a.col_idx[e] != col) {
          err(fmt::format("fragment at k {}: entry ({}, {}) is not A[{}][{}]", f.k, r, c, row, col));
          continue;
        }
        if (seen[e]++) err(fmt::format("nonzero {} appears twice", e));
      }
  }
}

}  // namespace

std::int64_t spmm_plan_loads(const SpmmPlan& plan) {
  std::int64_t n = 0;
  for (const auto& b : plan.layout.blocks)
    for (const auto& g : b.groups) n += static_cast<std::int64_t>(g.steps.size());
  return n;
}

std::int64_t spmm_plan_nnz(const SpmmPlan& plan) {
  std::int64_t n = 0;
  for_each_entry(plan, [&](auto&, auto&, auto&, auto&) { ++n; });
  return n;
}

const char* to_string(SpmmValueMode mode) {
  switch (mode) {
    case SpmmValueMode::baked:
      return "baked";
    case SpmmValueMode::streamed:
      return "streamed";
    case SpmmValueMode::rolled:
      return "rolled";
    case SpmmValueMode::compressed:
      return "compressed";
  }
  return "?";
}

SpmmValueMode parse_value_mode(const std::string& word, const std::string& what) {
  for (const SpmmValueMode m :
       {SpmmValueMode::baked, SpmmValueMode::streamed, SpmmValueMode::rolled, SpmmValueMode::compressed})
    if (word == to_string(m)) return m;
  throw UsageError(fmt::format("{}: '{}' is not baked, streamed, rolled or compressed", what, word));
}

const char* to_string(SpmmRowSplit split) {
  switch (split) {
    case SpmmRowSplit::equal:
      return "equal";
    case SpmmRowSplit::balanced:
      return "balanced";
    case SpmmRowSplit::clustered:
      return "clustered";
  }
  return "?";
}

SpmmRowSplit parse_row_split(const std::string& word, const std::string& what) {
  for (const SpmmRowSplit s : {SpmmRowSplit::equal, SpmmRowSplit::balanced, SpmmRowSplit::clustered})
    if (word == to_string(s)) return s;
  throw UsageError(fmt::format("{}: '{}' is not equal, balanced or clustered", what, word));
}

std::int64_t spmm_max_rows(const GpuTarget& target) { return target.max_grid_y * kSpmmMaxAccumulators; }

bool spmm_dtype(DType t) { return std::find(kSpmmDtypes.begin(), kSpmmDtypes.end(), t) != kSpmmDtypes.end(); }

std::int32_t spmm_step_lanes_for(std::int64_t n) {
  std::int32_t columns = 1;
  while (columns < n && columns < 32) columns *= 2;
  return 32 / columns;
}

std::int32_t spmm_rolled_record_words(const SpmmPlan& plan) {
  return (1 + plan.layout.rows_per_block + 3) / 4 * 4;
}

std::int64_t spmm_rolled_header_words(const SpmmPlan& plan) {
  return (plan.block_rows() * plan.layout.groups + 1 + 3) / 4 * 4;
}

std::vector<float> spmm_rolled_table(const SpmmPlan& plan, const CsrMatrix& a) {
  const std::int64_t header = spmm_rolled_header_words(plan);
  const std::int32_t words = spmm_rolled_record_words(plan);
  std::vector<float> out(static_cast<std::size_t>(header), 0.0f);
  const auto bits = [](std::int64_t v) { return std::bit_cast<float>(static_cast<std::int32_t>(v)); };
  std::int64_t records = 0;
  std::size_t at = 0;
  for (const auto& b : plan.layout.blocks)
    for (const auto& g : b.groups) {
      out[at++] = bits(records);
      for (const auto& s : g.steps) {
        const std::size_t r0 = out.size();
        out.resize(r0 + static_cast<std::size_t>(words), 0.0f);
        out[r0] = bits(s.k);
        for (const auto& e : s.entries)
          out[r0 + 1 + static_cast<std::size_t>(e.row)] =
              spmm_weight(plan, a.values.at(static_cast<std::size_t>(e.value_index)));
        ++records;
      }
    }
  out[at] = bits(records);
  return out;
}

const std::vector<std::int64_t>& SpmmPlan::packed_order() const {
  static const std::vector<std::int64_t> none;
  return unrolled() ? unrolled()->packed_order : none;
}

const SpmmBlocklets& SpmmPlan::blocklets() const {
  static const SpmmBlocklets none;
  return fragments ? fragments->blocklets : none;
}

SpmmBody spmm_body(SpmmFamily family) {
  switch (family) {
    case SpmmFamily::unrolled:
      return SpmmUnrolledBody{};
    case SpmmFamily::rolled:
      return SpmmRolledBody{};
    case SpmmFamily::compressed:
      return SpmmCompressedBody{};
  }
  return SpmmUnrolledBody{};
}

const char* to_string(SpmmFamily family) {
  switch (family) {
    case SpmmFamily::unrolled:
      return "unrolled";
    case SpmmFamily::rolled:
      return "rolled";
    case SpmmFamily::compressed:
      return "compressed";
  }
  return "?";
}

std::int64_t SpmmPlan::fragment_count() const {
  std::int64_t n = 0;
  for (const auto& b : layout.blocks) n += static_cast<std::int64_t>(b.fragments.size());
  return n;
}

std::pair<std::size_t, std::size_t> spmm_group_fragments(const SpmmBlockRow& b, std::int32_t groups,
                                                         std::int32_t g) {
  const std::size_t n = b.fragments.size(), gs = static_cast<std::size_t>(std::max(groups, 1));
  const auto at = [&](std::size_t i) { return n * i / gs; };
  return {at(static_cast<std::size_t>(g)), at(static_cast<std::size_t>(g) + 1)};
}

bool spmm_plain_empty_block(const SpmmPlan& plan, std::size_t bi) {
  const SpmmBlockRow& b = plan.layout.blocks.at(bi);
  if (!b.fragments.empty()) return false;
  for (const auto& g : b.groups)
    if (!g.steps.empty()) return false;
  const std::int64_t begin = static_cast<std::int64_t>(bi) * plan.layout.panel_rows;
  if (plan.layout.panel_rows < 1 || b.row_begin != begin ||
      b.row_end != std::min(plan.problem.m, begin + plan.layout.panel_rows))
    return false;
  for (std::int64_t r = b.row_begin; r < b.row_end && !plan.layout.row_order.empty(); ++r)
    if (spmm_row(plan, r) != r) return false;
  return true;
}

bool spmm_has_plain_empty_blocks(const SpmmPlan& plan) {
  for (std::size_t bi = 0; bi < plan.layout.blocks.size(); ++bi)
    if (spmm_plain_empty_block(plan, bi)) return true;
  return false;
}

std::int64_t spmm_rows_with_code(const SpmmPlan& plan) {
  std::int64_t rows = 0;
  for (std::size_t bi = 0; bi < plan.layout.blocks.size(); ++bi)
    if (!spmm_plain_empty_block(plan, bi))
      rows += plan.layout.blocks[bi].row_end - plan.layout.blocks[bi].row_begin;
  return rows;
}

bool spmm_block_reduces(const SpmmPlan& plan, const SpmmBlockRow& b) {
  if (!plan.half()) return plan.layout.groups > 1;
  for (std::size_t g = 1; g < b.groups.size(); ++g)
    if (!b.groups[g].steps.empty()) return true;
  return false;
}

std::int64_t spmm_reduction_bytes(std::int64_t groups, std::int64_t rows, std::int64_t n_tile,
                                  std::int64_t cols_per_thread) {
  return (groups - 1) * rows * n_tile * cols_per_thread * 4;
}

namespace {

std::int64_t reduction_bytes_of(const SpmmPlan& p) {
  bool reduces = false;
  for (const auto& b : p.layout.blocks) reduces = reduces || spmm_block_reduces(p, b);
  return reduces ? spmm_reduction_bytes(p.layout.groups, p.layout.rows_per_block, p.layout.n_tile,
                                        p.layout.cols_per_thread)
                 : 0;
}

}  // namespace

std::int64_t spmm_stage_offset(const SpmmPlan& p) { return (reduction_bytes_of(p) + 15) / 16 * 16; }

std::vector<char> spmm_staged_steps(const SpmmPlan& p, const SpmmGroup& g) {
  std::vector<char> staged(g.steps.size(), 0);
  if (p.stage_min_entries() <= 0) return staged;
  std::int32_t taken = 0;
  for (std::size_t i = 0; i < g.steps.size() && taken < p.stage_slots(); ++i)
    if (static_cast<std::int64_t>(g.steps[i].entries.size()) >= p.stage_min_entries()) {
      staged[i] = 1;
      ++taken;
    }
  return staged;
}

std::int64_t spmm_stage_commits(const std::vector<char>& staged) {
  const auto n = static_cast<std::int64_t>(std::count(staged.begin(), staged.end(), 1));
  return (n + kSpmmStageChunk - 1) / kSpmmStageChunk;
}

bool spmm_stage_commit_after(std::int64_t copy, std::int64_t copies) {
  return (copy + 1) % kSpmmStageChunk == 0 || copy + 1 == copies;
}

std::int64_t spmm_stage_wait(std::int64_t slot, std::int64_t commits) {
  return slot % kSpmmStageChunk == 0 ? commits - 1 - slot / kSpmmStageChunk : -1;
}

bool spmm_compressed_swizzled(std::int64_t n_tile) { return n_tile == 16 || n_tile == 32 || n_tile == 64; }

std::int64_t spmm_compressed_pitch(std::int64_t n_tile) {
  return n_tile == 8 || spmm_compressed_swizzled(n_tile) ? 2 * n_tile : 2 * n_tile + 16;
}

std::int64_t spmm_compressed_shared_bytes(const SpmmCompressedBody& b) {
  if (b.vector) return 0;
  const std::int64_t stages =
      std::int64_t{b.stages} * (std::int64_t{b.chunk_k} * spmm_compressed_pitch(b.n_tile) + b.stage_bytes);
  const std::int64_t partial = b.splits > 1 ? spmm_compressed_rows(b) * b.n_tile * 4 : 0;
  const std::int64_t operands =
      b.scatter ? 2 * spmm_compressed_rows(b) * b.chunk_k + 16 : kSpmmCompressedScratchBytes * b.warps;
  return std::max(stages, partial) + operands;
}

std::int64_t spmm_shared_bytes(const SpmmPlan& p) {
  if (const SpmmCompressedBody* b = p.compressed()) return spmm_compressed_shared_bytes(*b);
  const std::int64_t reduction = reduction_bytes_of(p);
  if (p.stage_slots() > 0)
    return spmm_stage_offset(p) +
           std::int64_t{p.stage_slots()} * p.layout.block_x * p.layout.cols_per_thread * 4;
  const std::int64_t stage = spmm_fragment_stages(p) ? std::int64_t{p.layout.block_x / 32} *
                                                           kSpmmFragmentRows * kSpmmFragmentStagePitch * 4
                                                     : 0;
  return reduction + stage;
}

bool spmm_fragment_stages(const SpmmPlan& p) {
  if (!p.fragment_k()) return false;
  if (p.layout.groups > 1 || p.problem.n_mode != SpmmNMode::fixed || p.problem.n % 8 != 0) return true;
  for (const auto& b : p.layout.blocks)
    if (!b.fragments.empty())
      for (const auto& g : b.groups)
        if (!g.steps.empty()) return true;
  return false;
}

float spmm_weight(const SpmmPlan& plan, double v) {
  const double r = round_to(plan.problem.dtype, v);
  if (!std::isfinite(r)) throw UsageError(fmt::format("the weight {} overflows {}", v, plan.problem.dtype));
  return static_cast<float>(r);
}

std::vector<float> spmm_kernel_values(const SpmmPlan& plan, const CsrMatrix& a) {
  if (plan.value_mode() == SpmmValueMode::rolled) return spmm_rolled_table(plan, a);
  std::vector<float> out;
  if (plan.compressed()) return out;  // the matrix is in the stream (spmm_compressed_stream)
  if (plan.value_mode() == SpmmValueMode::streamed) {
    for (std::int64_t i : plan.packed_order()) out.push_back(spmm_weight(plan, a.values.at(i)));
  } else {
    for (double v : a.values) out.push_back(spmm_weight(plan, v));
  }
  return out;
}

std::vector<std::uint32_t> spmm_fragment_words(const SpmmPlan& plan, const CsrMatrix& a) {
  if (plan.compressed()) return spmm_compressed_stream(plan, a);
  std::vector<std::uint32_t> out;
  const std::int32_t fk = plan.fragment_k();
  if (fk == 0) return out;
  const bool bf16 = plan.problem.dtype == DType::bf16;
  const auto bits = [&](const SpmmFragment& f, int r, int c) -> std::uint32_t {
    const std::int64_t e = f.entries.at(static_cast<std::size_t>(r * fk + c));
    const double v = e < 0 ? 0.0 : spmm_weight(plan, a.values.at(static_cast<std::size_t>(e)));
    return bf16 ? double_to_bf16_bits(v) : double_to_half_bits(v);
  };
  // mma.sync m16n8k8 / m16n8k16, A row-major: lane (g = lane / 4, t = lane % 4) holds register i at
  // row g + 8 * (i % 2) and columns 2t, 2t + 1 (+ 8 for i >= 2), the lower column in the low half.
  for (const auto& b : plan.layout.blocks)
    for (const SpmmFragment& f : b.fragments)
      for (int lane = 0; lane < 32; ++lane)
        for (int i = 0; i < fk / 4; ++i) {
          const int r = lane / 4 + 8 * (i % 2), c = 2 * (lane % 4) + 8 * (i / 2);
          out.push_back(bits(f, r, c) | (bits(f, r, c + 1) << 16));
        }
  return out;
}

namespace {

// check_plan of a compressed plan: the body's shape, the layout it implies and the split table (the
// stream itself is checked where it is built and where it is loaded).
void check_compressed(const SpmmPlan& p, const SpmmCompressedBody& b, const GpuTarget& target,
                      std::vector<std::string>& errors) {
  const auto err = [&](std::string s) { errors.push_back(std::move(s)); };
  if (!p.half()) err("compressed plans take f16 or bf16");
  if (p.epilogue.accumulate != DType::f32) err("compressed plans accumulate in f32");
  if (p.fragments) err("compressed plans hold no blocklet fragments");
  if (p.layout.row_split != SpmmRowSplit::equal || !p.layout.row_order.empty())
    err("compressed plans take equal row blocks in order");
  if (b.warps < 1 || b.warps > 16 || b.strips_per_warp < 1 || b.strips_per_warp > 4)
    err(fmt::format("warps {} (1..16) and strips_per_warp {} (1..4)", b.warps, b.strips_per_warp));
  if (b.chunk_k < rt::kRecordCols || b.chunk_k % rt::kRecordCols || b.chunk_k > 256 * rt::kRecordCols)
    err(fmt::format("chunk_k {} is not a multiple of {} up to {}", b.chunk_k, rt::kRecordCols,
                    256 * rt::kRecordCols));
  if (b.stages < 2 || b.stages > kSpmmCompressedMaxStages)
    err(fmt::format("stages {} outside 2..{}", b.stages, kSpmmCompressedMaxStages));
  if (b.splits < 1 || b.splits > rt::kMaxClusterSplits || (b.splits > 1 && !target.clusters))
    err(fmt::format("splits {} outside 1..{} (above 1 only on targets with thread-block clusters, not {})",
                    b.splits, rt::kMaxClusterSplits, target.arch));
  if (b.n_tile < 8 || b.n_tile > 64 || b.n_tile % 8)
    err(fmt::format("n_tile {} is not 8, 16, .., 64", b.n_tile));
  if (b.kept_rounds < 1 || b.kept_rounds > kSpmmCompressedMaxKeptRounds)
    err(fmt::format("kept_rounds {} outside 1..{}", b.kept_rounds, kSpmmCompressedMaxKeptRounds));
  if (b.stage_bytes < 0 || b.stage_bytes % 16)
    err(fmt::format("stage_bytes {} is not a multiple of 16", b.stage_bytes));
  if (b.formats == 0 || b.formats >= (1u << kSpmmRecordFormats))
    err(fmt::format("formats {} names no format", b.formats));
  if (b.scatter && spmm_compressed_rows(b) * b.chunk_k > rt::kScatterSlots)
    err(fmt::format("a scatter tile of {} rows x chunk_k {} passes {} slots", spmm_compressed_rows(b),
                    b.chunk_k, rt::kScatterSlots));
  if (b.vector &&
      (b.scatter || p.problem.n_mode != SpmmNMode::fixed || p.problem.n > rt::kVectorMaxN ||
       p.problem.k > rt::kVectorMaxK || b.chunk_k != rt::kRecordCols || b.splits != 1 ||
       b.n_tile != round_up(p.problem.n, 8) || b.stage_bytes != 0 || 16 * b.strips_per_warp % b.warps))
    err(fmt::format(
        "a vector plan computes a fixed N of 1..{} with K at most {} (not N {}{}, K {}), with chunk_k "
        "{}, one split, n_tile N rounded up to 8, no stage and whole rows a warp (16 x {} strips over {} "
        "warps)",
        rt::kVectorMaxN, rt::kVectorMaxK, p.problem.n,
        p.problem.n_mode == SpmmNMode::fixed ? "" : " at run time", p.problem.k, rt::kRecordCols,
        b.strips_per_warp, b.warps));
  if (!errors.empty()) return;
  const std::int64_t rows = spmm_compressed_rows(b);
  const std::int64_t row_blocks = ceil_div(p.problem.m, rows), chunks = ceil_div(p.problem.k, b.chunk_k);
  if (p.layout.rows_per_block != rows || p.layout.panel_rows != rows || p.layout.groups != 1 ||
      p.layout.n_tile != 32 * b.warps || p.layout.block_x != 32 * b.warps)
    err(
        fmt::format("layout (rows_per_block {}, panel_rows {}, groups {}, n_tile {}, block_x {}) is not the "
                    "body's ({} rows, one group of {} threads)",
                    p.layout.rows_per_block, p.layout.panel_rows, p.layout.groups, p.layout.n_tile,
                    p.layout.block_x, rows, 32 * b.warps));
  if (p.layout.block_rows() != row_blocks)
    err(fmt::format("{} block rows, not {}", p.layout.block_rows(), row_blocks));
  for (std::size_t i = 0; i < p.layout.blocks.size(); ++i) {
    const SpmmBlockRow& br = p.layout.blocks[i];
    const std::int64_t begin = static_cast<std::int64_t>(i) * rows;
    if (br.row_begin != begin || br.row_end != std::min(p.problem.m, begin + rows) || !br.groups.empty() ||
        !br.fragments.empty())
      err(fmt::format("block row {} is not rows [{}, {}) without steps", i, begin,
                      std::min(p.problem.m, begin + rows)));
  }
  if (static_cast<std::int64_t>(b.split_chunks.size()) != row_blocks * (b.splits + 1)) {
    err(fmt::format("split_chunks holds {} bounds, not {}", b.split_chunks.size(),
                    row_blocks * (b.splits + 1)));
  } else {
    for (std::int64_t r = 0; r < row_blocks; ++r)
      for (std::int64_t s = 0; s <= b.splits; ++s) {
        const std::int64_t v = b.split_chunks[static_cast<std::size_t>(r * (b.splits + 1) + s)];
        const std::int64_t prev =
            s ? b.split_chunks[static_cast<std::size_t>(r * (b.splits + 1) + s - 1)] : 0;
        if (v < prev || (s == 0 && v != 0) || (s == b.splits && v != chunks)) {
          err(fmt::format("split_chunks of row block {} do not run from 0 to {} in order", r, chunks));
          return;
        }
      }
  }
  if (p.layout.shared_bytes != spmm_compressed_shared_bytes(b))
    err("shared_bytes differs from spmm_compressed_shared_bytes");
  if (p.layout.shared_bytes > target.shared_per_block_optin)
    err(fmt::format("{} bytes of shared memory exceed the {} a block of {} takes", p.layout.shared_bytes,
                    target.shared_per_block_optin, target.arch));
  if (p.block_rows() > target.max_grid_y)
    err(fmt::format("{} row blocks x {} splits pass the grid's y limit {}", row_blocks, b.splits,
                    target.max_grid_y));
}

}  // namespace

namespace {

// Convolution plans (SpmmPlan "Convolution"): the geometry is valid and gives the problem's shape,
// and the plan is one the convolution kernels implement.
void check_conv_plan(const SpmmPlan& p, std::vector<std::string>& errors) {
  const rt::ConvGeometry& g = *p.problem.conv;
  if (const auto e = rt::check_conv_geometry(g); !e.empty()) {
    errors.push_back("conv: " + e.front());
    return;
  }
  if (p.problem.k != g.k() || p.problem.n != g.pixels() || p.problem.n_mode != SpmmNMode::fixed)
    errors.push_back(fmt::format(
        "conv: the problem is {}x{}, N {} ({}); the geometry {} gives K {} and N {} (fixed)", p.problem.m,
        p.problem.k, p.problem.n, name(p.problem.n_mode), rt::describe(g), g.k(), g.pixels()));
  if (g.input_elements(1) >= (std::int64_t{1} << 29))
    errors.push_back(
        fmt::format("conv: an image of {} values; an executor takes fewer than 2^29 (its offsets "
                    "are 32-bit byte counts)",
                    g.input_elements(1)));
  if (p.fragment_k() != 0 || p.compressed())
    errors.push_back("conv: convolution executors are unrolled or rolled, without tensor-core fragments");
  if (p.unrolled() && (p.layout.cols_per_thread != (p.half() ? 2 : 1) || p.stage_slots() > 0))
    errors.push_back(
        "conv: unrolled convolution plans take one column a thread (fp32) or a pair (f16 / bf16) and no "
        "staged steps");
  if (p.rolled() && (p.step_lanes() != 1 || p.layout.n_tile % 32 != 0))
    errors.push_back("conv: rolled convolution plans take groups of whole warps and no step lanes");
}

}  // namespace

SpmmProblem conv_problem(const rt::ConvGeometry& g, std::int64_t out_channels, bool bias, bool relu,
                         DType dtype) {
  SpmmProblem pr;
  pr.m = out_channels;
  pr.k = g.k();
  pr.n = g.pixels();
  pr.n_mode = SpmmNMode::fixed;
  pr.bias = bias;
  pr.relu = relu;
  pr.dtype = dtype;
  pr.conv = g;
  return pr;
}

std::vector<std::string> check_plan(const SpmmPlan& p, const CsrMatrix& a, const GpuTarget& target) {
  std::vector<std::string> errors;
  const auto err = [&](std::string s) { errors.push_back(std::move(s)); };
  const SpmmProblem& pr = p.problem;
  if (pr.m != a.rows || pr.k != a.cols)
    err(fmt::format("problem {}x{} but A is {}x{}", pr.m, pr.k, a.rows, a.cols));
  if (pr.n < 1) err("n must be positive");
  if (pr.n >= (std::int64_t{1} << 30))
    err(fmt::format("n {} must be below 2^30 (a row of B's pitch in bytes fits 32 bits)", pr.n));
  if (!spmm_dtype(pr.dtype)) err(fmt::format("dtype '{}' is not f32, f16 or bf16", pr.dtype));
  const bool rolled = p.value_mode() == SpmmValueMode::rolled;
  if (pr.conv) check_conv_plan(p, errors);
  const bool lanes = p.step_lanes() > 1;
  if (p.layout.cols_per_thread != (p.half() || (rolled && !lanes) ? 2 : 1) && !p.fp32_pairs())
    err(fmt::format("cols_per_thread {} does not fit dtype {}{}", p.layout.cols_per_thread, pr.dtype,
                    rolled ? lanes ? " (rolled, step lanes)" : " (rolled)" : ""));
  if (p.step_lanes() < 1 || p.step_lanes() > 32 || (p.step_lanes() & (p.step_lanes() - 1)) != 0)
    err(fmt::format("step_lanes {} is not a power of two in 1..32", p.step_lanes()));
  if (lanes && (!rolled || p.layout.n_tile != 32))
    err(fmt::format("step_lanes {} needs a rolled plan of one warp a group (n_tile 32, not {})",
                    p.step_lanes(), p.layout.n_tile));
  if (p.fp32_pairs() && (pr.n_mode != SpmmNMode::fixed || pr.n % 2 != 0))
    err(fmt::format("two fp32 columns a thread need a fixed even N, not {}", pr.n));
  if (rolled && (p.half() || p.fragment_k() != 0)) err("rolled plans are fp32 without tensor-core fragments");
  if (rolled && p.layout.row_split != SpmmRowSplit::equal) err("rolled plans take equal row panels");
  if (p.hints.programmatic_trigger && p.half())
    err("f16 / bf16 kernels do not let the next grid launch early");
  if (p.hints.programmatic_trigger && !p.hints.programmatic)
    err("programmatic_trigger needs a programmatic plan");
  if (p.layout.row_split == SpmmRowSplit::clustered && (rolled || p.half()))
    err("clustered rows need an fp32 unrolled plan");
  if (p.layout.row_split == SpmmRowSplit::clustered) {
    std::vector<char> taken(static_cast<std::size_t>(std::max<std::int64_t>(pr.m, 0)), 0);
    bool permutation = static_cast<std::int64_t>(p.layout.row_order.size()) == pr.m;
    for (std::size_t i = 0; permutation && i < p.layout.row_order.size(); ++i) {
      const std::int64_t r = p.layout.row_order[i];
      permutation = r >= 0 && r < pr.m && !taken[static_cast<std::size_t>(r)];
      if (permutation) taken[static_cast<std::size_t>(r)] = 1;
    }
    if (!permutation) err(fmt::format("row_order is not a permutation of the {} rows", pr.m));
  } else if (!p.layout.row_order.empty()) {
    err("row_order must be empty unless the rows are clustered");
  }
  if (p.stage_min_entries() < 0 || p.stage_slots() < 0 || p.stage_slots() > kSpmmMaxStageSlots ||
      (p.stage_slots() > 0) != (p.stage_min_entries() > 0))
    err(fmt::format("stage_min_entries {} and stage_slots {}: both 0, or both positive with at most {} slots",
                    p.stage_min_entries(), p.stage_slots(), kSpmmMaxStageSlots));
  if (p.stage_slots() > 0 && (rolled || p.half())) err("staged steps need an fp32 unrolled plan");
  if (p.epilogue.bias != pr.bias || p.epilogue.relu != pr.relu || p.epilogue.output != pr.dtype)
    err(fmt::format(
        "epilogue (bias {}, relu {}, output {}) differs from the problem (bias {}, relu {}, dtype {})",
        p.epilogue.bias, p.epilogue.relu, p.epilogue.output, pr.bias, pr.relu, pr.dtype));
  if (p.unrolled() && p.unrolled()->values == SpmmValueMode::rolled)
    err("an unrolled body's values are baked or streamed");
  if (p.fragments && p.layout.blocks.empty()) err("fragments without block rows");
  if (p.epilogue.accumulate != DType::f32 && p.epilogue.accumulate != pr.dtype)
    err(fmt::format("accumulate '{}' is neither f32 nor the dtype {}", p.epilogue.accumulate, pr.dtype));
  if (p.layout.n_tile < 1 || p.layout.groups < 1 || p.layout.block_x != p.layout.n_tile * p.layout.groups ||
      p.layout.block_x > 1024)
    err(fmt::format("launch shape: n_tile {} groups {} block_x {}", p.layout.n_tile, p.layout.groups,
                    p.layout.block_x));
  if (!p.compressed() && (p.layout.rows_per_block < 1 || p.layout.rows_per_block > kSpmmMaxAccumulators))
    err(fmt::format("rows_per_block {} outside 1..{}", p.layout.rows_per_block, kSpmmMaxAccumulators));
  if (p.fragment_k() != 0) {
    if (!p.half() || (p.fragment_k() != 8 && p.fragment_k() != 16))
      err(fmt::format("fragment_k {} needs 8 or 16 and a half dtype", p.fragment_k()));
    if (p.layout.rows_per_block != kSpmmFragmentRows || p.layout.n_tile % 32 != 0 ||
        p.layout.row_split != SpmmRowSplit::equal)
      err("fragment plans need equal block rows of 16 rows and groups of whole warps");
  }
  if (p.layout.shared_bytes != spmm_shared_bytes(p)) err("shared_bytes differs from spmm_shared_bytes");
  if (p.hints.max_registers < p.hints.estimated_registers ||
      p.hints.max_registers > target.max_registers_per_thread)
    err(fmt::format("max_registers {} outside {}..{} (the accumulators and the overhead)",
                    p.hints.max_registers, p.hints.estimated_registers, target.max_registers_per_thread));
  if (p.hints.assembler_opt_level < 0 || p.hints.assembler_opt_level > 3)
    err(fmt::format("assembler_opt_level {} outside 0..3", p.hints.assembler_opt_level));
  if (!errors.empty()) return errors;
  // Compressed plans: their body and layout (their rows are in the stream, not in steps).
  if (const SpmmCompressedBody* b = p.compressed()) {
    check_compressed(p, *b, target, errors);
    return errors;
  }
  if (pr.m > 0 && p.layout.blocks.empty()) err("no block rows");
  std::int64_t next = 0;
  for (const auto& b : p.layout.blocks) {
    if (b.row_begin != next || b.row_end <= b.row_begin)
      err(fmt::format("block row [{}, {}) does not continue at row {}", b.row_begin, b.row_end, next));
    next = b.row_end;
  }
  if (next != pr.m) err(fmt::format("block rows end at row {}, not {}", next, pr.m));
  if (!errors.empty()) return errors;
  std::vector<char> seen(static_cast<std::size_t>(a.nnz()), 0);
  for (std::size_t bi = 0; bi < p.layout.blocks.size(); ++bi) check_block(p, a, bi, seen, errors);
  const auto missing = std::count(seen.begin(), seen.end(), 0);
  if (missing) err(fmt::format("{} nonzeros of A appear in no step", missing));
  if (p.value_mode() == SpmmValueMode::streamed) {
    std::vector<std::int64_t> order;
    for_each_entry(p, [&](auto&, auto&, auto&, const SpmmEntry& e) { order.push_back(e.value_index); });
    if (order != p.packed_order()) err("packed_order is not the emission order");
  } else if (!p.packed_order().empty()) {
    err("packed_order must be empty outside streamed mode");
  }
  return errors;
}

json to_json(const SpmmPlan& p) {
  json blocks = json::array();
  for (const auto& b : p.layout.blocks) {
    json groups = json::array();
    for (const auto& g : b.groups) {
      json steps = json::array();
      for (const auto& s : g.steps) {
        json entries = json::array();
        for (const auto& e : s.entries) entries.push_back({e.row, e.value_index});
        steps.push_back({s.k, std::move(entries)});
      }
      groups.push_back(std::move(steps));
    }
    json jb = {{"rows", {b.row_begin, b.row_end}}, {"groups", std::move(groups)}};
    if (p.fragments) {
      json fragments = json::array();
      for (const auto& f : b.fragments) fragments.push_back({f.k, f.entries});
      jb["fragments"] = std::move(fragments);
    }
    blocks.push_back(std::move(jb));
  }
  const SpmmProblem& pr = p.problem;
  const SpmmLayout& l = p.layout;
  json body;
  if (const SpmmUnrolledBody* u = p.unrolled())
    body = {{"value_mode", to_string(u->values)},
            {"packed_order", u->packed_order},
            {"stage_min_entries", u->stage_min_entries},
            {"stage_slots", u->stage_slots}};
  else if (const SpmmRolledBody* r = p.rolled())
    body = {{"step_lanes", r->step_lanes}};
  else if (const SpmmCompressedBody* c = p.compressed())
    body = {{"warps", c->warps},
            {"strips_per_warp", c->strips_per_warp},
            {"chunk_k", c->chunk_k},
            {"stages", c->stages},
            {"splits", c->splits},
            {"n_tile", c->n_tile},
            {"layout", spmm_compressed_layout(*c)},
            {"kept_rounds", c->kept_rounds},
            {"formats", c->formats},
            {"bitmap_weight", c->bitmap_weight},
            {"position_weight", c->position_weight},
            {"split_chunks", c->split_chunks},
            {"stage_bytes", c->stage_bytes},
            {"stream_words", c->stream_words},
            {"records", {{"bitmap", c->records[0]}, {"positions", c->records[1]}, {"dense", c->records[2]}}}};
  json fragments = nullptr;
  if (p.fragments) {
    const SpmmBlocklets& bl = p.fragments->blocklets;
    fragments = {{"fragment_k", p.fragments->fragment_k},
                 {"blocklets",
                  {{"shape", bl.shape},
                   {"fill_threshold", bl.fill_threshold},
                   {"chosen_by", bl.chosen_by},
                   {"tiles", bl.tiles},
                   {"nnz_covered", bl.nnz_covered},
                   {"explicit_zeros", bl.explicit_zeros}}}};
  }
  const SpmmCodegenHints& h = p.hints;
  return {{"kind", "spmm"},
          {"problem",
           {{"m", pr.m},
            {"k", pr.k},
            {"n", pr.n},
            {"n_mode", name(pr.n_mode)},
            {"bias", pr.bias},
            {"relu", pr.relu},
            {"dtype", dtype_name(pr.dtype)},
            {"conv", pr.conv ? rt::to_json(*pr.conv) : json(nullptr)}}},
          {"layout",
           {{"row_split", to_string(l.row_split)},
            {"row_order", l.row_order},
            {"rows_per_block", l.rows_per_block},
            {"panel_rows", l.panel_rows},
            {"n_tile", l.n_tile},
            {"groups", l.groups},
            {"block_x", l.block_x},
            {"cols_per_thread", l.cols_per_thread},
            {"block_rows", l.block_rows()},
            {"shared_bytes", l.shared_bytes}}},
          {"family", to_string(p.family())},
          {"body", std::move(body)},
          {"fragments", std::move(fragments)},
          {"epilogue",
           {{"bias", p.epilogue.bias},
            {"relu", p.epilogue.relu},
            {"accumulate", dtype_name(p.epilogue.accumulate)},
            {"output", dtype_name(p.epilogue.output)}}},
          {"hints",
           {{"kernel_name", h.kernel_name},
            {"estimated_registers", h.estimated_registers},
            {"max_registers", h.max_registers},
            {"estimated_instructions", h.estimated_instructions},
            {"assembler_opt_level", h.assembler_opt_level},
            {"programmatic", h.programmatic},
            {"programmatic_trigger", h.programmatic_trigger}}},
          {"blocks", std::move(blocks)}};
}

SpmmPlan plan_from_json(const json& j) {
  try {
    if (j.at("kind") != "spmm") throw UsageError("SpMM plan: kind is not 'spmm'");
    SpmmPlan p;
    const json& pr = j.at("problem");
    p.problem = {pr.at("m"),
                 pr.at("k"),
                 pr.at("n"),
                 parse_n_mode(pr),
                 pr.at("bias"),
                 pr.at("relu"),
                 require_dtype(pr.at("dtype").get<std::string>(), "SpMM plan: dtype", kSpmmDtypes)};
    if (const auto c = pr.find("conv"); c != pr.end() && !c->is_null()) try {
        p.problem.conv = rt::conv_geometry_from_json(*c, "SpMM plan: problem");
      } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
      }
    const json& jl = j.at("layout");
    SpmmLayout& l = p.layout;
    l.row_split = parse_row_split(jl.at("row_split").get<std::string>(), "SpMM plan: row_split");
    l.row_order = jl.at("row_order").get<std::vector<std::int64_t>>();
    l.rows_per_block = jl.at("rows_per_block");
    l.panel_rows = jl.at("panel_rows");
    l.n_tile = jl.at("n_tile");
    l.groups = jl.at("groups");
    l.block_x = jl.at("block_x");
    l.cols_per_thread = jl.at("cols_per_thread");
    l.shared_bytes = jl.at("shared_bytes");
    const json& jb = j.at("body");
    p.body = spmm_body(parse_family(j.at("family").get<std::string>()));
    if (SpmmUnrolledBody* u = p.unrolled()) {
      u->values = parse_value_mode(jb.at("value_mode").get<std::string>(), "SpMM plan: value_mode");
      if (u->values == SpmmValueMode::rolled)
        throw UsageError("SpMM plan: an unrolled body's values are baked or streamed");
      u->packed_order = jb.at("packed_order").get<std::vector<std::int64_t>>();
      u->stage_min_entries = jb.at("stage_min_entries");
      u->stage_slots = jb.at("stage_slots");
    } else if (SpmmRolledBody* r = p.rolled()) {
      r->step_lanes = jb.at("step_lanes");
    } else if (SpmmCompressedBody* c = p.compressed()) {
      c->warps = jb.at("warps");
      c->strips_per_warp = jb.at("strips_per_warp");
      c->chunk_k = jb.at("chunk_k");
      c->stages = jb.at("stages");
      c->splits = jb.at("splits");
      c->n_tile = jb.at("n_tile");
      const std::string layout = jb.at("layout").get<std::string>();
      c->scatter = layout == "scatter";
      c->vector = layout == "vector";
      if (layout != spmm_compressed_layout(*c))
        throw UsageError(fmt::format("SpMM plan: layout '{}' is not records, scatter or vector", layout));
      c->kept_rounds = jb.value("kept_rounds", 1);
      c->formats = jb.at("formats");
      c->bitmap_weight = jb.at("bitmap_weight");
      c->position_weight = jb.at("position_weight");
      c->split_chunks = jb.at("split_chunks").get<std::vector<std::int32_t>>();
      c->stage_bytes = jb.at("stage_bytes");
      c->stream_words = jb.at("stream_words");
      const json& rec = jb.at("records");
      c->records[0] = rec.at("bitmap");
      c->records[1] = rec.at("positions");
      c->records[2] = rec.at("dense");
    }
    if (const json& jf = j.at("fragments"); !jf.is_null()) {
      SpmmFragments f;
      f.fragment_k = jf.at("fragment_k");
      const json& jbl = jf.at("blocklets");
      f.blocklets = {jbl.at("shape"), jbl.at("fill_threshold"), jbl.at("chosen_by"),
                     jbl.at("tiles"), jbl.at("nnz_covered"),    jbl.at("explicit_zeros")};
      p.fragments = std::move(f);
    }
    const json& je = j.at("epilogue");
    p.epilogue.bias = je.at("bias");
    p.epilogue.relu = je.at("relu");
    p.epilogue.accumulate =
        require_dtype(je.at("accumulate").get<std::string>(), "SpMM plan: accumulate", kSpmmDtypes);
    p.epilogue.output = require_dtype(je.at("output").get<std::string>(), "SpMM plan: output", kSpmmDtypes);
    const json& jh = j.at("hints");
    SpmmCodegenHints& h = p.hints;
    h.kernel_name = jh.at("kernel_name");
    h.estimated_registers = jh.at("estimated_registers");
    h.max_registers = jh.at("max_registers");
    h.estimated_instructions = jh.at("estimated_instructions");
    h.assembler_opt_level = jh.at("assembler_opt_level");
    h.programmatic = jh.value("programmatic", false);
    // Plans written before the key existed let the next grid launch early whenever programmatic.
    h.programmatic_trigger = jh.value("programmatic_trigger", h.programmatic);
    for (const json& jblock : j.at("blocks")) {
      SpmmBlockRow b{jblock.at("rows").at(0), jblock.at("rows").at(1), {}, {}};
      if (jblock.contains("fragments"))
        for (const json& jf : jblock.at("fragments"))
          b.fragments.push_back({jf.at(0), jf.at(1).get<std::vector<std::int64_t>>()});
      for (const json& jg : jblock.at("groups")) {
        SpmmGroup g;
        for (const json& js : jg) {
          SpmmStep s{js.at(0), {}};
          for (const json& je2 : js.at(1)) s.entries.push_back({je2.at(0), je2.at(1)});
          g.steps.push_back(std::move(s));
        }
        b.groups.push_back(std::move(g));
      }
      l.blocks.push_back(std::move(b));
    }
    if (jl.at("block_rows") != l.block_rows())
      throw UsageError("SpMM plan: block_rows differs from the blocks listed");
    return p;
  } catch (const json::exception& e) {
    throw UsageError(fmt::format("SpMM plan: malformed JSON: {}", e.what()));
  }
}

}  // namespace sparsecc
