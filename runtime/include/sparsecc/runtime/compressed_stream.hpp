// The compressed stream: how a compressed SpMM executor (half precision on tensor cores) holds its
// sparse A, in the bundle's fragments section. The generator writes it (sparsecc/plan/spmm_compressed.hpp),
// the kernel decodes it on chip into mma.sync operands, and the runtime walks it when it loads a bundle
// (validate_bundle), so that a stream whose offsets point outside itself is refused before any launch.
// Plain C++ (the CUDA-free format library, sparsecc_bundle_format).
//
// A is cut into row blocks of `strips` strips of 16 rows, and K into chunks of chunk_k columns; a
// strip's part of a chunk is a list of records, one per non-empty 16 x 64 piece (kRecordCols columns).
// Every integer is little-endian. In 32-bit words:
//
//   [0, S)      split table: row_blocks x (splits + 1) chunk indices; split s of row block r takes the
//               chunks [t[r (splits + 1) + s], t[r (splits + 1) + s + 1]) (non-decreasing, 0 .. chunks)
//   [S, S + T)  segment table: row_blocks x chunks + 1 offsets from the data start, in 16-byte units,
//               non-decreasing; segment (r, c) is [o[r chunks + c], o[r chunks + c + 1])
//   [D, end)    data, D = S + T rounded up to a multiple of 4 words
//
// A segment (the records of one row block in one chunk) is empty, or a header of `strips` u32 (the end
// of each strip's records, in bytes from the segment's start; padded with zeros to 16 bytes) followed
// by the strips' records, strip 0 first; strip i's records fill [end[i - 1] (the header's size for
// i = 0), end[i]). A block stages a segment in shared memory, so no segment exceeds stage_bytes.
//
// A record is 8-byte aligned: byte 0 its format, byte 1 its piece kt (columns chunk * chunk_k +
// 64 kt .. + 64, kt < chunk_k / 64), bytes 2-3 u16 nvals (the nonzeros it holds), then by format:
//   bitmap (0)     bytes 4-5 u16 `present` (bit j: sub-tile j is not empty), bytes 6-7 zero; then one
//                  u64 a present sub-tile (bit 8 r + c: element (r, c) of the 8 x 8 sub-tile), then the
//                  nvals values, sub-tile after sub-tile, each sub-tile's in bit order.
//   positions (1)  bytes 4-7: u8 count of nonzeros in each 16 x 16 step q = 0..3; then nvals values,
//                  then nvals u8 places, step after step: a nonzero's place in the step's mma operands,
//                  8 L + 2 f + h for half h of register f of lane L (the dense layout below, so that
//                  the kernel scatters without arithmetic).
//   dense (2)      bytes 4-7 zero; then 4 steps x 32 lanes x 8 values: lane L's operand a0..a7 of
//                  mma.sync m16n8k16 (row-major A) for that step.
// Sub-tile j = 4 q + f of a piece: step q (columns 16 q .. + 16), and f the A-operand register it feeds:
// rows 8 (f & 1) .. + 8, columns 16 q + 8 (f >> 1) .. + 8. A record ends at its last byte rounded up to 8.
//
// The scatter layout (shape.scatter): a segment is instead lists of u32 entries, value << 16 | place,
// each in any order and padded to 16 bytes with entries of place rows x chunk_k (the block's pad slot,
// value 0): place is the nonzero's slot in the block's dense operand tile, strip after strip, each
// strip's chunk_k / 16 steps in order, each step 32 lanes x 8 values in mma order (place = ((strip *
// steps + q) * 32 + L) * 8 + 2 f + h, as in a dense record); rows x chunk_k is at most kScatterSlots.
// With shape.warp_lists = W (the block's warps), a non-empty segment starts with W u32 list ends
// (16-byte units from the segment's start, non-decreasing, the last the segment's end; padded to 16
// bytes), and list w (from the header's end or end[w - 1] to end[w]) holds the nonzeros of warp w's
// strips (strips w * strips / W .. + strips / W) only: each warp scatters its own list into its part of
// the tile, reads it back and zeroes the places it wrote. With warp_lists = 0 (bundles written before
// the lists) a segment is one list that the whole block scatters.
// The vector layout (shape.vector; a fixed N of 1..kVectorMaxN, A's K at most kVectorMaxK): no split or
// segment tables. Words [0, M] are the row table (row r's entries are [t[r], t[r + 1]) of the data,
// non-decreasing from t[0] = 0), the data starts at word vector_data_word(M) (M + 1 rounded up to 4) and
// holds u32 entries value << 16 | column, row after row, columns ascending within a row; the data is padded
// with zero words to a multiple of 4, so that a warp reads any row in aligned 16-byte pieces (the entries of
// the pieces outside the row are skipped, not multiplied).
// In every layout, values are 16-bit (the executor's dtype).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

namespace sparsecc::rt {

inline constexpr int kRecordRows = 16;
inline constexpr int kRecordCols = 64;
inline constexpr int kRecordSteps = 4;            // 16-column steps of a record (mma k16)
inline constexpr int kRecordSubtiles = 16;        // 8 x 8 sub-tiles of a record
inline constexpr int kPortableClusterSplits = 8;  // the portable thread-block cluster size
// The largest cluster sm_90 launches: past the portable size a kernel is launched with the
// non-portable opt-in (CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED).
inline constexpr int kMaxClusterSplits = 16;

inline constexpr std::int64_t kScatterSlots = 32768;  // a scatter block's tile (rows x chunk_k), at most
inline constexpr std::int64_t kVectorMaxK = 65536;    // a vector entry's column is 16 bits
inline constexpr std::int64_t kVectorMaxN = 16;       // a vector kernel's lane holds N sums

enum class RecordFormat : std::uint8_t { bitmap = 0, positions = 1, dense = 2 };

// The shape a stream is read with (the plan's; a bundle states it in plan_summary).
struct CompressedShape {
  std::int64_t row_blocks = 0, chunks = 0, splits = 1, strips = 1, chunk_k = kRecordCols;
  std::int64_t stage_bytes = 0;  // the largest segment
  bool scatter = false;          // segments are entry lists (the scatter layout)
  std::int64_t warp_lists = 0;   // scatter: lists a segment (one a warp), 0: one list for the block
  bool vector = false;           // a row table and rows of entries (the vector layout)
  std::int64_t rows() const { return 16 * strips; }
  std::int64_t split_words() const { return row_blocks * (splits + 1); }
  std::int64_t segment_table_words() const { return row_blocks * chunks + 1; }
  std::int64_t data_word() const { return (split_words() + segment_table_words() + 3) / 4 * 4; }
  std::int64_t header_bytes() const { return (4 * strips + 15) / 16 * 16; }
  std::int64_t list_header_bytes() const { return (4 * warp_lists + 15) / 16 * 16; }
};

// The bytes of a record at `p` (its header read), from its start to the next record.
std::int64_t record_bytes(const unsigned char* p);

// One record as the kernel sees it: its piece of A (16 x 64 values, row-major, 16-bit; zeros where A
// has none).
using RecordTile = std::array<std::uint16_t, kRecordRows * kRecordCols>;
void decode_record(const unsigned char* p, RecordTile& out);

struct RecordRef {
  std::int64_t row_block = 0, chunk = 0, strip = 0;
  std::int64_t kt = 0;    // the piece in the chunk
  std::int64_t byte = 0;  // of the record, from the stream's start
  const unsigned char* p = nullptr;
  std::int64_t at = 0;  // offset in its segment
};

// Checks the whole stream against `shape` and calls `fn` for every record, in stream order. Throws
// std::invalid_argument naming `name`, the table or segment and the byte at the first fault: a table
// out of order or past the data, a segment larger than stage_bytes or with a bad header, a record
// past its strip's end, of an unknown format, with a piece kt past the chunk or past A's `k` columns,
// or whose counts disagree with its bitmaps / positions.
void walk_compressed_stream(std::span<const std::uint32_t> words, const CompressedShape& shape,
                            std::int64_t k, const std::string& name,
                            const std::function<void(const RecordRef&)>& fn = {});

// The first data word of a vector stream of `m` rows.
inline std::int64_t vector_data_word(std::int64_t m) { return (m + 1 + 3) / 4 * 4; }

// Checks a vector stream (shape.vector) of A's `m` x `k`: its row table (t[0] = 0, non-decreasing, the
// last inside the data), its data (a multiple of 4 words) and every entry's column (inside k); calls
// `fn(row, column, value)` for every entry, in stream order. Throws std::invalid_argument naming
// `name`, the row or the byte of the first fault.
void walk_vector_stream(std::span<const std::uint32_t> words, std::int64_t m, std::int64_t k,
                        const std::string& name,
                        const std::function<void(std::int64_t, std::int64_t, std::uint16_t)>& fn = {});

// One entry of a scatter stream: its row and column in A, and its 16-bit value.
struct ScatterEntry {
  std::int64_t row_block = 0, chunk = 0;
  std::int64_t row = 0, col = 0;  // in A
  std::uint16_t value = 0;
};

// Checks a scatter stream (shape.scatter) as walk_compressed_stream checks a record stream: the tables,
// then every segment (a multiple of 16 bytes, at most stage_bytes; with warp lists, its list ends in
// order and inside it) and every entry (its place inside the tile or the pad slot, inside its warp's
// strips where the segment has warp lists, its column inside A's `k`, its row inside A's `m`); calls
// `fn` for every entry but the padding, in stream order.
void walk_scatter_stream(std::span<const std::uint32_t> words, const CompressedShape& shape, std::int64_t m,
                         std::int64_t k, const std::string& name,
                         const std::function<void(const ScatterEntry&)>& fn = {});

}  // namespace sparsecc::rt
