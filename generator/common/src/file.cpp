#include "sparsecc/common/file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/output.hpp"

namespace sparsecc {

namespace {

std::string limit_text(std::uint64_t bytes) {
  if (bytes % (std::uint64_t{1} << 30) == 0) return fmt::format("{} GiB", bytes >> 30);
  if (bytes % (std::uint64_t{1} << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  return fmt::format("{} bytes", bytes);
}

}  // namespace

const char* file_kind_name(unsigned mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

void advise_huge_pages(void* data, std::size_t bytes) {
#ifdef MADV_HUGEPAGE
  constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t first = (begin + kHuge - 1) & ~(kHuge - 1), last = (begin + bytes) & ~(kHuge - 1);
  if (bytes < 2 * kHuge || last <= first) return;
  ::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);  // advice: failure is harmless
#else
  (void)data, (void)bytes;
#endif
}

Bytes read_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below like any other
  // non-regular file (devices such as /dev/zero would otherwise be read until memory runs out).
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) throw_in_file(path, "is a directory, expected a file");
    throw_in_file(path, fmt::format("cannot open: {}", std::strerror(e)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw_in_file(path, fmt::format("cannot stat: {}", std::strerror(e)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    if (S_ISDIR(st.st_mode)) throw_in_file(path, "is a directory, expected a file");
    throw_in_file(path, fmt::format("is {}, not a regular file", file_kind_name(st.st_mode)));
  }
  const auto declared = static_cast<std::uint64_t>(st.st_size);
  if (declared > kMaxInputBytes) {
    ::close(fd);
    throw_in_file(path, fmt::format("file of {} bytes is larger than the {} input limit", declared,
                                    limit_text(kMaxInputBytes)));
  }
  // Sized from the file's real size; a file that grows while it is read is followed up to the limit.
  Bytes out;
  resize_huge(out, static_cast<std::size_t>(declared));
  std::size_t got = 0;
  for (;;) {
    if (got == out.size()) {
      // Full: a one-byte probe tells the end of the file (the usual case: nothing is allocated or
      // copied) from a file that grew.
      unsigned char probe;
      const ssize_t n = ::read(fd, &probe, 1);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        const int e = errno;
        ::close(fd);
        throw_in_file(path, fmt::format("read error: {}", std::strerror(e)));
      }
      if (n == 0) break;
      if (out.size() >= kMaxInputBytes) {
        ::close(fd);
        throw_in_file(path,
                      fmt::format("file is larger than the {} input limit", limit_text(kMaxInputBytes)));
      }
      out.resize(std::min<std::size_t>(kMaxInputBytes, std::max<std::size_t>(out.size() * 2, 1 << 16)));
      out[got++] = probe;
      continue;
    }
    const ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      throw_in_file(path, fmt::format("read error: {}", std::strerror(e)));
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  out.resize(got);
  return out;
}

std::uint64_t gunzip_limit(std::uint64_t compressed_bytes) {
  std::uint64_t limit = kMinExpansionLimitBytes;
  if (compressed_bytes > limit / kMaxExpansionRatio) limit = compressed_bytes * kMaxExpansionRatio;
  if (compressed_bytes > kMaxInputBytes / kMaxExpansionRatio) limit = kMaxInputBytes;
  return std::min(limit, kMaxInputBytes);
}

std::string expansion_limit_message(std::uint64_t limit, std::uint64_t compressed_bytes, const char* how) {
  return fmt::format(
      "decompresses to more than {} bytes, the limit for {} compressed bytes ({} x, at least {}, at most "
      "{}); "
      "{} to lift it",
      limit, compressed_bytes, kMaxExpansionRatio, limit_text(kMinExpansionLimitBytes),
      limit_text(kMaxInputBytes), how);
}

bool is_gzip(std::span<const unsigned char> d) { return d.size() >= 2 && d[0] == 0x1f && d[1] == 0x8b; }

Bytes gunzip(std::span<const unsigned char> data, const std::string& name, std::uint64_t limit) {
  if (limit == 0) limit = gunzip_limit(data.size());
  Bytes out;
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 32) != Z_OK) throw_in_file(name, "zlib initialisation failed");
  zs.next_in = const_cast<Bytef*>(data.data());
  unsigned char buf[1 << 16];
  std::size_t consumed = 0;
  const std::size_t total = data.size();
  for (;;) {
    // Feed at most 1 GiB at a time (avail_in is 32-bit).
    if (zs.avail_in == 0 && consumed < total) {
      const std::size_t chunk = std::min<std::size_t>(total - consumed, std::size_t{1} << 30);
      zs.next_in = const_cast<Bytef*>(data.data() + consumed);
      zs.avail_in = static_cast<uInt>(chunk);
      consumed += chunk;
    }
    zs.next_out = buf;
    zs.avail_out = sizeof buf;
    const int rc = inflate(&zs, Z_NO_FLUSH);
    const std::size_t produced = sizeof buf - zs.avail_out;
    if (out.size() + produced > limit) {
      inflateEnd(&zs);
      throw_in_file(name, "gzip data " + expansion_limit_message(limit, data.size(),
                                                                 "decompress the file first (gunzip)"));
    }
    out.insert(out.end(), buf, buf + produced);
    const std::int64_t at = static_cast<std::int64_t>(consumed - zs.avail_in);
    if (rc == Z_STREAM_END) {
      // Another member may follow (concatenated gzip); trailing zero padding is tolerated.
      const std::size_t rest = total - static_cast<std::size_t>(at);
      if (rest == 0) break;
      const unsigned char* p = data.data() + at;
      if (rest >= 2 && p[0] == 0x1f && p[1] == 0x8b) {
        inflateReset(&zs);
        continue;
      }
      bool zeros = true;
      for (std::size_t i = 0; i < rest; ++i) zeros = zeros && p[i] == 0;
      if (zeros) break;
      inflateEnd(&zs);
      throw_at_byte(name, at, "unexpected data after the end of the gzip stream");
    }
    if (rc == Z_BUF_ERROR && zs.avail_in == 0 && consumed == total) {
      inflateEnd(&zs);
      throw_at_byte(name, at, "gzip data is truncated");
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      std::string msg = zs.msg ? zs.msg : "corrupt data";
      inflateEnd(&zs);
      throw_at_byte(name, at, fmt::format("gzip: {}", msg));
    }
  }
  inflateEnd(&zs);
  return out;
}

Bytes read_input(const std::string& path, std::uint64_t& file_bytes) {
  Bytes raw = read_file(path);
  file_bytes = raw.size();
  if (!is_gzip(raw)) return raw;
  return gunzip(raw, path, gunzip_limit(raw.size()));
}

Bytes read_input(const std::string& path) {
  std::uint64_t file_bytes = 0;
  return read_input(path, file_bytes);
}

Bytes gzip(std::span<const unsigned char> data) {
  z_stream zs{};
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("zlib deflateInit2 failed");
  Bytes out(deflateBound(&zs, static_cast<uLong>(data.size())) + 64);
  zs.next_in = const_cast<Bytef*>(data.data());
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&zs, Z_FINISH);
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) throw std::runtime_error("zlib deflate failed");
  out.resize(zs.total_out);
  return out;
}

void write_file_atomic(const std::string& path, std::span<const unsigned char> data) {
  Bytes compressed;
  if (path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0) {
    compressed = gzip(data);
    data = compressed;
  }
  write_output_file(path, data);
}

void write_file_atomic(const std::string& path, std::string_view text) {
  write_file_atomic(
      path, std::span<const unsigned char>(reinterpret_cast<const unsigned char*>(text.data()), text.size()));
}

bool LineCursor::next(std::string_view& line) {
  if (pos_ >= text_.size()) return false;
  line_start_ = static_cast<std::int64_t>(pos_);
  std::size_t end = text_.find('\n', pos_);
  std::size_t next = end == std::string_view::npos ? text_.size() : end + 1;
  if (end == std::string_view::npos) end = text_.size();
  std::size_t stop = end;
  if (stop > pos_ && text_[stop - 1] == '\r') --stop;
  line = text_.substr(pos_, stop - pos_);
  pos_ = next;
  ++line_;
  return true;
}

std::vector<std::string_view> split_fields(std::string_view line, bool commas_separate) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  auto sep = [&](char c) { return c == ' ' || c == '\t' || c == '\r' || (commas_separate && c == ','); };
  while (i < line.size()) {
    while (i < line.size() && sep(line[i])) ++i;
    std::size_t j = i;
    while (j < line.size() && !sep(line[j])) ++j;
    if (j > i) out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

bool parse_int(std::string_view s, std::int64_t& out) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

bool parse_double(std::string_view s, double& out) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  if (r.ec == std::errc::result_out_of_range) return false;
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

}  // namespace sparsecc
