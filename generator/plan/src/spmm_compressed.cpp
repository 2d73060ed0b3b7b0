#include "sparsecc/plan/spmm_compressed.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>

#include "sparsecc/common/dtype.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/common/math.hpp"

namespace sparsecc {

namespace {

constexpr int kRows = rt::kRecordRows, kCols = rt::kRecordCols;

// One nonzero of a piece: its row and column in the piece, and its index in A's CSR arrays.
struct PieceEntry {
  std::uint8_t r = 0, c = 0;
  std::int64_t index = 0;
};

// What a piece's record looks like in each format.
struct PieceShape {
  std::uint64_t bitmaps[rt::kRecordSubtiles] = {};
  int steps[rt::kRecordSteps] = {};
  int nnz = 0;
  unsigned present() const {
    unsigned p = 0;
    for (int j = 0; j < rt::kRecordSubtiles; ++j) p |= (bitmaps[j] != 0) << j;
    return p;
  }
};

int subtile_of(int r, int c) { return 4 * (c / 16) + 2 * ((c % 16) / 8) + r / 8; }

// The place of element (r, c) of a 16 x 16 step in the step's mma.sync A operands: 8 lane + 2 register
// + half, for lane (r % 8, c % 8 / 2), register 2 (c / 8) + r / 8 and half c % 2.
int step_place(std::int64_t r, std::int64_t c) {
  return static_cast<int>(((r % 8) * 4 + (c % 8) / 2) * 8 + (2 * (c / 8) + r / 8) * 2 + c % 2);
}
int subtile_bit(int r, int c) { return 8 * (r % 8) + c % 8; }

PieceShape shape_of(const PieceEntry* e, std::size_t count) {
  PieceShape s;
  for (std::size_t i = 0; i < count; ++i) {
    s.bitmaps[subtile_of(e[i].r, e[i].c)] |= std::uint64_t{1} << subtile_bit(e[i].r, e[i].c);
    ++s.steps[e[i].c / 16];
  }
  s.nnz = static_cast<int>(count);
  return s;
}

std::int64_t bitmap_bytes(const PieceShape& s) {
  return round_up(8 + 8 * std::popcount(s.present()) + 2 * std::int64_t{s.nnz}, 8);
}
std::int64_t position_bytes(const PieceShape& s) { return round_up(8 + 3 * std::int64_t{s.nnz}, 8); }
constexpr std::int64_t kDenseBytes = 8 + 2 * kRows * kCols;

// The format of least cost among the allowed ones (bitmap when none is allowed).
SpmmRecordFormat choose_format(const PieceShape& s, const SpmmCompressedBody& body, std::int64_t& bytes) {
  const auto allowed = [&](SpmmRecordFormat f) { return body.formats >> static_cast<int>(f) & 1u; };
  SpmmRecordFormat best = SpmmRecordFormat::bitmap;
  bytes = bitmap_bytes(s);
  std::int64_t best_cost =
      allowed(best) ? bytes + std::int64_t{body.bitmap_weight} * std::popcount(s.present()) : INT64_MAX;
  const bool positions_fit =
      std::all_of(std::begin(s.steps), std::end(s.steps), [](int n) { return n <= 255; });
  if (allowed(SpmmRecordFormat::positions) && positions_fit) {
    const std::int64_t b = position_bytes(s), cost = b + std::int64_t{body.position_weight} * s.nnz;
    if (cost < best_cost) best = SpmmRecordFormat::positions, best_cost = cost, bytes = b;
  }
  if (allowed(SpmmRecordFormat::dense) && kDenseBytes < best_cost)
    best = SpmmRecordFormat::dense, best_cost = kDenseBytes, bytes = kDenseBytes;
  return best;
}

// Walks A strip by strip, and in each strip its non-empty pieces in ascending order, calling
// fn(strip, piece, entries, count) with the piece's nonzeros in row-major order.
class PieceWalker {
 public:
  explicit PieceWalker(const CsrMatrix& a)
      : a_(a),
        pieces_(ceil_div(a.cols, kCols)),
        count_(static_cast<std::size_t>(pieces_), 0),
        offset_(static_cast<std::size_t>(pieces_), 0) {}
  std::int64_t strips() const { return ceil_div(a_.rows, kRows); }
  std::int64_t pieces() const { return pieces_; }

  template <class Fn>
  void strip(std::int64_t s, Fn&& fn) {
    const std::int64_t r0 = s * kRows, r1 = std::min(a_.rows, r0 + kRows);
    touched_.clear();
    for (std::int64_t r = r0; r < r1; ++r)
      for (std::int64_t i = a_.row_ptr[r]; i < a_.row_ptr[r + 1]; ++i) {
        const auto p = static_cast<std::size_t>(a_.col_idx[i] / kCols);
        if (count_[p]++ == 0) touched_.push_back(static_cast<std::int32_t>(p));
      }
    std::sort(touched_.begin(), touched_.end());
    std::int64_t total = 0;
    for (const std::int32_t p : touched_) {
      offset_[p] = total;
      total += count_[p];
    }
    entries_.resize(static_cast<std::size_t>(total));
    for (std::int64_t r = r0; r < r1; ++r)
      for (std::int64_t i = a_.row_ptr[r]; i < a_.row_ptr[r + 1]; ++i) {
        const std::int32_t col = a_.col_idx[i];
        entries_[static_cast<std::size_t>(offset_[col / kCols]++)] = {
            static_cast<std::uint8_t>(r - r0), static_cast<std::uint8_t>(col % kCols), i};
      }
    std::int64_t begin = 0;
    for (const std::int32_t p : touched_) {
      const std::int64_t n = count_[p];
      fn(s, p, entries_.data() + begin, static_cast<std::size_t>(n));
      begin += n;
      count_[p] = 0;
    }
  }

 private:
  const CsrMatrix& a_;
  std::int64_t pieces_;
  std::vector<std::int64_t> count_, offset_;
  std::vector<std::int32_t> touched_;
  std::vector<PieceEntry> entries_;
};

void put16(std::vector<unsigned char>& out, std::size_t at, std::uint16_t v) {
  out[at] = static_cast<unsigned char>(v & 0xff);
  out[at + 1] = static_cast<unsigned char>(v >> 8);
}

// Appends the record of a piece (entries in row-major order) to `seg`, whose start is 16-byte aligned.
void write_record(std::vector<unsigned char>& seg, SpmmRecordFormat format, int kt, const PieceEntry* e,
                  std::size_t count, const std::vector<std::uint16_t>& bits) {
  const std::size_t at = seg.size();
  const PieceShape s = shape_of(e, count);
  const auto value = [&](std::size_t i) { return bits[static_cast<std::size_t>(e[i].index)]; };
  seg.resize(at + 8, 0);
  seg[at] = static_cast<unsigned char>(format);
  seg[at + 1] = static_cast<unsigned char>(kt);
  switch (format) {
    case SpmmRecordFormat::bitmap: {
      const unsigned present = s.present();
      put16(seg, at + 2, static_cast<std::uint16_t>(count));
      put16(seg, at + 4, static_cast<std::uint16_t>(present));
      for (int j = 0; j < rt::kRecordSubtiles; ++j)
        if (s.bitmaps[j])
          for (int b = 0; b < 8; ++b) seg.push_back(static_cast<unsigned char>(s.bitmaps[j] >> (8 * b)));
      // Values sub-tile after sub-tile, each in bit order: the entries are row-major, so a stable
      // counting sort by sub-tile keeps every sub-tile's values in bit order.
      std::size_t start[rt::kRecordSubtiles + 1] = {};
      for (std::size_t i = 0; i < count; ++i) ++start[subtile_of(e[i].r, e[i].c) + 1];
      for (int j = 0; j < rt::kRecordSubtiles; ++j) start[j + 1] += start[j];
      const std::size_t v = seg.size();
      seg.resize(v + 2 * count);
      for (std::size_t i = 0; i < count; ++i)
        put16(seg, v + 2 * start[subtile_of(e[i].r, e[i].c)]++, value(i));
      break;
    }
    case SpmmRecordFormat::positions: {
      put16(seg, at + 2, static_cast<std::uint16_t>(count));
      for (int q = 0; q < rt::kRecordSteps; ++q) seg[at + 4 + q] = static_cast<unsigned char>(s.steps[q]);
      // Step after step (a stable counting sort), each nonzero with its place in the step's operands.
      std::size_t start[rt::kRecordSteps + 1] = {};
      for (std::size_t i = 0; i < count; ++i) ++start[e[i].c / 16 + 1];
      for (int q = 0; q < rt::kRecordSteps; ++q) start[q + 1] += start[q];
      const std::size_t v = seg.size(), p = v + 2 * count;
      seg.resize(v + 3 * count);
      for (std::size_t i = 0; i < count; ++i) {
        const std::size_t at = start[e[i].c / 16]++;
        put16(seg, v + 2 * at, value(i));
        seg[p + at] = static_cast<unsigned char>(step_place(e[i].r, e[i].c % 16));
      }
      break;
    }
    case SpmmRecordFormat::dense: {
      put16(seg, at + 2, static_cast<std::uint16_t>(kRows * kCols));
      const std::size_t v = seg.size();
      seg.resize(v + 2 * kRows * kCols, 0);
      for (std::size_t i = 0; i < count; ++i) {
        const int q = e[i].c / 16;
        put16(seg, v + 2 * static_cast<std::size_t>(q * 256 + step_place(e[i].r, e[i].c % 16)), value(i));
      }
      break;
    }
  }
  seg.resize(static_cast<std::size_t>(round_up(static_cast<std::int64_t>(seg.size()), 8)), 0);
}

}  // namespace

SpmmPieceCensus spmm_piece_census(const CsrMatrix& a, const SpmmCompressedBody& body) {
  SpmmPieceCensus c;
  PieceWalker walker(a);
  c.strips = walker.strips();
  c.pieces_per_strip = walker.pieces();
  c.strip_begin.reserve(static_cast<std::size_t>(c.strips + 1));
  c.strip_begin.push_back(0);
  for (std::int64_t s = 0; s < c.strips; ++s) {
    walker.strip(s, [&](std::int64_t, std::int32_t piece, const PieceEntry* e, std::size_t count) {
      std::int64_t bytes = 0;
      const SpmmRecordFormat f = choose_format(shape_of(e, count), body, bytes);
      c.piece.push_back(piece);
      c.bytes.push_back(static_cast<std::int32_t>(bytes));
      c.format.push_back(static_cast<std::uint8_t>(f));
      c.nnz.push_back(static_cast<std::int32_t>(count));
    });
    c.strip_begin.push_back(static_cast<std::int64_t>(c.piece.size()));
  }
  return c;
}

std::vector<std::int64_t> spmm_segment_bytes(const SpmmPieceCensus& census, std::int64_t strips_per_block,
                                             std::int64_t chunk_k) {
  const std::int64_t row_blocks = ceil_div(census.strips, strips_per_block);
  const std::int64_t per_chunk = chunk_k / kCols;
  const std::int64_t chunks = ceil_div(census.pieces_per_strip, per_chunk);
  std::vector<std::int64_t> bytes(static_cast<std::size_t>(row_blocks * chunks), 0);
  const std::int64_t header = rt::CompressedShape{.strips = strips_per_block}.header_bytes();
  for (std::int64_t s = 0; s < census.strips; ++s) {
    const std::int64_t r = s / strips_per_block;
    for (std::int64_t i = census.strip_begin[s]; i < census.strip_begin[s + 1]; ++i)
      bytes[static_cast<std::size_t>(r * chunks + census.piece[i] / per_chunk)] += census.bytes[i];
  }
  for (std::int64_t& b : bytes)
    if (b) b = round_up(b + header, 16);
  return bytes;
}

rt::CompressedShape spmm_compressed_shape(const SpmmPlan& plan) {
  const SpmmCompressedBody* body = plan.compressed();
  if (!body) throw UsageError("spmm_compressed_shape: the plan is not a compressed one");
  rt::CompressedShape s;
  s.strips = spmm_compressed_rows(*body) / kRows;  // the vector layout's warps share the block's strips
  s.row_blocks = ceil_div(ceil_div(plan.problem.m, kRows), s.strips);
  s.chunk_k = body->chunk_k;
  s.chunks = ceil_div(plan.problem.k, body->chunk_k);
  s.splits = body->splits;
  s.stage_bytes = body->stage_bytes;
  s.scatter = body->scatter;
  s.vector = body->vector;
  s.warp_lists = body->scatter ? body->warps : 0;
  return s;
}

std::vector<std::int64_t> spmm_scatter_segment_bytes(const CsrMatrix& a, std::int64_t rows,
                                                     std::int64_t chunk_k, std::int64_t warps) {
  const std::int64_t row_blocks = ceil_div(a.rows, rows), chunks = ceil_div(a.cols, chunk_k);
  const std::int64_t lists = static_cast<std::int64_t>(row_blocks * chunks * warps);
  std::vector<std::int64_t> entries(static_cast<std::size_t>(lists), 0);
  for (std::int64_t r = 0; r < a.rows; ++r)
    for (std::int64_t i = a.row_ptr[r]; i < a.row_ptr[r + 1]; ++i)
      ++entries[static_cast<std::size_t>((r / rows * chunks + a.col_idx[i] / chunk_k) * warps +
                                         r % rows * warps / rows)];
  std::vector<std::int64_t> bytes(static_cast<std::size_t>(row_blocks * chunks), 0);
  const std::int64_t header = rt::CompressedShape{.warp_lists = warps}.list_header_bytes();
  for (std::size_t s = 0; s < bytes.size(); ++s) {
    for (std::int64_t w = 0; w < warps; ++w)
      bytes[s] +=
          round_up(4 * entries[s * static_cast<std::size_t>(warps) + static_cast<std::size_t>(w)], 16);
    if (bytes[s]) bytes[s] += header;
  }
  return bytes;
}

namespace {

// Deals a warp list's entries (a multiple of four) to the stores of the kernel's scatter loop so that
// each warp store's entries fall in as few shared-memory wavefronts as the list's banks allow. The loop:
// lane l takes quads l, l + 32, ...; of a quad, entries x, y, z, w in turn. An entry's bank is its
// 32-bit word of the tile modulo 32 (the tile starts on a 16-byte boundary, which shifts every bank
// alike), and a store takes one wavefront a distinct word in its busiest bank. Each store, in issue
// order, takes one entry from each of the banks with the most entries left (again round the banks
// where the store has more lanes than banks have entries left).
class BankOrder {
 public:
  void operator()(std::vector<std::uint32_t>& v) {
    const std::size_t quads = v.size() / 4;
    for (auto& b : banks_) b.clear();
    for (const std::uint32_t e : v) banks_[((e & 0xffffu) >> 1) & 31u].push_back(e);
    const auto more = [&](int x, int y) {
      return banks_[static_cast<std::size_t>(x)].size() > banks_[static_cast<std::size_t>(y)].size();
    };
    // The banks by entries left, most first; a store takes from a prefix, which stays in order when
    // each of its banks loses one, so one merge restores the whole order. The banks hold copies, so
    // the stores' entries go straight back into v.
    std::array<int, 32> order, merged;
    for (int i = 0; i < 32; ++i) order[static_cast<std::size_t>(i)] = i;
    std::stable_sort(order.begin(), order.end(), more);
    for (std::size_t j = 0; j < quads; j += 32)
      for (std::size_t c = 0; c < 4; ++c)
        for (std::size_t q = j; q < std::min(quads, j + 32);) {
          std::size_t taken = 0;
          for (; taken < 32 && q < std::min(quads, j + 32) &&
                 !banks_[static_cast<std::size_t>(order[taken])].empty();
               ++taken, ++q) {
            auto& b = banks_[static_cast<std::size_t>(order[taken])];
            v[4 * q + c] = b.back();
            b.pop_back();
          }
          const auto mid = order.begin() + static_cast<std::ptrdiff_t>(taken);
          std::merge(mid, order.end(), order.begin(), mid, merged.begin(), more);
          order = merged;
        }
  }

 private:
  std::array<std::vector<std::uint32_t>, 32> banks_;  // reused from list to list
};

// The scatter layout's stream: every row block's nonzeros, chunk by chunk, as (value, place) entries in
// one list a warp (shape.warp_lists), each ordered for the banks.
void write_scatter_segments(const rt::CompressedShape& shape, const CsrMatrix& a,
                            const std::vector<std::uint16_t>& bits, std::vector<std::uint32_t>& words) {
  const std::size_t table = static_cast<std::size_t>(shape.split_words());
  const std::int64_t rows = shape.rows(), steps = shape.chunk_k / 16, lists = shape.warp_lists;
  const std::uint32_t pad = static_cast<std::uint32_t>(rows * shape.chunk_k);
  // Lists of chunk c: seg[c * lists + warp].
  std::vector<std::vector<std::uint32_t>> seg(static_cast<std::size_t>(shape.chunks * lists));
  const auto header = static_cast<std::size_t>(shape.list_header_bytes() / 4);
  BankOrder order_for_banks;
  for (std::int64_t rb = 0; rb < shape.row_blocks; ++rb) {
    for (auto& v : seg) v.clear();
    for (std::int64_t r = rb * rows; r < std::min(a.rows, (rb + 1) * rows); ++r) {
      const std::int64_t local = r - rb * rows, strip = local / 16, rr = local % 16,
                         warp = local * lists / rows;
      for (std::int64_t i = a.row_ptr[r]; i < a.row_ptr[r + 1]; ++i) {
        const std::int64_t col = a.col_idx[i], kk = col % shape.chunk_k;
        const auto place =
            static_cast<std::uint32_t>((strip * steps + kk / 16) * 256 + step_place(rr, kk % 16));
        seg[static_cast<std::size_t>(col / shape.chunk_k * lists + warp)].push_back(
            std::uint32_t{bits[static_cast<std::size_t>(i)]} << 16 | place);
      }
    }
    for (std::int64_t c = 0; c < shape.chunks; ++c) {
      const std::size_t start = words.size();
      words[table + static_cast<std::size_t>(rb * shape.chunks + c)] =
          static_cast<std::uint32_t>((start - static_cast<std::size_t>(shape.data_word())) / 4);
      bool empty = true;
      for (std::int64_t w = 0; w < lists; ++w)
        empty = empty && seg[static_cast<std::size_t>(c * lists + w)].empty();
      if (empty) continue;
      words.resize(start + header, 0);
      for (std::int64_t w = 0; w < lists; ++w) {
        auto& v = seg[static_cast<std::size_t>(c * lists + w)];
        while (v.size() % 4) v.push_back(pad);
        order_for_banks(v);
        words.insert(words.end(), v.begin(), v.end());
        words[start + static_cast<std::size_t>(w)] = static_cast<std::uint32_t>((words.size() - start) / 4);
      }
      if (static_cast<std::int64_t>(4 * (words.size() - start)) > shape.stage_bytes)
        throw UsageError(
            fmt::format("spmm_compressed_stream: segment (row block {}, chunk {}) holds {} bytes, "
                        "the plan stages {}",
                        rb, c, 4 * (words.size() - start), shape.stage_bytes));
    }
  }
  const std::size_t data = (words.size() - static_cast<std::size_t>(shape.data_word())) / 4;
  if (data > UINT32_MAX)
    throw UsageError("spmm_compressed_stream: the stream passes 64 GiB, the most its offsets address");
  words[table + static_cast<std::size_t>(shape.row_blocks * shape.chunks)] = static_cast<std::uint32_t>(data);
}

}  // namespace

std::vector<std::uint32_t> spmm_compressed_stream(const SpmmPlan& plan, const CsrMatrix& a) {
  const rt::CompressedShape shape = spmm_compressed_shape(plan);
  const SpmmCompressedBody& body = *plan.compressed();
  if (a.rows != plan.problem.m || a.cols != plan.problem.k)
    throw UsageError(fmt::format("spmm_compressed_stream: A is {}x{}, the plan {}x{}", a.rows, a.cols,
                                 plan.problem.m, plan.problem.k));
  if (static_cast<std::int64_t>(body.split_chunks.size()) != shape.split_words())
    throw UsageError(fmt::format("spmm_compressed_stream: {} split bounds, the shape needs {}",
                                 body.split_chunks.size(), shape.split_words()));
  // The weights as the kernel's 16-bit values.
  const bool bf16 = plan.problem.dtype == DType::bf16;
  std::vector<std::uint16_t> bits(static_cast<std::size_t>(a.nnz()));
  for (std::size_t i = 0; i < bits.size(); ++i) {
    const double w = spmm_weight(plan, a.values[i]);
    bits[i] = bf16 ? double_to_bf16_bits(w) : double_to_half_bits(w);
  }
  if (shape.vector) {
    // The row table, then every row's entries (columns ascending, as A's CSR holds them), padded to 4.
    // The kernel's entry indices are 32-bit, with room past the last row for a warp's last pieces.
    if (plan.problem.k > rt::kVectorMaxK || a.nnz() > std::int64_t{1} << 31)
      throw UsageError(fmt::format(
          "spmm_compressed_stream: a vector stream takes K up to {} and 2^31 nonzeros", rt::kVectorMaxK));
    const std::int64_t data = rt::vector_data_word(a.rows);
    std::vector<std::uint32_t> words(static_cast<std::size_t>(data + round_up(a.nnz(), 4)), 0);
    for (std::int64_t r = 0; r <= a.rows; ++r)
      words[static_cast<std::size_t>(r)] = static_cast<std::uint32_t>(a.row_ptr[static_cast<std::size_t>(r)]);
    for (std::int64_t i = 0; i < a.nnz(); ++i)
      words[static_cast<std::size_t>(data + i)] =
          std::uint32_t{bits[static_cast<std::size_t>(i)]} << 16 |
          static_cast<std::uint32_t>(a.col_idx[static_cast<std::size_t>(i)]);
    return words;
  }
  std::vector<std::uint32_t> words(static_cast<std::size_t>(shape.data_word()), 0);
  for (std::size_t i = 0; i < body.split_chunks.size(); ++i)
    words[i] = static_cast<std::uint32_t>(body.split_chunks[i]);
  if (shape.scatter) {
    words.reserve(static_cast<std::size_t>(std::max<std::int64_t>(body.stream_words, shape.data_word())));
    write_scatter_segments(shape, a, bits, words);
    return words;
  }
  std::vector<unsigned char> data;
  data.reserve(
      static_cast<std::size_t>(std::max<std::int64_t>(0, 4 * (body.stream_words - shape.data_word()))));
  PieceWalker walker(a);
  const std::int64_t per_chunk = shape.chunk_k / kCols;
  const std::int64_t header = shape.header_bytes();
  const std::size_t table = static_cast<std::size_t>(shape.split_words());
  // Records do not depend on where they land, so each strip of a row block writes its records to a
  // buffer of its own (chunk after chunk), and the segments are cut from those buffers.
  std::vector<std::vector<unsigned char>> strip_records(static_cast<std::size_t>(shape.strips));
  std::vector<std::vector<std::size_t>> chunk_at(static_cast<std::size_t>(shape.strips));
  for (std::int64_t r = 0; r < shape.row_blocks; ++r) {
    for (std::int64_t st = 0; st < shape.strips; ++st) {
      auto& bytes = strip_records[static_cast<std::size_t>(st)];
      auto& at = chunk_at[static_cast<std::size_t>(st)];
      bytes.clear();
      at.assign(static_cast<std::size_t>(shape.chunks + 1), 0);
      const std::int64_t s = r * shape.strips + st;
      if (s >= walker.strips()) continue;
      std::int64_t chunk = 0;
      walker.strip(s, [&](std::int64_t, std::int32_t piece, const PieceEntry* e, std::size_t count) {
        for (; chunk <= piece / per_chunk; ++chunk) at[static_cast<std::size_t>(chunk)] = bytes.size();
        std::int64_t cost = 0;
        const SpmmRecordFormat f = choose_format(shape_of(e, count), body, cost);
        write_record(bytes, f, static_cast<int>(piece % per_chunk), e, count, bits);
      });
      for (; chunk <= shape.chunks; ++chunk) at[static_cast<std::size_t>(chunk)] = bytes.size();
    }
    for (std::int64_t c = 0; c < shape.chunks; ++c) {
      words[table + static_cast<std::size_t>(r * shape.chunks + c)] =
          static_cast<std::uint32_t>(data.size() / 16);
      std::size_t total = static_cast<std::size_t>(header);
      for (std::int64_t st = 0; st < shape.strips; ++st) {
        const auto& at = chunk_at[static_cast<std::size_t>(st)];
        total += at[static_cast<std::size_t>(c + 1)] - at[static_cast<std::size_t>(c)];
      }
      if (total == static_cast<std::size_t>(header)) continue;
      const std::size_t seg = data.size();
      const std::size_t padded = static_cast<std::size_t>(round_up(static_cast<std::int64_t>(total), 16));
      if (static_cast<std::int64_t>(padded) > shape.stage_bytes)
        throw UsageError(
            fmt::format("spmm_compressed_stream: segment (row block {}, chunk {}) holds {} bytes, "
                        "the plan stages {}",
                        r, c, padded, shape.stage_bytes));
      data.resize(seg + padded, 0);
      std::size_t end = static_cast<std::size_t>(header);
      for (std::int64_t st = 0; st < shape.strips; ++st) {
        const auto& at = chunk_at[static_cast<std::size_t>(st)];
        const auto& bytes = strip_records[static_cast<std::size_t>(st)];
        const std::size_t from = at[static_cast<std::size_t>(c)],
                          len = at[static_cast<std::size_t>(c + 1)] - from;
        if (len) std::memcpy(data.data() + seg + end, bytes.data() + from, len);
        end += len;
        const auto end32 = static_cast<std::uint32_t>(end);
        std::memcpy(data.data() + seg + 4 * static_cast<std::size_t>(st), &end32, 4);
      }
    }
  }
  words[table + static_cast<std::size_t>(shape.row_blocks * shape.chunks)] =
      static_cast<std::uint32_t>(data.size() / 16);
  if (data.size() / 16 > UINT32_MAX)
    throw UsageError("spmm_compressed_stream: the stream passes 64 GiB, the most its offsets address");
  const std::size_t base = words.size();
  words.resize(base + data.size() / 4);
  std::memcpy(words.data() + base, data.data(), data.size());
  return words;
}

DenseMatrix interpret_spmm_compressed(const SpmmPlan& plan, const std::vector<std::uint32_t>& stream,
                                      const DenseMatrix& b, const std::vector<double>* bias) {
  const SpmmProblem& pr = plan.problem;
  const rt::CompressedShape shape = spmm_compressed_shape(plan);
  if (b.rows != pr.k || (pr.n_mode == SpmmNMode::fixed && b.cols != pr.n))
    throw UsageError(fmt::format("interpret_spmm: B is {}x{}, the plan wants {} rows", b.rows, b.cols, pr.k));
  if (pr.bias && (!bias || static_cast<std::int64_t>(bias->size()) != pr.m))
    throw UsageError(fmt::format("interpret_spmm: the plan needs a bias of {} entries", pr.m));
  const std::int64_t n = b.cols;
  const bool bf16 = pr.dtype == DType::bf16;
  const auto weight = [&](std::uint16_t h) { return bf16 ? bf16_bits_to_double(h) : half_bits_to_double(h); };
  std::vector<double> bq(b.data.size());
  for (std::size_t i = 0; i < bq.size(); ++i) bq[i] = round_to(pr.dtype, b.data[i]);
  if (shape.vector) {
    // Each output's exact products summed, rounded once to fp32 (the kernel's fp32 lane sums and warp
    // reduction agree to a few ulps), then bias, ReLU and the dtype's rounding.
    std::vector<double> sum(static_cast<std::size_t>(pr.m * n), 0.0);
    rt::walk_vector_stream(
        stream, pr.m, pr.k, "interpret_spmm", [&](std::int64_t row, std::int64_t col, std::uint16_t v) {
          const double w = weight(v);
          for (std::int64_t j = 0; j < n; ++j)
            sum[static_cast<std::size_t>(row * n + j)] += w * bq[static_cast<std::size_t>(col * n + j)];
        });
    DenseMatrix c(pr.m, n, std::nan(""));
    for (std::int64_t row = 0; row < pr.m; ++row)
      for (std::int64_t j = 0; j < n; ++j) {
        float v = static_cast<float>(sum[static_cast<std::size_t>(row * n + j)]);
        if (pr.bias) v += static_cast<float>((*bias)[static_cast<std::size_t>(row)]);
        if (pr.relu) v = std::fmax(v, 0.f);
        c(row, j) = round_to(pr.dtype, v);
      }
    return c;
  }
  const std::int64_t rows = kRows * shape.strips;
  // partial[split][local row][column], fp32 as the kernel's accumulators.
  std::vector<float> partial(static_cast<std::size_t>(shape.splits * rows * n));
  DenseMatrix c(pr.m, n, std::nan(""));
  std::vector<std::int64_t> split_of(static_cast<std::size_t>(shape.chunks), 0);
  rt::RecordTile tile;
  // The scatter layout: a chunk's entries of one row block fill its tile (rows x chunk_k), multiplied
  // step by step as the records' tiles below.
  std::vector<std::uint16_t> block_tile;
  std::int64_t tile_rb = -1, tile_chunk = -1;
  std::int64_t current = -1;
  const auto finish = [&](std::int64_t r) {
    for (std::int64_t i = 0; i < rows; ++i) {
      const std::int64_t row = r * rows + i;
      if (row >= pr.m) break;
      for (std::int64_t j = 0; j < n; ++j) {
        float v = 0.f;
        for (std::int64_t s = 0; s < shape.splits; ++s)
          v += partial[static_cast<std::size_t>((s * rows + i) * n + j)];
        if (pr.bias) v += static_cast<float>((*bias)[static_cast<std::size_t>(row)]);
        if (pr.relu) v = std::fmax(v, 0.f);
        c(row, j) = round_to(pr.dtype, v);
      }
    }
  };
  const auto start = [&](std::int64_t r) {
    std::fill(partial.begin(), partial.end(), 0.f);
    const std::size_t t = static_cast<std::size_t>(r * (shape.splits + 1));
    for (std::int64_t s = 0; s < shape.splits; ++s)
      for (std::uint32_t ch = stream[t + s]; ch < stream[t + s + 1]; ++ch) split_of[ch] = s;
  };
  // Adds the steps of a 16 x 16-step piece of A held row-major at `at` (pitch `pitch`) for local rows
  // row0 .. row0 + 16, columns k0 .. (k0 + 16 steps) of split `split`.
  const auto multiply = [&](const std::uint16_t* at, std::int64_t pitch, std::int64_t row0, std::int64_t k0,
                            std::int64_t steps, std::int64_t split) {
    for (int i = 0; i < kRows; ++i) {
      float* out = &partial[static_cast<std::size_t>((split * rows + row0 + i) * n)];
      for (std::int64_t q = 0; q < steps; ++q)
        for (std::int64_t j = 0; j < n; ++j) {
          double sum = 0;
          for (int e = 0; e < 16; ++e) {
            const std::uint16_t h = at[i * pitch + 16 * q + e];
            const std::int64_t k = k0 + 16 * q + e;
            if (k < pr.k) sum += weight(h) * bq[static_cast<std::size_t>(k * n + j)];
          }
          out[j] = static_cast<float>(static_cast<double>(out[j]) + sum);
        }
    }
  };
  if (shape.scatter) {
    const auto flush = [&] {
      if (tile_rb < 0) return;
      const std::int64_t split = split_of[static_cast<std::size_t>(tile_chunk)];
      for (std::int64_t s = 0; s < shape.strips; ++s)
        multiply(block_tile.data() + s * kRows * shape.chunk_k, shape.chunk_k, s * kRows,
                 tile_chunk * shape.chunk_k, shape.chunk_k / 16, split);
    };
    rt::walk_scatter_stream(stream, shape, pr.m, pr.k, "interpret_spmm", [&](const rt::ScatterEntry& e) {
      if (e.row_block != tile_rb || e.chunk != tile_chunk) {
        flush();
        while (current < e.row_block) {
          if (current >= 0) finish(current);
          start(++current);
        }
        tile_rb = e.row_block, tile_chunk = e.chunk;
        block_tile.assign(static_cast<std::size_t>(rows * shape.chunk_k), 0);
      }
      block_tile[static_cast<std::size_t>((e.row - e.row_block * rows) * shape.chunk_k + e.col -
                                          e.chunk * shape.chunk_k)] = e.value;
    });
    flush();
  } else
    rt::walk_compressed_stream(stream, shape, pr.k, "interpret_spmm", [&](const rt::RecordRef& ref) {
      while (current < ref.row_block) {
        if (current >= 0) finish(current);
        start(++current);
      }
      rt::decode_record(ref.p, tile);
      const std::int64_t split = split_of[static_cast<std::size_t>(ref.chunk)];
      multiply(tile.data(), kCols, ref.strip * kRows, ref.chunk * shape.chunk_k + ref.kt * kCols,
               rt::kRecordSteps, split);
    });
  while (current < shape.row_blocks) {
    if (current >= 0) finish(current);
    if (++current < shape.row_blocks) start(current);
  }
  return c;
}

}  // namespace sparsecc
