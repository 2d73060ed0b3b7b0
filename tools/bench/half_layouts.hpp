// Host side of the half-precision vendor baselines (CUDA-free, unit-tested): fp16/bf16 bit
// conversions, the seeded random B the baselines and the sparsecc executor share, A's values rounded
// to the precision, and the CSR -> Blocked-ELL conversion cuSPARSE's Blocked-ELL SpMM reads.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "sparsecc/common/dtype.hpp"
#include "sparsecc/matrix/csr.hpp"

namespace sparsecc::bench {

enum class HalfPrecision { f16, bf16 };

std::string_view half_precision_name(HalfPrecision p);  // "fp16", "bf16" (the baseline name suffix)

// The one-argument fp16 conversions of sparsecc/common/dtype.hpp stay visible next to the overloads
// below in this namespace.
using ::sparsecc::double_to_half_bits;
using ::sparsecc::half_bits_to_double;

// Exact value of fp16 / bf16 bits (NaN and +-inf included).
double half_bits_to_double(std::uint16_t bits, HalfPrecision p);
// Round to nearest even, directly from the double (no double rounding through float); subnormals
// are kept, overflow gives +-inf, NaN stays NaN.
std::uint16_t double_to_half_bits(double v, HalfPrecision p);
// v rounded to the precision, as a double.
double round_to_half(double v, HalfPrecision p);

// A rows x cols row-major matrix of bits: SplitMix64(seed).uniform_pm1() in row-major order (the
// same values, before rounding, as the fp32 baselines' B for that seed), each rounded to p.
std::vector<std::uint16_t> random_half_matrix(std::int64_t rows, std::int64_t cols, HalfPrecision p,
                                              std::uint64_t seed);

// A copy of `a` with every value rounded to p (entries that round to zero are kept, so the pattern
// is unchanged).
CsrMatrix round_values(const CsrMatrix& a, HalfPrecision p);

// cuSPARSE's Blocked-ELL layout of a matrix padded with zero rows and columns up to a multiple of
// `block`: every block row holds ell_cols / block blocks of block x block values.
// - col_ind: (rows / block) x (ell_cols / block), row-major; entry (br, j) is the block column of the
//   j-th stored block of block row br, ascending within a block row, -1 for padding blocks (which
//   trail the real ones).
// - values: rows x ell_cols, row-major; the value at (r, bc * block + c) of the matrix, where block
//   column bc is the j-th stored block of block row r / block, is at values[r * ell_cols + j * block
//   + c]. Padding blocks and the zeros inside stored blocks are 0.
// ell_cols is block times the most non-empty blocks in any block row (0 for a matrix without nonzeros).
struct BlockedEll {
  std::int64_t rows = 0, cols = 0;  // padded: multiples of block
  int block = 0;
  std::int64_t ell_cols = 0;  // columns of the value array, a multiple of block
  std::vector<std::int32_t> col_ind;
  std::vector<double> values;

  std::int64_t block_rows() const { return block > 0 ? rows / block : 0; }
  std::int64_t ell_width() const { return block > 0 ? ell_cols / block : 0; }  // blocks per block row
  std::int64_t stored() const { return rows * ell_cols; }                      // values, padding included
};

// Throws UsageError when block < 1 or an index of the result would not fit in int32; validates `a`.
BlockedEll blocked_ell_from_csr(const CsrMatrix& a, int block);

}  // namespace sparsecc::bench
