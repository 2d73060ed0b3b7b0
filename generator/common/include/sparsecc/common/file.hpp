// Whole-file input with transparent gzip, atomic output, and a line cursor for text formats.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sparsecc {

using Bytes = std::vector<unsigned char>;

// Upper bound on what one input may decompress to; larger inputs are rejected as bad input
// rather than exhausting memory.
inline constexpr std::uint64_t kMaxInputBytes = std::uint64_t{8} << 30;

// Reads the whole file. Throws InputError naming the file when it cannot be opened or read.
Bytes read_file(const std::string& path);

// True when the buffer starts with the gzip magic bytes.
bool is_gzip(std::span<const unsigned char> data);

// Decompresses a gzip stream (several concatenated members allowed). Throws InputError naming
// `name` and the compressed byte offset on corrupt or truncated data.
Bytes gunzip(std::span<const unsigned char> data, const std::string& name);

// Reads a file and decompresses it when it is gzip-compressed (by content, not by extension).
Bytes read_input(const std::string& path);

// Compresses with gzip (used by tests and writers that emit .gz).
Bytes gzip(std::span<const unsigned char> data);

// Writes to a fresh temporary beside `path` and renames it over `path`, so a failure never leaves a
// partial file and never destroys what was there; replaces only a regular file (the rules of
// output.hpp, write_output_file). Compresses with gzip when `path` ends in ".gz".
void write_file_atomic(const std::string& path, std::span<const unsigned char> data);
void write_file_atomic(const std::string& path, std::string_view text);

// Iterates the lines of a text buffer, tracking 1-based line numbers. Accepts \n and \r\n.
class LineCursor {
 public:
  explicit LineCursor(std::string_view text) : text_(text) {}
  // Next line without its terminator; false at end of input.
  bool next(std::string_view& line);
  // Number of the line most recently returned by next() (1-based; 0 before the first).
  std::int64_t line_number() const { return line_; }
  // Byte offset of the start of the line most recently returned.
  std::int64_t line_offset() const { return line_start_; }

 private:
  std::string_view text_;
  std::size_t pos_ = 0;
  std::int64_t line_ = 0;
  std::int64_t line_start_ = 0;
};

// Splits on spaces, tabs and (optionally) commas; empty fields are dropped.
std::vector<std::string_view> split_fields(std::string_view line, bool commas_separate = false);

// Strict number parsing of a whole field (no trailing characters). Return false on failure or
// overflow.
bool parse_int(std::string_view s, std::int64_t& out);
bool parse_double(std::string_view s, double& out);  // accepts inf/nan spellings; callers decide

}  // namespace sparsecc
