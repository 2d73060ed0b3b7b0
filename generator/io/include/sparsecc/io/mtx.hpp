// Matrix Market (.mtx) reader and writer.
//
// Reads `%%MatrixMarket matrix coordinate|array real|integer|pattern general|symmetric|skew-symmetric`
// (keywords case-insensitive; `%` comment lines and blank lines allowed) into a full CsrMatrix:
// - symmetric and skew-symmetric files are expanded (skew: the mirrored entry is negated); coordinate
//   files of either kind must list only the lower triangle, and a skew file must not have a nonzero
//   diagonal entry;
// - array files are column-major; symmetric array files store the lower triangle column by column
//   (skew-symmetric ones the part strictly below the diagonal);
// - duplicate coordinate entries are summed; zeros (explicit, or duplicates that cancel) are left out
//   of the CSR;
// - pattern entries become 1.0; integer entries are parsed as int64 and converted to double;
//   NaN/Inf values are rejected;
// - complex and hermitian files are rejected as unsupported.
// The result has source_dtype f64. Errors are InputError naming the file and the line.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "sparsecc/matrix/csr.hpp"

namespace sparsecc {

// Largest row or column count the text matrix readers (mtx, smtx) accept: 2^24 (16,777,216). Bounds the
// memory a header alone can make a reader (or a later stage that allocates per row or column) use.
inline constexpr std::int64_t kMaxMatrixDimension = std::int64_t{1} << 24;

CsrMatrix parse_mtx(std::span<const unsigned char> data, const std::string& name);
CsrMatrix read_mtx(const std::string& path);  // gzip-compressed files are read transparently

// `coordinate real general`, one entry per line with 1-based indices and `%.17g` values (exact).
std::string format_mtx(const CsrMatrix& a);
void write_mtx(const std::string& path, const CsrMatrix& a);  // atomic; gzip when path ends in .gz

}  // namespace sparsecc
