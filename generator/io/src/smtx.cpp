#include "sparsecc/io/smtx.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <string_view>
#include <vector>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/file.hpp"
#include "sparsecc/io/mtx.hpp"

namespace sparsecc {
namespace {

std::string quote(std::string_view s) {
  std::string out(s.substr(0, 40));
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  return "'" + out + (s.size() > 40 ? "...'" : "'");
}

bool blank(std::string_view line) { return line.find_first_not_of(" \t\r") == std::string_view::npos; }

}  // namespace

CsrMatrix parse_smtx(std::span<const unsigned char> data, const std::string& name, std::uint64_t seed) {
  LineCursor cur(std::string_view(reinterpret_cast<const char*>(data.data()), data.size()));
  std::string_view line;
  auto fail = [&](const std::string& msg) {
    throw_at_line(name, std::max<std::int64_t>(1, cur.line_number()), msg);
  };
  auto integer = [&](std::string_view s, const char* what) {
    std::int64_t v = 0;
    if (!parse_int(s, v)) fail(fmt::format("{} {} is not an integer", what, quote(s)));
    return v;
  };

  if (!cur.next(line)) fail("empty file: expected 'nrows, ncols, nnz' on line 1");
  const auto head = split_fields(line, true);
  if (head.size() != 3)
    fail(fmt::format("line 1 must read 'nrows, ncols, nnz', found {} fields", head.size()));
  const std::int64_t rows = integer(head[0], "row count");
  const std::int64_t cols = integer(head[1], "column count");
  const std::int64_t nnz = integer(head[2], "nonzero count");
  if (rows < 0 || cols < 0 || nnz < 0) fail(fmt::format("negative size {}, {}, {}", rows, cols, nnz));
  for (const std::int64_t d : {rows, cols})
    if (d > kMaxMatrixDimension)
      fail(fmt::format("dimension {} exceeds the supported maximum {}", d, kMaxMatrixDimension));
  if (nnz > rows * cols) fail(fmt::format("{} nonzeros do not fit a {}x{} matrix", nnz, rows, cols));

  // Counts are checked against the tokens actually present before anything is stored, so a header
  // alone cannot make the reader allocate.
  CsrMatrix a;
  a.rows = rows;
  a.cols = cols;
  a.source_dtype = DType::f32;
  if (!cur.next(line)) fail("missing line 2 (row offsets)");
  const auto offs = split_fields(line);
  if (static_cast<std::int64_t>(offs.size()) != rows + 1)
    fail(fmt::format("expected {} row offsets (nrows + 1), found {}", rows + 1, offs.size()));
  a.row_ptr.resize(offs.size());
  for (std::size_t i = 0; i < offs.size(); ++i) {
    const std::int64_t v = integer(offs[i], "row offset");
    if (i == 0 && v != 0) fail(fmt::format("the first row offset must be 0, found {}", v));
    if (i > 0 && v < a.row_ptr[i - 1])
      fail(fmt::format("row offset {} ({}) is less than the one before it ({})", i, v, a.row_ptr[i - 1]));
    if (v > nnz) fail(fmt::format("row offset {} ({}) exceeds nnz {}", i, v, nnz));
    a.row_ptr[i] = v;
  }
  if (a.row_ptr.back() != nnz)
    fail(fmt::format("the last row offset is {}, expected nnz {}", a.row_ptr.back(), nnz));

  std::vector<std::string_view> idx;
  if (cur.next(line)) {
    idx = split_fields(line);
  } else if (nnz > 0) {
    fail("missing line 3 (column indices)");
  }
  if (static_cast<std::int64_t>(idx.size()) != nnz)
    fail(fmt::format("expected {} column indices (nnz), found {}", nnz, idx.size()));
  a.col_idx.resize(idx.size());
  for (std::size_t k = 0; k < idx.size(); ++k) {
    const std::int64_t c = integer(idx[k], "column index");
    if (c < 0 || c >= cols) fail(fmt::format("column index {} out of range 0..{}", c, cols - 1));
    a.col_idx[k] = static_cast<std::int32_t>(c);
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto first = a.col_idx.begin() + a.row_ptr[r], last = a.col_idx.begin() + a.row_ptr[r + 1];
    if (!std::is_sorted(first, last)) std::sort(first, last);
    const auto dup = std::adjacent_find(first, last);
    if (dup != last) fail(fmt::format("row {} lists column {} more than once", r, *dup));
  }
  while (cur.next(line))
    if (!blank(line)) fail("unexpected content after the column indices");
  fill_values_uniform(a, seed);
  return a;
}

CsrMatrix read_smtx(const std::string& path, std::uint64_t seed) {
  const Bytes data = read_input(path);
  return parse_smtx(data, path, seed);
}

std::string format_smtx(const CsrMatrix& a) {
  validate(a);
  fmt::memory_buffer out;
  auto it = std::back_inserter(out);
  fmt::format_to(it, "{}, {}, {}\n", a.rows, a.cols, a.nnz());
  for (std::size_t i = 0; i < a.row_ptr.size(); ++i) fmt::format_to(it, "{}{}", i ? " " : "", a.row_ptr[i]);
  out.push_back('\n');
  for (std::size_t k = 0; k < a.col_idx.size(); ++k) fmt::format_to(it, "{}{}", k ? " " : "", a.col_idx[k]);
  out.push_back('\n');
  return fmt::to_string(out);
}

void write_smtx(const std::string& path, const CsrMatrix& a) { write_file_atomic(path, format_smtx(a)); }

}  // namespace sparsecc
