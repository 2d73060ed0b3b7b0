#include "sparsecc/runtime/compressed_stream.hpp"

#include <bit>
#include <cstring>
#include <stdexcept>

namespace sparsecc::rt {

namespace {

std::uint16_t u16(const unsigned char* p) { return static_cast<std::uint16_t>(p[0] | (p[1] << 8)); }
std::uint64_t u64(const unsigned char* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
std::int64_t round8(std::int64_t v) { return (v + 7) / 8 * 8; }

// The element (row, column) of a piece that bit `bit` of sub-tile j stands for.
void subtile_element(int j, int bit, int& row, int& col) {
  const int q = j / 4, f = j % 4;
  row = 8 * (f & 1) + bit / 8;
  col = 16 * q + 8 * (f >> 1) + bit % 8;
}

}  // namespace

std::int64_t record_bytes(const unsigned char* p) {
  const std::int64_t nvals = u16(p + 2);
  switch (static_cast<RecordFormat>(p[0])) {
    case RecordFormat::bitmap:
      return round8(8 + 8 * std::popcount(static_cast<unsigned>(u16(p + 4))) + 2 * nvals);
    case RecordFormat::positions:
      return round8(8 + 3 * nvals);
    case RecordFormat::dense:
      return 8 + 2 * kRecordRows * kRecordCols;
  }
  return -1;
}

void decode_record(const unsigned char* p, RecordTile& out) {
  out.fill(0);
  const std::int64_t nvals = u16(p + 2);
  switch (static_cast<RecordFormat>(p[0])) {
    case RecordFormat::bitmap: {
      const unsigned present = u16(p + 4);
      const unsigned char* bm = p + 8;
      const unsigned char* v = bm + 8 * std::popcount(present);
      std::int64_t next = 0;
      for (int j = 0; j < kRecordSubtiles; ++j) {
        if (!(present >> j & 1)) continue;
        const std::uint64_t bits = u64(bm);
        bm += 8;
        for (int b = 0; b < 64; ++b)
          if (bits >> b & 1) {
            int r = 0, c = 0;
            subtile_element(j, b, r, c);
            if (next < nvals) out[r * kRecordCols + c] = u16(v + 2 * next);
            ++next;
          }
      }
      return;
    }
    case RecordFormat::positions: {
      const unsigned char* v = p + 8;
      const unsigned char* pos = v + 2 * nvals;
      std::int64_t i = 0;
      for (int q = 0; q < kRecordSteps; ++q)
        for (int e = 0; e < p[4 + q] && i < nvals; ++e, ++i) {
          // pos = 8 lane + 2 register + half: lane (g, t), register f, half h -> row g + 8 (f & 1),
          // column 2 t + 8 (f >> 1) + h of the step.
          const int lane = pos[i] / 8, f = (pos[i] / 2) % 4, h = pos[i] % 2;
          const int r = lane / 4 + 8 * (f & 1), c = 2 * (lane % 4) + 8 * (f >> 1) + h;
          out[r * kRecordCols + 16 * q + c] = u16(v + 2 * i);
        }
      return;
    }
    case RecordFormat::dense: {
      const unsigned char* v = p + 8;
      for (int q = 0; q < kRecordSteps; ++q)
        for (int lane = 0; lane < 32; ++lane)
          for (int e = 0; e < 8; ++e) {
            const int f = e / 2, g = lane / 4, t = lane % 4;
            const int r = g + 8 * (f & 1), c = 16 * q + 8 * (f >> 1) + 2 * t + e % 2;
            out[r * kRecordCols + c] = u16(v + 2 * ((q * 32 + lane) * 8 + e));
          }
      return;
    }
  }
}

namespace {

// The shape, the split table and the segment table: throws through `fail` at the first fault.
template <class Fail>
void check_tables(std::span<const std::uint32_t> words, const CompressedShape& s, const Fail& fail) {
  if (s.row_blocks < 0 || s.chunks < 0 || s.splits < 1 || s.splits > kMaxClusterSplits || s.strips < 1 ||
      s.chunk_k < kRecordCols || s.chunk_k % kRecordCols || s.chunk_k / kRecordCols > 256 ||
      s.stage_bytes < 0 || (s.scatter && s.rows() * s.chunk_k > kScatterSlots))
    fail("the shape (row blocks, chunks, splits, strips, chunk_k) is out of range");
  const auto size = static_cast<std::int64_t>(words.size());
  if (size < s.data_word())
    fail("its " + std::to_string(size) + " words do not hold the split and segment tables (" +
         std::to_string(s.data_word()) + " words)");
  for (std::int64_t r = 0; r < s.row_blocks; ++r)
    for (std::int64_t i = 0; i <= s.splits; ++i) {
      const std::int64_t w = r * (s.splits + 1) + i;
      const std::int64_t v = words[static_cast<std::size_t>(w)];
      const std::int64_t prev = i ? words[static_cast<std::size_t>(w - 1)] : 0;
      if (v > s.chunks || v < prev || (i == 0 && v != 0) || (i == s.splits && v != s.chunks))
        fail("split table word " + std::to_string(w) + " (byte " + std::to_string(4 * w) +
             ") is not a chunk bound in order");
    }
  const std::int64_t data_bytes = 4 * (size - s.data_word());
  const std::int64_t table = s.split_words();
  for (std::int64_t r = 0; r < s.row_blocks; ++r)
    for (std::int64_t c = 0; c < s.chunks; ++c) {
      const std::int64_t w = table + r * s.chunks + c;
      const std::int64_t begin = 16 * std::int64_t{words[static_cast<std::size_t>(w)]};
      const std::int64_t end = 16 * std::int64_t{words[static_cast<std::size_t>(w + 1)]};
      if ((r == 0 && c == 0 && begin != 0) || end < begin || end > data_bytes)
        fail("segment table word " + std::to_string(w) + " (byte " + std::to_string(4 * w) +
             ") is out of order or past the data");
      if (end - begin > s.stage_bytes)
        fail("segment (row block " + std::to_string(r) + ", chunk " + std::to_string(c) + ") holds " +
             std::to_string(end - begin) + " bytes, more than stage_bytes");
    }
}

}  // namespace

void walk_compressed_stream(std::span<const std::uint32_t> words, const CompressedShape& s, std::int64_t k,
                            const std::string& name, const std::function<void(const RecordRef&)>& fn) {
  const auto fail = [&](const std::string& what) {
    throw std::invalid_argument(name + ": compressed stream: " + what);
  };
  if (s.scatter) fail("a scatter stream is not a stream of records");
  check_tables(words, s, fail);
  const auto* base = reinterpret_cast<const unsigned char*>(words.data()) + 4 * s.data_word();
  const std::int64_t table = s.split_words();
  for (std::int64_t r = 0; r < s.row_blocks; ++r)
    for (std::int64_t c = 0; c < s.chunks; ++c) {
      const std::int64_t w = table + r * s.chunks + c;
      const std::int64_t begin = 16 * std::int64_t{words[static_cast<std::size_t>(w)]};
      const std::int64_t len = 16 * std::int64_t{words[static_cast<std::size_t>(w + 1)]} - begin;
      const std::string where =
          "segment (row block " + std::to_string(r) + ", chunk " + std::to_string(c) + ")";
      if (len == 0) continue;
      const unsigned char* seg = base + begin;
      const std::int64_t header = s.header_bytes();
      std::int64_t from = header;
      if (len < header) fail(where + ": shorter than its header");
      for (std::int64_t st = 0; st < s.strips; ++st) {
        const std::int64_t to = u16(seg + 4 * st) | (std::int64_t{u16(seg + 4 * st + 2)} << 16);
        if (to < from || to > len || to % 8)
          fail(where + ": strip " + std::to_string(st) + " ends at byte " + std::to_string(to) +
               ", outside its segment");
        for (std::int64_t at = from; at < to;) {
          const unsigned char* p = seg + at;
          const std::string rec = where + ", strip " + std::to_string(st) + ", record at byte " +
                                  std::to_string(4 * s.data_word() + begin + at);
          if (to - at < 8) fail(rec + ": header past the strip's end");
          if (p[0] > 2) fail(rec + ": unknown format " + std::to_string(p[0]));
          const std::int64_t kt = p[1];
          if (kt >= s.chunk_k / kRecordCols || c * s.chunk_k + kt * kRecordCols >= k)
            fail(rec + ": piece " + std::to_string(kt) + " lies past the chunk or past A's columns");
          const std::int64_t bytes = record_bytes(p);
          if (bytes <= 0 || at + bytes > to)
            fail(rec + ": its " + std::to_string(bytes) + " bytes pass the strip's end");
          const std::int64_t nvals = u16(p + 2);
          const auto format = static_cast<RecordFormat>(p[0]);
          if (format == RecordFormat::bitmap) {
            std::int64_t count = 0;
            const unsigned present = u16(p + 4);
            for (int j = 0; j < std::popcount(present); ++j) {
              const std::uint64_t bits = u64(p + 8 + 8 * j);
              if (!bits) fail(rec + ": a present sub-tile with an empty bitmap");
              count += std::popcount(bits);
            }
            if (count != nvals)
              fail(rec + ": its bitmaps hold " + std::to_string(count) + " nonzeros, not nvals");
          } else if (format == RecordFormat::positions) {
            if (p[4] + p[5] + p[6] + p[7] != nvals) fail(rec + ": its step counts do not add up to nvals");
          } else if (nvals != kRecordRows * kRecordCols) {
            fail(rec + ": a dense record holds 1024 values");
          }
          if (fn) fn({r, c, st, kt, 4 * s.data_word() + begin + at, p, at});
          at += bytes;
        }
        from = to;
      }
    }
}

void walk_scatter_stream(std::span<const std::uint32_t> words, const CompressedShape& s, std::int64_t m,
                         std::int64_t k, const std::string& name,
                         const std::function<void(const ScatterEntry&)>& fn) {
  const auto fail = [&](const std::string& what) {
    throw std::invalid_argument(name + ": scatter stream: " + what);
  };
  if (!s.scatter) fail("a stream of records is not a scatter stream");
  check_tables(words, s, fail);
  if (s.warp_lists < 0 || (s.warp_lists && s.strips % s.warp_lists))
    fail("warp_lists " + std::to_string(s.warp_lists) + " does not divide " + std::to_string(s.strips) +
         " strips");
  const std::int64_t table = s.split_words(), steps = s.chunk_k / 16, pad = s.rows() * s.chunk_k;
  // Slots of one warp's strips (warp lists), else of the whole tile.
  const std::int64_t warp_slots = s.warp_lists ? pad / s.warp_lists : pad;
  const std::int64_t header = s.list_header_bytes() / 4;
  for (std::int64_t r = 0; r < s.row_blocks; ++r)
    for (std::int64_t c = 0; c < s.chunks; ++c) {
      const std::int64_t w = table + r * s.chunks + c;
      const std::int64_t begin = s.data_word() + 4 * std::int64_t{words[static_cast<std::size_t>(w)]};
      const std::int64_t end = s.data_word() + 4 * std::int64_t{words[static_cast<std::size_t>(w + 1)]};
      const std::string segment =
          "segment (row block " + std::to_string(r) + ", chunk " + std::to_string(c) + ")";
      // The lists: [from, to) words of warp `list` (one list when the segment has none).
      std::int64_t from = begin, list = 0;
      const auto list_end = [&](std::int64_t l) {
        if (!s.warp_lists) return end;
        const std::int64_t e = begin + 4 * std::int64_t{words[static_cast<std::size_t>(begin + l)]};
        if (e < from || e > end || (l + 1 == s.warp_lists && e != end))
          fail(segment + ", list end " + std::to_string(l) + " at byte " + std::to_string(4 * (begin + l)) +
               " lies outside the segment or before the list before it");
        return e;
      };
      if (s.warp_lists && begin != end) {
        if (end - begin < header)
          fail(segment + " at byte " + std::to_string(4 * begin) + " is shorter than its list header");
        from = begin + header;
      }
      for (; begin != end && list < std::max<std::int64_t>(s.warp_lists, 1); ++list) {
        const std::int64_t to = list_end(list);
        for (std::int64_t i = from; i < to; ++i) {
          const std::uint32_t e = words[static_cast<std::size_t>(i)];
          const std::int64_t place = e & 0xffffu;
          if (place == pad) continue;
          // place = ((strip * steps + q) * 32 + lane) * 8 + 2 f + h: lane (g, t), register f, half h ->
          // row g + 8 (f & 1), column 2 t + 8 (f >> 1) + h of step q.
          const std::int64_t lane = place / 8 % 32, f = place / 2 % 4, h = place % 2, q = place / 256 % steps;
          const std::int64_t strip = place / 256 / steps;
          const std::int64_t row = r * s.rows() + 16 * strip + lane / 4 + 8 * (f & 1);
          const std::int64_t col = c * s.chunk_k + 16 * q + 2 * (lane % 4) + 8 * (f >> 1) + h;
          if (place > pad || place / warp_slots != list || row >= m || col >= k)
            fail(segment + ", entry at byte " + std::to_string(4 * i) + ": place " + std::to_string(place) +
                 " lies outside " + (s.warp_lists ? "its warp's strips" : "the tile") + " or A");
          if (fn) fn({r, c, row, col, static_cast<std::uint16_t>(e >> 16)});
        }
        from = to;
      }
    }
}

void walk_vector_stream(std::span<const std::uint32_t> words, std::int64_t m, std::int64_t k,
                        const std::string& name,
                        const std::function<void(std::int64_t, std::int64_t, std::uint16_t)>& fn) {
  const auto fail = [&](const std::string& what) {
    throw std::invalid_argument(name + ": vector stream: " + what);
  };
  const auto size = static_cast<std::int64_t>(words.size());
  const std::int64_t data = vector_data_word(m);
  if (m < 1 || size < data)
    fail(std::to_string(size) + " words hold no row table of " + std::to_string(m) + " rows");
  if ((size - data) % 4)
    fail("the data (" + std::to_string(size - data) + " words) is not a multiple of 4 words");
  if (words[0] != 0) fail("the row table starts at " + std::to_string(words[0]) + ", not 0");
  for (std::int64_t r = 0; r < m; ++r) {
    const std::int64_t begin = words[static_cast<std::size_t>(r)],
                       end = words[static_cast<std::size_t>(r + 1)];
    if (end < begin || data + end > size)
      fail("row " + std::to_string(r) + " (table word " + std::to_string(r + 1) + ", byte " +
           std::to_string(4 * (r + 1)) + ") ends at entry " + std::to_string(end) +
           ", before its start or past the data");
    for (std::int64_t i = begin; i < end; ++i) {
      const std::uint32_t e = words[static_cast<std::size_t>(data + i)];
      if (static_cast<std::int64_t>(e & 0xffffu) >= k)
        fail("row " + std::to_string(r) + ", entry at byte " + std::to_string(4 * (data + i)) + ": column " +
             std::to_string(e & 0xffffu) + " past A's " + std::to_string(k) + " columns");
      if (fn) fn(r, e & 0xffffu, static_cast<std::uint16_t>(e >> 16));
    }
  }
}

}  // namespace sparsecc::rt
