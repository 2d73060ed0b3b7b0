// fp16/bf16 conversions, the shared random B and the CSR -> Blocked-ELL conversion (CPU only).
#include "bench/half_layouts.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/random.hpp"
#include "sparsecc/reference/spmm.hpp"

namespace sparsecc::bench {

std::string_view half_precision_name(HalfPrecision p) { return p == HalfPrecision::f16 ? "fp16" : "bf16"; }

double half_bits_to_double(std::uint16_t bits, HalfPrecision p) {
  return p == HalfPrecision::f16 ? ::sparsecc::half_bits_to_double(bits) : bf16_bits_to_double(bits);
}

std::uint16_t double_to_half_bits(double v, HalfPrecision p) {
  return p == HalfPrecision::f16 ? ::sparsecc::double_to_half_bits(v) : double_to_bf16_bits(v);
}

double round_to_half(double v, HalfPrecision p) {
  return round_to(p == HalfPrecision::f16 ? DType::f16 : DType::bf16, v);
}

std::vector<std::uint16_t> random_half_matrix(std::int64_t rows, std::int64_t cols, HalfPrecision p,
                                              std::uint64_t seed) {
  if (rows < 0 || cols < 0 || (cols > 0 && rows > std::numeric_limits<std::int64_t>::max() / cols))
    throw UsageError(fmt::format("random_half_matrix: bad shape {} x {}", rows, cols));
  std::vector<std::uint16_t> bits(static_cast<std::size_t>(rows * cols));
  SplitMix64 rng(seed);
  for (std::uint16_t& b : bits) b = double_to_half_bits(rng.uniform_pm1(), p);
  return bits;
}

CsrMatrix round_values(const CsrMatrix& a, HalfPrecision p) {
  CsrMatrix r = ::sparsecc::round_values(a, p == HalfPrecision::f16 ? "f16" : "bf16");
  r.source_dtype = p == HalfPrecision::f16 ? DType::f16 : DType::bf16;
  return r;
}

BlockedEll blocked_ell_from_csr(const CsrMatrix& a, int block) {
  if (block < 1) throw UsageError(fmt::format("Blocked-ELL block size must be at least 1 (got {})", block));
  validate(a);
  const std::int64_t b = block;
  const std::int64_t block_rows = (a.rows + b - 1) / b, block_cols = (a.cols + b - 1) / b;
  if (block_cols > std::numeric_limits<std::int32_t>::max())
    throw UsageError(fmt::format("Blocked-ELL: {} block columns do not fit int32 indices", block_cols));

  // The non-empty block columns of every block row, ascending.
  std::vector<std::vector<std::int32_t>> used(static_cast<std::size_t>(block_rows));
  std::int64_t width = 0;  // blocks per block row
  for (std::int64_t br = 0; br < block_rows; ++br) {
    std::vector<std::int32_t>& u = used[static_cast<std::size_t>(br)];
    const std::int64_t end_row = std::min(a.rows, (br + 1) * b);
    for (std::int64_t r = br * b; r < end_row; ++r)
      for (std::int64_t i = a.row_ptr[r]; i < a.row_ptr[r + 1]; ++i)
        u.push_back(static_cast<std::int32_t>(a.col_idx[i] / b));
    std::sort(u.begin(), u.end());
    u.erase(std::unique(u.begin(), u.end()), u.end());
    width = std::max(width, static_cast<std::int64_t>(u.size()));
  }

  BlockedEll e;
  e.rows = block_rows * b;
  e.cols = block_cols * b;
  e.block = block;
  e.ell_cols = width * b;
  e.col_ind.assign(static_cast<std::size_t>(block_rows * width), -1);
  e.values.assign(static_cast<std::size_t>(e.rows * e.ell_cols), 0.0);
  for (std::int64_t br = 0; br < block_rows; ++br) {
    const std::vector<std::int32_t>& u = used[static_cast<std::size_t>(br)];
    std::copy(u.begin(), u.end(), e.col_ind.begin() + br * width);
    const std::int64_t end_row = std::min(a.rows, (br + 1) * b);
    for (std::int64_t r = br * b; r < end_row; ++r) {
      for (std::int64_t i = a.row_ptr[r]; i < a.row_ptr[r + 1]; ++i) {
        const std::int32_t bc = static_cast<std::int32_t>(a.col_idx[i] / b);
        const std::int64_t j = std::lower_bound(u.begin(), u.end(), bc) - u.begin();
        e.values[static_cast<std::size_t>(r * e.ell_cols + j * b + a.col_idx[i] % b)] = a.values[i];
      }
    }
  }
  return e;
}

}  // namespace sparsecc::bench
