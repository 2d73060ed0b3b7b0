#include "sparsecc/io/mtx.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string_view>
#include <vector>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/file.hpp"

namespace sparsecc {
namespace {

enum class Format { coordinate, array };
enum class Field { real, integer, pattern };
enum class Symmetry { general, symmetric, skew };

struct Entry {
  std::int64_t row;  // 0-based
  std::int64_t col;  // 0-based
  double value;
  std::int64_t line;  // where it came from, for messages about sums of duplicates
};

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return out;
}

// Shortens a token quoted in a message so binary junk cannot produce huge messages.
std::string quote(std::string_view s) {
  std::string out(s.substr(0, 40));
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  return "'" + out + (s.size() > 40 ? "...'" : "'");
}

bool skippable(std::string_view line) {
  const auto p = line.find_first_not_of(" \t\r");
  return p == std::string_view::npos || line[p] == '%';
}

class Parser {
 public:
  Parser(std::span<const unsigned char> data, const std::string& name)
      : name_(name), text_(reinterpret_cast<const char*>(data.data()), data.size()), cur_(text_) {}

  CsrMatrix run() {
    parse_banner();
    parse_size();
    std::string_view line;
    while (cur_.next(line)) {
      if (skippable(line)) continue;
      if (count_ == expected_)
        fail(fmt::format("more entries than the {} declared in the size line", expected_));
      if (format_ == Format::coordinate)
        coordinate_entry(line);
      else
        array_entry(line);
      ++count_;
    }
    if (count_ < expected_)
      throw_at_line(
          name_, std::max<std::int64_t>(1, cur_.line_number()),
          fmt::format("file ends after {} of the {} entries declared in the size line", count_, expected_));
    return build();
  }

 private:
  [[noreturn]] void fail(const std::string& msg) const { throw_at_line(name_, cur_.line_number(), msg); }

  void parse_banner() {
    std::string_view line;
    if (!cur_.next(line)) throw_at_line(name_, 1, "empty file: missing '%%MatrixMarket' header line");
    const auto f = split_fields(line);
    if (f.empty() || lower(f[0]) != "%%matrixmarket") fail("missing '%%MatrixMarket' header line");
    if (f.size() != 5) fail("header must read '%%MatrixMarket matrix <format> <field> <symmetry>'");
    if (lower(f[1]) != "matrix") fail(fmt::format("unsupported object {} (only 'matrix')", quote(f[1])));
    const std::string format = lower(f[2]), field = lower(f[3]), symmetry = lower(f[4]);
    if (format == "coordinate")
      format_ = Format::coordinate;
    else if (format == "array")
      format_ = Format::array;
    else
      fail(fmt::format("unknown format {} (expected coordinate or array)", quote(f[2])));
    if (field == "real")
      field_ = Field::real;
    else if (field == "integer")
      field_ = Field::integer;
    else if (field == "pattern")
      field_ = Field::pattern;
    else if (field == "complex")
      fail("unsupported field 'complex' (real, integer or pattern only)");
    else
      fail(fmt::format("unknown field {} (expected real, integer or pattern)", quote(f[3])));
    if (symmetry == "general")
      symmetry_ = Symmetry::general;
    else if (symmetry == "symmetric")
      symmetry_ = Symmetry::symmetric;
    else if (symmetry == "skew-symmetric")
      symmetry_ = Symmetry::skew;
    else if (symmetry == "hermitian")
      fail("unsupported symmetry 'hermitian' (complex matrices are not supported)");
    else
      fail(fmt::format("unknown symmetry {} (expected general, symmetric or skew-symmetric)", quote(f[4])));
    if (field_ == Field::pattern && format_ == Format::array)
      fail("'pattern' is not valid with 'array' format");
    if (field_ == Field::pattern && symmetry_ == Symmetry::skew)
      fail("'pattern' is not valid with 'skew-symmetric' symmetry");
  }

  std::int64_t size_field(std::string_view s, const char* what) const {
    std::int64_t v = 0;
    if (!parse_int(s, v)) fail(fmt::format("{} {} is not an integer", what, quote(s)));
    if (v < 0) fail(fmt::format("{} {} is negative", what, v));
    return v;
  }

  void parse_size() {
    std::string_view line;
    do {
      if (!cur_.next(line))
        throw_at_line(name_, std::max<std::int64_t>(1, cur_.line_number()),
                      "missing size line after the header");
    } while (skippable(line));
    const auto f = split_fields(line);
    const bool coo = format_ == Format::coordinate;
    if (f.size() != (coo ? 3u : 2u))
      fail(coo ? "size line must read 'rows cols entries'" : "size line must read 'rows cols'");
    rows_ = size_field(f[0], "row count");
    cols_ = size_field(f[1], "column count");
    for (const std::int64_t d : {rows_, cols_})
      if (d > kMaxMatrixDimension)
        fail(fmt::format("dimension {} exceeds the supported maximum {}", d, kMaxMatrixDimension));
    if (symmetry_ != Symmetry::general && rows_ != cols_)
      fail(fmt::format("a symmetric or skew-symmetric matrix must be square, not {}x{}", rows_, cols_));
    // Bytes the shortest entry line takes, counting its newline.
    std::int64_t min_line = 2;
    if (coo) {
      expected_ = size_field(f[2], "entry count");
      min_line = field_ == Field::pattern ? 4 : 6;
    } else if (symmetry_ == Symmetry::general) {
      expected_ = rows_ * cols_;
    } else if (symmetry_ == Symmetry::symmetric) {
      expected_ = rows_ * (rows_ + 1) / 2;
    } else {
      expected_ = rows_ * (rows_ - (rows_ > 0 ? 1 : 0)) / 2;
    }
    const std::int64_t rest =
        static_cast<std::int64_t>(text_.size()) - cur_.line_offset() - static_cast<std::int64_t>(line.size());
    if (expected_ > (rest + 1) / min_line)
      fail(fmt::format("the size line declares {} entries but only {} bytes follow", expected_, rest));
    entries_.reserve(static_cast<std::size_t>(expected_ * (symmetry_ == Symmetry::general ? 1 : 2)));
    if (!coo) next_position_start();
  }

  double value_field(std::string_view s) const {
    if (field_ == Field::integer) {
      std::int64_t v = 0;
      if (!parse_int(s, v)) fail(fmt::format("value {} is not an integer", quote(s)));
      return static_cast<double>(v);
    }
    double v = 0;
    if (!parse_double(s, v)) fail(fmt::format("value {} is not a number", quote(s)));
    if (!std::isfinite(v)) fail(fmt::format("value {} is not finite", quote(s)));
    return v;
  }

  std::int64_t index_field(std::string_view s, const char* what, std::int64_t n) const {
    std::int64_t v = 0;
    if (!parse_int(s, v)) fail(fmt::format("{} index {} is not an integer", what, quote(s)));
    if (v < 1 || v > n) fail(fmt::format("{} index {} out of range 1..{}", what, v, n));
    return v - 1;
  }

  void add(std::int64_t r, std::int64_t c, double v) {
    if (v == 0.0) return;
    entries_.push_back({r, c, v, cur_.line_number()});
    if (r != c && symmetry_ == Symmetry::symmetric) entries_.push_back({c, r, v, cur_.line_number()});
    if (r != c && symmetry_ == Symmetry::skew) entries_.push_back({c, r, -v, cur_.line_number()});
  }

  void coordinate_entry(std::string_view line) {
    const auto f = split_fields(line);
    const bool pattern = field_ == Field::pattern;
    if (f.size() != (pattern ? 2u : 3u))
      fail(fmt::format("expected {} fields, found {}", pattern ? "2 (row col)" : "3 (row col value)",
                       f.size()));
    const std::int64_t r = index_field(f[0], "row", rows_);
    const std::int64_t c = index_field(f[1], "column", cols_);
    const double v = pattern ? 1.0 : value_field(f[2]);
    if (symmetry_ != Symmetry::general && r < c)
      fail(fmt::format("entry ({}, {}) is above the diagonal; a {} file stores only the lower triangle",
                       r + 1, c + 1, symmetry_ == Symmetry::skew ? "skew-symmetric" : "symmetric"));
    if (symmetry_ == Symmetry::skew && r == c && v != 0.0)
      fail(fmt::format("nonzero diagonal entry ({}, {}) in a skew-symmetric matrix", r + 1, c + 1));
    add(r, c, v);
  }

  // First row stored in column col_ of an array file.
  std::int64_t first_row() const {
    if (symmetry_ == Symmetry::general) return 0;
    return symmetry_ == Symmetry::symmetric ? col_ : col_ + 1;
  }
  // Moves (row_, col_) onto a stored position, skipping columns with nothing stored.
  void next_position_start() {
    row_ = first_row();
    while (col_ < cols_ && row_ >= rows_) {
      ++col_;
      row_ = first_row();
    }
  }

  void array_entry(std::string_view line) {
    const auto f = split_fields(line);
    if (f.size() != 1) fail(fmt::format("expected 1 value per line in an array file, found {}", f.size()));
    add(row_, col_, value_field(f[0]));
    ++row_;
    while (col_ < cols_ && row_ >= rows_) {
      ++col_;
      row_ = first_row();
    }
  }

  CsrMatrix build() {
    std::stable_sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) {
      return a.row != b.row ? a.row < b.row : a.col < b.col;
    });
    CsrMatrix a;
    a.rows = rows_;
    a.cols = cols_;
    a.source_dtype = DType::f64;
    a.row_ptr.assign(static_cast<std::size_t>(rows_ + 1), 0);
    for (std::size_t i = 0; i < entries_.size();) {
      const Entry& e = entries_[i];
      double sum = 0.0;
      std::size_t j = i;
      for (; j < entries_.size() && entries_[j].row == e.row && entries_[j].col == e.col; ++j) {
        sum += entries_[j].value;
        if (!std::isfinite(sum))
          throw_at_line(name_, entries_[j].line,
                        fmt::format("sum of duplicate entries at ({}, {}) overflows", e.row + 1, e.col + 1));
      }
      if (sum != 0.0) {
        a.col_idx.push_back(static_cast<std::int32_t>(e.col));
        a.values.push_back(sum);
        ++a.row_ptr[e.row + 1];
      }
      i = j;
    }
    for (std::int64_t r = 0; r < rows_; ++r) a.row_ptr[r + 1] += a.row_ptr[r];
    return a;
  }

  std::string name_;
  std::string_view text_;
  LineCursor cur_;
  Format format_ = Format::coordinate;
  Field field_ = Field::real;
  Symmetry symmetry_ = Symmetry::general;
  std::int64_t rows_ = 0, cols_ = 0, expected_ = 0, count_ = 0;
  std::int64_t row_ = 0, col_ = 0;  // next array position
  std::vector<Entry> entries_;
};

}  // namespace

CsrMatrix parse_mtx(std::span<const unsigned char> data, const std::string& name) {
  return Parser(data, name).run();
}

CsrMatrix read_mtx(const std::string& path) {
  const Bytes data = read_input(path);
  return parse_mtx(data, path);
}

std::string format_mtx(const CsrMatrix& a) {
  validate(a);
  fmt::memory_buffer out;
  fmt::format_to(std::back_inserter(out), "%%MatrixMarket matrix coordinate real general\n{} {} {}\n", a.rows,
                 a.cols, a.nnz());
  for (std::int64_t r = 0; r < a.rows; ++r) {
    for (std::int64_t k = a.row_ptr[r]; k < a.row_ptr[r + 1]; ++k) {
      if (!std::isfinite(a.values[k]))
        throw UsageError(fmt::format("format_mtx: value at ({}, {}) is not finite", r + 1, a.col_idx[k] + 1));
      fmt::format_to(std::back_inserter(out), "{} {} {:.17g}\n", r + 1, a.col_idx[k] + 1, a.values[k]);
    }
  }
  return fmt::to_string(out);
}

void write_mtx(const std::string& path, const CsrMatrix& a) { write_file_atomic(path, format_mtx(a)); }

}  // namespace sparsecc
