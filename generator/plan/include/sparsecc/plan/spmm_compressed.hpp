// The compressed family's data: the census of A's 16 x 64 pieces that the planner sizes a plan by, the
// stream the kernel reads (format: sparsecc/runtime/compressed_stream.hpp), and its CPU interpreter.
//
// Record formats are chosen per piece from the piece's own nonzeros: the allowed format of least cost,
// where the cost is the record's bytes plus the body's decode weights (bitmap_weight bytes a present
// 8 x 8 sub-tile, position_weight bytes a nonzero); positions only where no 16 x 16 step holds more
// than 255 nonzeros.
#pragma once

#include <cstdint>
#include <vector>

#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/matrix/dense.hpp"
#include "sparsecc/plan/spmm_plan.hpp"
#include "sparsecc/runtime/compressed_stream.hpp"

namespace sparsecc {

// Every non-empty piece of A, strip after strip, pieces ascending.
struct SpmmPieceCensus {
  std::int64_t strips = 0;                // ceil(M / 16)
  std::int64_t pieces_per_strip = 0;      // ceil(K / 64)
  std::vector<std::int64_t> strip_begin;  // strips + 1 offsets into the vectors below
  std::vector<std::int32_t> piece;        // column / 64
  std::vector<std::int32_t> bytes;        // the record's bytes in its chosen format
  std::vector<std::uint8_t> format;       // SpmmRecordFormat
  std::vector<std::int32_t> nnz;
};
SpmmPieceCensus spmm_piece_census(const CsrMatrix& a, const SpmmCompressedBody& body);

// The bytes of segment (r, c) of the scatter layout for row blocks of `rows` rows split among `warps`
// warp lists and chunks of `chunk_k` columns (4 bytes a nonzero, each list padded to 16, the list
// header where the segment is not empty), row-major.
std::vector<std::int64_t> spmm_scatter_segment_bytes(const CsrMatrix& a, std::int64_t rows,
                                                     std::int64_t chunk_k, std::int64_t warps);

// The stream's shape for `plan` (a compressed plan).
rt::CompressedShape spmm_compressed_shape(const SpmmPlan& plan);
// The bytes of segment (r, c) for every row block r and chunk c of `chunk_k`, row-major, from the
// census.
std::vector<std::int64_t> spmm_segment_bytes(const SpmmPieceCensus& census, std::int64_t strips_per_block,
                                             std::int64_t chunk_k);

// The stream of `plan` for `a`: values rounded to the plan's dtype (spmm_weight). Throws UsageError when
// the plan is not a compressed one for A's shape, or a segment exceeds the plan's stage_bytes.
std::vector<std::uint32_t> spmm_compressed_stream(const SpmmPlan& plan, const CsrMatrix& a);

// C = A*B (+bias) (ReLU) as the kernel computes it from `stream`: B rounded to the dtype; per block and
// split, each record's four 16 x 16 steps multiplied in fp32 (the products of two 16-bit values are
// exact; each step's 16 products are summed exactly and rounded once to fp32 before they join the
// running sum, where tensor cores sum in an unspecified order at fp32 precision or better: GPU and
// interpreter agree to a few fp32 ulps, not bit for bit); splits added in split order; bias, ReLU and
// one rounding to the dtype. Reads the stream as the runtime checks it (rt::walk_compressed_stream).
DenseMatrix interpret_spmm_compressed(const SpmmPlan& plan, const std::vector<std::uint32_t>& stream,
                                      const DenseMatrix& b, const std::vector<double>* bias = nullptr);

}  // namespace sparsecc
