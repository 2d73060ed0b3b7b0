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

// Compressed input may expand to at most kMaxExpansionRatio times its compressed size, but always to
// kMinExpansionLimitBytes and never past kMaxInputBytes: a small file cannot claim unbounded memory.
// An uncompressed file is bounded only by its real size (and kMaxInputBytes).
inline constexpr std::uint64_t kMaxExpansionRatio = 16;
inline constexpr std::uint64_t kMinExpansionLimitBytes = std::uint64_t{64} << 20;

// The most `compressed_bytes` of compressed input may decompress to (see kMaxExpansionRatio).
std::uint64_t gunzip_limit(std::uint64_t compressed_bytes);

// "decompresses to more than L bytes, the limit for C compressed bytes (...); <how> to lift it": the
// message for input past gunzip_limit, `how` telling the user how to store the data uncompressed.
std::string expansion_limit_message(std::uint64_t limit, std::uint64_t compressed_bytes, const char* how);

// What a file of type `mode` (st_mode) is, for messages that refuse it: "a directory", "a character
// device", "a block device", "a FIFO (named pipe)", "a socket", "a symbolic link", else "not a regular
// file".
const char* file_kind_name(unsigned mode);

// Reads the whole of a regular file, sized from its real size. Throws InputError naming the file
// when it cannot be opened or read, is not a regular file (a directory, a device such as /dev/zero, a
// FIFO, a socket), or is larger than kMaxInputBytes.
Bytes read_file(const std::string& path);

// Asks the kernel to back [data, data + bytes) with huge pages where it can (transparent huge pages in
// madvise mode), before the memory is first touched: a buffer of hundreds of megabytes then costs a few
// hundred page faults instead of a few hundred thousand. Only whole 2 MiB pages inside the range are
// advised; small ranges and failures are ignored.
void advise_huge_pages(void* data, std::size_t bytes);

// v resized to n value-initialised elements, its new storage advised for huge pages first.
template <typename T>
void resize_huge(std::vector<T>& v, std::size_t n) {
  if (n > v.capacity()) {
    v.reserve(n);
    advise_huge_pages(v.data() + v.size(), (n - v.size()) * sizeof(T));
  }
  v.resize(n);
}

// True when the buffer starts with the gzip magic bytes.
bool is_gzip(std::span<const unsigned char> data);

// Decompresses a gzip stream (several concatenated members allowed). Throws InputError naming
// `name` and the compressed byte offset on corrupt or truncated data, and naming the limit when the
// output would exceed `limit` bytes (0: gunzip_limit(data.size())); nothing past the limit is kept.
Bytes gunzip(std::span<const unsigned char> data, const std::string& name, std::uint64_t limit = 0);

// Reads a file and decompresses it when it is gzip-compressed (by content, not by extension), within
// gunzip_limit of the file's size.
Bytes read_input(const std::string& path);
// The same, also giving the file's size on disk (what limits on further expansion are based on).
Bytes read_input(const std::string& path, std::uint64_t& file_bytes);

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
