#include "sparsecc/common/file.hpp"

#include <fmt/format.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/output.hpp"

namespace sparsecc {

Bytes read_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw_in_file(path, "is a directory, expected a file");
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw_in_file(path, fmt::format("cannot open: {}", std::strerror(errno)));
  Bytes out;
  unsigned char buf[1 << 16];
  for (;;) {
    const std::size_t n = std::fread(buf, 1, sizeof buf, f);
    out.insert(out.end(), buf, buf + n);
    if (out.size() > kMaxInputBytes) {
      std::fclose(f);
      throw_in_file(path, "file is larger than the 8 GiB input limit");
    }
    if (n < sizeof buf) break;
  }
  const bool err = std::ferror(f);
  std::fclose(f);
  if (err) throw_in_file(path, "read error");
  return out;
}

bool is_gzip(std::span<const unsigned char> d) { return d.size() >= 2 && d[0] == 0x1f && d[1] == 0x8b; }

Bytes gunzip(std::span<const unsigned char> data, const std::string& name) {
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
    out.insert(out.end(), buf, buf + (sizeof buf - zs.avail_out));
    if (out.size() > kMaxInputBytes) {
      inflateEnd(&zs);
      throw_in_file(name, "gzip data decompresses to more than the 8 GiB input limit");
    }
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

Bytes read_input(const std::string& path) {
  Bytes raw = read_file(path);
  if (is_gzip(raw)) return gunzip(raw, path);
  return raw;
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
