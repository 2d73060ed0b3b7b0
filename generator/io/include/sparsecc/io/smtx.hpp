// DLMC .smtx reader and writer (Deep Learning Matrix Collection, Gale et al. 2020).
//
// Text, usually gzip-compressed: line 1 `nrows, ncols, nnz` (comma and/or space separated), line 2
// the nrows + 1 row offsets, line 3 the nnz 0-based column indices. The files hold no values: the
// reader fills them from the caller's seed with fill_values_uniform (source_dtype f32). Offsets
// must start at 0, never decrease and end at nnz; column indices must lie in 0..ncols-1 and be
// distinct within a row. A row whose indices are out of order is sorted (none of the published DLMC
// files needs it). Trailing whitespace and blank lines are accepted; any other extra content is an
// error. Errors are InputError naming the file and the line.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "sparsecc/matrix/csr.hpp"

namespace sparsecc {

CsrMatrix parse_smtx(std::span<const unsigned char> data, const std::string& name, std::uint64_t seed);
CsrMatrix read_smtx(const std::string& path, std::uint64_t seed);  // gzip read transparently

// The pattern of `a` in .smtx form (values are not stored).
std::string format_smtx(const CsrMatrix& a);
void write_smtx(const std::string& path, const CsrMatrix& a);  // atomic; gzip when path ends in .gz

}  // namespace sparsecc
