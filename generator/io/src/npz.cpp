#include "sparsecc/io/npz.hpp"

#include <fmt/format.h>
#include <zip.h>

#include <algorithm>
#include <set>

#include "sparsecc/common/error.hpp"
#include "sparsecc/io/npy.hpp"
#include "sparsecc/io/raw_tensor.hpp"

namespace sparsecc {

namespace {

// Deflate cannot expand data by more than about 1032:1; larger claims are corrupt headers.
constexpr std::uint64_t kMaxDeflateRatio = 1032;

struct Entry {
  zip_uint64_t index;
  std::string name;  // without ".npy"
  std::uint64_t size;
  std::uint64_t comp_size;
  bool stored;
};

// The bytes deflated entries may expand to in total: gunzip_limit of the file's size on disk, less
// what gunzip already expanded the archive itself to (an .npz.gz).
std::uint64_t deflate_budget(std::uint64_t archive_bytes, std::uint64_t file_bytes) {
  const std::uint64_t limit = gunzip_limit(file_bytes);
  if (archive_bytes <= file_bytes) return limit;
  return archive_bytes < limit ? limit - archive_bytes : 0;
}

// A read-only archive opened over a caller-owned buffer, with its entries validated.
class Archive {
 public:
  // `file_bytes`: the size of the file on disk, which bounds what deflated entries may expand to.
  Archive(std::span<const unsigned char> data, const std::string& file, std::uint64_t file_bytes)
      : file_(file), file_bytes_(file_bytes), budget_(deflate_budget(data.size(), file_bytes)) {
    if (data.empty()) throw_in_file(file, "empty file, not a zip archive");
    zip_error_t err;
    zip_error_init(&err);
    zip_source_t* src = zip_source_buffer_create(data.data(), data.size(), 0, &err);
    if (src) za_ = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &err);
    if (!za_) {
      if (src) zip_source_free(src);
      std::string msg = zip_error_strerror(&err);
      if (zip_error_code_zip(&err) == ZIP_ER_EXISTS) msg = "duplicate entry names (" + msg + ")";
      zip_error_fini(&err);
      throw_in_file(file, "not a valid zip archive: " + msg);
    }
    zip_error_fini(&err);
    try {
      index(data.size());
    } catch (...) {
      zip_discard(za_);
      throw;
    }
  }
  ~Archive() { zip_discard(za_); }
  Archive(const Archive&) = delete;
  Archive& operator=(const Archive&) = delete;

  const std::vector<Entry>& entries() const { return entries_; }

  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : entries_) out.push_back(e.name);
    return out;
  }

  const Entry& find(const std::string& name) const {
    for (const auto& e : entries_)
      if (e.name == name) return e;
    throw_at_byte(
        file_, -1,
        fmt::format("not in the archive (available: {})",
                    entries_.empty() ? std::string("none") : fmt::format("{}", fmt::join(names(), ", "))),
        name);
  }

  // Reads and parses one entry.
  Tensor read(const Entry& e, bool keep_unread = false) {
    return decode_raw(read_raw(e, keep_unread), file_, keep_unread);
  }

  // One entry's header checked, its data left as the member's bytes.
  RawTensor read_raw(const Entry& e, bool keep_unread = false) {
    auto bytes = read_bytes(e);
    const std::span<const unsigned char> d(*bytes);
    return parse_npy_raw(std::move(bytes), d, file_, e.name, keep_unread);
  }

  // The bytes of one entry. A deflated entry's declared size is charged to the archive's budget
  // before anything is read, and the buffer grows as data arrives (from at most 4 times the entry's
  // compressed size, which the archive holds), so a header that lies about the size costs no more
  // memory than that; a stored entry's size is its compressed size, checked against the archive, and
  // its buffer is sized once.
  std::shared_ptr<const Bytes> read_bytes(const Entry& e) {
    if (!e.stored) {
      if (e.size > budget_)
        throw_at_byte(file_, -1,
                      fmt::format("deflated entry of {} bytes: the archive {}", e.size,
                                  expansion_limit_message(gunzip_limit(file_bytes_), file_bytes_,
                                                          "save the archive uncompressed (numpy.savez, not "
                                                          "savez_compressed)")),
                      e.name);
      budget_ -= e.size;
    }
    zip_file_t* f = zip_fopen_index(za_, e.index, 0);
    if (!f) throw_at_byte(file_, -1, fmt::format("cannot open entry: {}", zip_strerror(za_)), e.name);
    auto storage = std::make_shared<Bytes>();
    Bytes& buf = *storage;
    const std::uint64_t first =
        e.stored ? e.size
                 : std::min<std::uint64_t>(e.size, std::max<std::uint64_t>(4 * e.comp_size, 1 << 20));
    std::uint64_t got = 0;
    std::string error;
    while (got < e.size) {
      if (got == buf.size())
        buf.resize(static_cast<std::size_t>(
            std::min<std::uint64_t>(e.size, std::max<std::uint64_t>(2 * got, first))));
      const zip_int64_t n = zip_fread(f, buf.data() + got, buf.size() - got);
      if (n < 0) error = zip_file_strerror(f);
      if (n <= 0) break;
      got += static_cast<std::uint64_t>(n);
    }
    unsigned char extra;
    if (error.empty() && got == e.size) {
      // Reading past the end makes libzip verify the CRC.
      const zip_int64_t n = zip_fread(f, &extra, 1);
      if (n < 0)
        error = zip_file_strerror(f);
      else if (n > 0)
        error = fmt::format("entry holds more than the {} bytes its header declares", e.size);
    }
    zip_fclose(f);
    if (!error.empty()) throw_at_byte(file_, -1, "corrupt entry: " + error, e.name);
    if (got < e.size)
      throw_at_byte(file_, -1, fmt::format("entry truncated: {} of {} bytes", got, e.size), e.name);
    return storage;
  }

 private:
  void index(std::size_t archive_size) {
    const zip_int64_t n = zip_get_num_entries(za_, 0);
    std::set<std::string> seen;
    for (zip_int64_t i = 0; i < n; ++i) {
      zip_stat_t st;
      zip_stat_init(&st);
      if (zip_stat_index(za_, static_cast<zip_uint64_t>(i), 0, &st) != 0)
        throw_in_file(file_, fmt::format("entry {}: {}", i, zip_strerror(za_)));
      const std::uint64_t need = ZIP_STAT_NAME | ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_COMP_METHOD |
                                 ZIP_STAT_ENCRYPTION_METHOD;
      if ((st.valid & need) != need)
        throw_in_file(file_, fmt::format("entry {}: incomplete zip metadata", i));
      const std::string full = st.name;
      if (full.size() <= 4 || !full.ends_with(".npy"))
        throw_in_file(file_, fmt::format("entry '{}' is not a .npy file", full));
      const std::string name = full.substr(0, full.size() - 4);
      if (!seen.insert(name).second) throw_at_byte(file_, -1, "duplicate entry in the archive", name);
      if (st.encryption_method != ZIP_EM_NONE) throw_at_byte(file_, -1, "entry is encrypted", name);
      if (st.comp_method != ZIP_CM_STORE && st.comp_method != ZIP_CM_DEFLATE)
        throw_at_byte(
            file_, -1,
            fmt::format("unsupported compression method {} (expected stored or deflated)", st.comp_method),
            name);
      if (st.size > kMaxNpzEntryBytes)
        throw_at_byte(file_, -1,
                      fmt::format("entry of {} bytes exceeds the {} byte limit", st.size, kMaxNpzEntryBytes),
                      name);
      const bool stored = st.comp_method == ZIP_CM_STORE;
      if (st.comp_size > archive_size || (stored && st.size != st.comp_size) ||
          (!stored && st.size / kMaxDeflateRatio > st.comp_size + 1))
        throw_at_byte(file_, -1,
                      fmt::format("inconsistent sizes: {} bytes from {} compressed in a {} byte archive",
                                  st.size, st.comp_size, archive_size),
                      name);
      entries_.push_back({static_cast<zip_uint64_t>(i), name, st.size, st.comp_size, stored});
    }
  }

  std::string file_;
  std::uint64_t file_bytes_;
  std::uint64_t budget_;  // what deflated entries may still expand to
  zip_t* za_ = nullptr;
  std::vector<Entry> entries_;
};

[[noreturn]] void zip_write_failed(const std::string& what, zip_error_t* err) {
  throw std::runtime_error(fmt::format("npz writer: {}: {}", what, zip_error_strerror(err)));
}

}  // namespace

std::vector<std::string> list_npz(std::span<const unsigned char> data, const std::string& file) {
  return Archive(data, file, data.size()).names();
}

std::vector<std::string> list_npz(const std::string& path) { return list_npz(read_input(path), path); }

Tensor parse_npz_tensor(std::span<const unsigned char> data, const std::string& file,
                        const std::string& name) {
  Archive a(data, file, data.size());
  return a.read(a.find(name));
}

Tensor read_npz_tensor(const std::string& path, const std::string& name) {
  std::uint64_t file_bytes = 0;
  const Bytes data = read_input(path, file_bytes);
  Archive a(data, path, file_bytes);
  return a.read(a.find(name));
}

namespace {

std::vector<Tensor> read_all(Archive& a, bool keep_unread) {
  std::vector<Tensor> out;
  for (const auto& e : a.entries()) out.push_back(a.read(e, keep_unread));
  return out;
}

}  // namespace

std::vector<Tensor> parse_npz(std::span<const unsigned char> data, const std::string& file,
                              bool keep_unread) {
  Archive a(data, file, data.size());
  return read_all(a, keep_unread);
}

std::vector<Tensor> read_npz(const std::string& path, bool keep_unread) {
  std::uint64_t file_bytes = 0;
  const Bytes data = read_input(path, file_bytes);
  Archive a(data, path, file_bytes);
  return read_all(a, keep_unread);
}

void visit_npz_raw(const std::string& path, bool keep_unread, const std::function<void(RawTensor&&)>& visit) {
  std::uint64_t file_bytes = 0;
  const Bytes data = read_input(path, file_bytes);
  Archive a(data, path, file_bytes);
  for (const auto& e : a.entries()) visit(a.read_raw(e, keep_unread));
}

RawTensor read_npz_raw_tensor(const std::string& path, const std::string& name) {
  std::uint64_t file_bytes = 0;
  const Bytes data = read_input(path, file_bytes);
  Archive a(data, path, file_bytes);
  return a.read_raw(a.find(name));
}

Bytes format_npz(const std::vector<Tensor>& tensors, bool compress) {
  std::set<std::string> names;
  for (const auto& t : tensors) {
    if (t.name.empty()) throw UsageError("npz writer: a tensor has an empty name");
    if (!names.insert(t.name).second)
      throw UsageError(fmt::format("npz writer: duplicate tensor '{}'", t.name));
  }
  if (tensors.empty()) {
    // libzip writes nothing for an empty archive; NumPy writes a bare end-of-central-directory record.
    Bytes eocd(22, 0);
    eocd[0] = 'P', eocd[1] = 'K', eocd[2] = 5, eocd[3] = 6;
    return eocd;
  }
  std::vector<Bytes> payloads;
  payloads.reserve(tensors.size());
  for (const auto& t : tensors) payloads.push_back(format_npy(t));

  zip_error_t err;
  zip_error_init(&err);
  zip_source_t* src = zip_source_buffer_create(nullptr, 0, 0, &err);
  if (!src) zip_write_failed("cannot create a memory buffer", &err);
  zip_source_keep(src);  // survives zip_close so the result can be read back
  zip_t* za = zip_open_from_source(src, ZIP_TRUNCATE, &err);
  if (!za) {
    zip_source_free(src);
    zip_source_free(src);
    zip_write_failed("cannot start the archive", &err);
  }
  auto fail = [&](const std::string& what) {
    std::string msg = fmt::format("npz writer: {}: {}", what, zip_strerror(za));
    zip_discard(za);
    zip_source_free(src);
    throw std::runtime_error(msg);
  };
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    zip_source_t* s = zip_source_buffer(za, payloads[i].data(), payloads[i].size(), 0);
    if (!s) fail("cannot wrap tensor data");
    const zip_int64_t idx = zip_file_add(za, (tensors[i].name + ".npy").c_str(), s, ZIP_FL_ENC_UTF_8);
    if (idx < 0) {
      zip_source_free(s);
      fail(fmt::format("cannot add '{}'", tensors[i].name));
    }
    const auto at = static_cast<zip_uint64_t>(idx);
    if (zip_set_file_compression(za, at, compress ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0) != 0 ||
        zip_file_set_mtime(za, at, 946684800, 0) != 0)  // fixed time stamp: reproducible archives
      fail(fmt::format("cannot set up '{}'", tensors[i].name));
  }
  if (zip_close(za) != 0) fail("cannot finish the archive");

  Bytes out;
  zip_stat_t st;
  zip_stat_init(&st);
  bool ok = zip_source_stat(src, &st) == 0 && zip_source_open(src) == 0;
  if (ok) {
    out.resize(st.size);
    ok = zip_source_read(src, out.data(), out.size()) == static_cast<zip_int64_t>(out.size());
    zip_source_close(src);
  }
  if (!ok) {
    std::string msg = fmt::format("npz writer: cannot read the archive back: {}",
                                  zip_error_strerror(zip_source_error(src)));
    zip_source_free(src);
    throw std::runtime_error(msg);
  }
  zip_source_free(src);
  return out;
}

void write_npz(const std::string& path, const std::vector<Tensor>& tensors, bool compress) {
  write_file_atomic(path, format_npz(tensors, compress));
}

}  // namespace sparsecc
