#include "sparsecc/tune/database.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <functional>
#include <limits>
#include <stdexcept>
#include <thread>
#include <utility>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/file.hpp"
#include "sparsecc/common/json_input.hpp"
#include "sparsecc/common/output.hpp"
#include "sparsecc/common/version.hpp"

namespace sparsecc::tune {

namespace {

using json = nlohmann::json;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Text that may come from outside (compiler logs, device names) need not be valid UTF-8; it is
// written with replacement characters rather than failing the whole file.
std::string dump(const json& j, int indent = -1) {
  return j.dump(indent, ' ', false, json::error_handler_t::replace);
}

json number_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

std::string join(const std::string& path, const char* key) {
  return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
}

// Typed access to the fields of one JSON value, failing with the JSON path of the offending field.
struct Reader {
  const std::string& name;

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw InputError(SourceLocation::in_file(name), path.empty() ? what : fmt::format("{}: {}", path, what));
  }
  [[noreturn]] void expected(const std::string& path, const char* what, const json& v) const {
    fail(path, fmt::format("expected {}, found {}", what, v.type_name()));
  }
  void require_object(const json& v, const std::string& path) const {
    if (!v.is_object()) expected(path, "an object", v);
  }
  // The field, or nullptr when absent and optional. `obj` is known to be an object.
  const json* field(const json& obj, const std::string& path, const char* key, bool required) const {
    const auto it = obj.find(key);
    if (it == obj.end()) {
      if (required) fail(join(path, key), "required field is missing");
      return nullptr;
    }
    return &*it;
  }
  std::string string(const json& obj, const std::string& path, const char* key, bool required) const {
    const json* v = field(obj, path, key, required);
    if (!v) return {};
    if (!v->is_string()) expected(join(path, key), "a string", *v);
    return v->get<std::string>();
  }
  // A number, or null for NaN.
  double number(const json& obj, const std::string& path, const char* key, double fallback) const {
    const json* v = field(obj, path, key, false);
    if (!v) return fallback;
    if (v->is_null()) return kNaN;
    if (!v->is_number()) expected(join(path, key), "a number or null", *v);
    return v->get<double>();
  }
  bool boolean(const json& obj, const std::string& path, const char* key) const {
    const json* v = field(obj, path, key, false);
    if (!v) return false;
    if (!v->is_boolean()) expected(join(path, key), "true or false", *v);
    return v->get<bool>();
  }
  json object(const json& obj, const std::string& path, const char* key, bool required) const {
    const json* v = field(obj, path, key, required);
    if (!v) return json::object();
    require_object(*v, join(path, key));
    return *v;
  }
};

TuningKey key_from_json(const Reader& rd, const json& j, const std::string& path) {
  rd.require_object(j, path);
  TuningKey k;
  k.op = rd.string(j, path, "op", true);
  k.fingerprint = rd.string(j, path, "fingerprint", true);
  k.params = rd.object(j, path, "params", true);
  k.gpu = rd.string(j, path, "gpu", true);
  k.compute_capability = rd.string(j, path, "compute_capability", true);
  k.generator_version = rd.string(j, path, "generator_version", true);
  return k;
}

CandidateTiming timing_from_json(const Reader& rd, const json& j, const std::string& path) {
  rd.require_object(j, path);
  CandidateTiming t;
  t.label = rd.string(j, path, "label", true);
  t.options = rd.object(j, path, "options", false);
  t.features = rd.object(j, path, "features", false);
  const std::string fpath = join(path, "features");
  for (auto it = t.features.begin(); it != t.features.end(); ++it)
    if (!it->is_number() && !it->is_null())
      rd.expected(fmt::format("{}.{}", fpath, it.key()), "a number", *it);
  t.median_us = rd.number(j, path, "median_us", kNaN);
  t.rel_error = rd.number(j, path, "rel_error", kNaN);
  t.verified = rd.boolean(j, path, "verified");
  t.compile_seconds = rd.number(j, path, "compile_seconds", 0);
  t.error = rd.string(j, path, "error", false);
  return t;
}

TuningRecord record_from_json(const Reader& rd, const json& j, const std::string& path) {
  rd.require_object(j, path);
  TuningRecord r;
  r.key = key_from_json(rd, *rd.field(j, path, "key", true), join(path, "key"));
  r.winner = rd.string(j, path, "winner", true);
  r.winner_options = rd.object(j, path, "winner_options", false);
  r.winner_us = rd.number(j, path, "winner_us", kNaN);
  r.default_us = rd.number(j, path, "default_us", kNaN);
  r.strategy = rd.string(j, path, "strategy", false);
  r.tuning_seconds = rd.number(j, path, "tuning_seconds", 0);
  r.recorded_at = rd.string(j, path, "recorded_at", false);
  const std::string tpath = join(path, "timings");
  const json& jt = *rd.field(j, path, "timings", true);
  if (!jt.is_array()) rd.expected(tpath, "an array", jt);
  r.timings.reserve(jt.size());
  for (std::size_t i = 0; i < jt.size(); ++i)
    r.timings.push_back(timing_from_json(rd, jt[i], fmt::format("{}[{}]", tpath, i)));
  return r;
}

// ----- files -----------------------------------------------------------------------------------

enum class FileState { missing, ok, corrupt, unreadable, newer };

struct LoadResult {
  FileState state = FileState::missing;
  TuningDatabase db;
  SourceLocation where;  // the problem, for every state but missing and ok
  std::string problem;
  bool exists = false;
  mode_t mode = 0;  // permission bits of the existing file
};

std::string errno_text(int e) { return std::strerror(e); }

// `out` in `state`, with the problem `e` describes.
LoadResult failed(LoadResult out, FileState state, const InputError& e) {
  out.state = state;
  out.where = e.where();
  out.problem = e.message();
  return out;
}

// The state of a database file's `text` (read from `path`): ok with its records, corrupt, or newer.
LoadResult database_from_text(std::string_view text, const std::string& path, LoadResult out = {}) {
  auto fail = [&](FileState state, const InputError& e) { return failed(std::move(out), state, e); };
  json j;
  try {
    check_json_input(text, path, kMaxTuningDatabaseBytes, "tuning database");
    j = json::parse(text.begin(), text.end());
  } catch (const InputError& e) {
    return fail(FileState::corrupt, e);
  } catch (const json::parse_error& e) {
    return fail(
        FileState::corrupt,
        InputError(SourceLocation::at_byte(path, static_cast<std::int64_t>(e.byte > 0 ? e.byte - 1 : 0)),
                   fmt::format("not valid JSON ({})", json_error_message(e.what()))));
  } catch (const json::exception& e) {  // e.g. a number too large for a double: no position given
    return fail(FileState::corrupt,
                InputError(SourceLocation::in_file(path),
                           fmt::format("not valid JSON ({})", json_error_message(e.what()))));
  }
  // A newer schema is told apart from damage: it is valid data this version cannot read.
  if (j.is_object()) {
    const auto s = j.find("schema");
    if (s != j.end() && s->is_number_unsigned() && s->get<std::uint64_t>() > std::uint64_t{kTuningDbSchema}) {
      const auto g = j.find("generator");
      const std::string by = g != j.end() && g->is_string()
                                 ? fmt::format("sparsecc {}", g->get<std::string>())
                                 : std::string("a newer sparsecc");
      return fail(FileState::newer,
                  InputError(SourceLocation::in_file(path),
                             fmt::format("written with schema {} by {}; this version reads schema {}",
                                         s->get<std::uint64_t>(), by, kTuningDbSchema)));
    }
  }
  try {
    out.db = database_from_json(j, path);
  } catch (const InputError& e) {
    return fail(FileState::corrupt, e);
  }
  out.state = FileState::ok;
  return out;
}

LoadResult read_database(const std::string& path) {
  LoadResult out;
  auto fail = [&](FileState state, const InputError& e) { return failed(std::move(out), state, e); };
  int fd;
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below, as a device is).
  do fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    const int e = errno;
    if (e == ENOENT) return out;
    return fail(FileState::unreadable,
                InputError(SourceLocation::in_file(path), fmt::format("cannot open: {}", errno_text(e))));
  }
  std::string text;
  struct stat st {};
  int read_errno = 0;
  if (::fstat(fd, &st) != 0) {
    read_errno = errno;
  } else if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return fail(FileState::unreadable,
                InputError(SourceLocation::in_file(path), "is a directory, expected a file"));
  } else if (!S_ISREG(st.st_mode)) {
    // A device such as /dev/zero or a FIFO would be read until memory runs out.
    ::close(fd);
    const char* kind = file_kind_name(st.st_mode);
    return fail(FileState::unreadable,
                InputError(SourceLocation::in_file(path), fmt::format("is {}, not a regular file", kind)));
  } else {
    out.exists = true;
    out.mode = st.st_mode & 07777;
    // Reading stops past the size limit, so that no file (nor a device behind the path) is held
    // whole when it is over it.
    char buf[1 << 16];
    while (text.size() <= kMaxTuningDatabaseBytes &&
           !(S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_size) > kMaxTuningDatabaseBytes)) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) read_errno = errno;
      if (n <= 0) break;
      text.append(buf, static_cast<std::size_t>(n));
    }
  }
  ::close(fd);
  if (read_errno != 0)
    return fail(FileState::unreadable, InputError(SourceLocation::in_file(path),
                                                  fmt::format("read error: {}", errno_text(read_errno))));
  // A file over the size limit is not known to be damaged, so it is never replaced either.
  if (S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_size) > kMaxTuningDatabaseBytes)
    return fail(FileState::unreadable,
                InputError(SourceLocation::at_byte(path, 0),
                           fmt::format("tuning database is {} bytes, over the {} byte limit",
                                       static_cast<std::uint64_t>(st.st_size), kMaxTuningDatabaseBytes)));
  if (text.size() > kMaxTuningDatabaseBytes)
    return fail(FileState::unreadable, InputError(SourceLocation::at_byte(path, 0),
                                                  fmt::format("tuning database is over the {} byte limit",
                                                              kMaxTuningDatabaseBytes)));

  return database_from_text(text, path, std::move(out));
}

// Holds an exclusive flock() on a lock file for its lifetime; closing the descriptor releases it.
class FileLock {
 public:
  explicit FileLock(const std::string& lock_path) {
    do fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    while (fd_ < 0 && errno == EINTR);
    if (fd_ < 0 && (errno == EACCES || errno == EROFS)) {
      // An existing lock file someone else created is enough to lock on, read-only.
      do fd_ = ::open(lock_path.c_str(), O_RDONLY | O_CLOEXEC);
      while (fd_ < 0 && errno == EINTR);
    }
    if (fd_ < 0)
      throw std::runtime_error(
          fmt::format("{}: cannot open the lock file: {}", lock_path, errno_text(errno)));
    int rc;
    do rc = ::flock(fd_, LOCK_EX);
    while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      const int e = errno;
      ::close(fd_);
      throw std::runtime_error(fmt::format("{}: cannot lock: {}", lock_path, errno_text(e)));
    }
  }
  ~FileLock() { ::close(fd_); }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

// Writes `text` to a fresh temporary next to `path` and renames it over `path` (the rules of
// sparsecc/common/output.hpp: only a regular file is replaced, its permission bits kept, and the
// temporary is created exclusively, so concurrent writers never share one).
void replace_file(const std::string& path, const std::string& text) {
  write_output_file(
      path, std::span<const unsigned char>(reinterpret_cast<const unsigned char*>(text.data()), text.size()),
      "tuning database");
}

}  // namespace

// ----- keys and records ------------------------------------------------------------------------

bool TuningKey::operator==(const TuningKey& o) const {
  return op == o.op && fingerprint == o.fingerprint && gpu == o.gpu &&
         compute_capability == o.compute_capability && generator_version == o.generator_version &&
         params == o.params;
}

std::string key_string(const TuningKey& k) {
  return fmt::format("op={} fingerprint={} params={} gpu={} cc={} generator={}", dump(json(k.op)),
                     dump(json(k.fingerprint)), dump(k.params), dump(json(k.gpu)),
                     dump(json(k.compute_capability)), dump(json(k.generator_version)));
}

const TuningRecord* TuningDatabase::find(const TuningKey& key) const {
  for (const TuningRecord& r : records)
    if (r.key == key) return &r;
  return nullptr;
}

void TuningDatabase::put(TuningRecord r) {
  for (TuningRecord& existing : records)
    if (existing.key == r.key) {
      existing = std::move(r);
      return;
    }
  records.push_back(std::move(r));
}

std::string utc_timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char buf[32];
  const std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return std::string(buf, n);
}

nlohmann::json to_json(const TuningKey& k) {
  return {{"op", k.op},
          {"fingerprint", k.fingerprint},
          {"params", k.params},
          {"gpu", k.gpu},
          {"compute_capability", k.compute_capability},
          {"generator_version", k.generator_version}};
}

nlohmann::json to_json(const CandidateTiming& t) {
  json features = json::object();
  for (auto it = t.features.begin(); it != t.features.end(); ++it)
    features[it.key()] = it->is_number_float() ? number_or_null(it->get<double>()) : *it;
  return {{"label", t.label},
          {"options", t.options},
          {"features", std::move(features)},
          {"median_us", number_or_null(t.median_us)},
          {"rel_error", number_or_null(t.rel_error)},
          {"verified", t.verified},
          {"compile_seconds", number_or_null(t.compile_seconds)},
          {"error", t.error}};
}

nlohmann::json to_json(const TuningRecord& r) {
  json timings = json::array();
  for (const CandidateTiming& t : r.timings) timings.push_back(to_json(t));
  return {{"key", to_json(r.key)},
          {"winner", r.winner},
          {"winner_options", r.winner_options},
          {"winner_us", number_or_null(r.winner_us)},
          {"default_us", number_or_null(r.default_us)},
          {"strategy", r.strategy},
          {"tuning_seconds", number_or_null(r.tuning_seconds)},
          {"recorded_at", r.recorded_at},
          {"timings", std::move(timings)}};
}

nlohmann::json to_json(const TuningDatabase& db) {
  json records = json::array();
  for (const TuningRecord& r : db.records) records.push_back(to_json(r));
  return {{"schema", kTuningDbSchema}, {"generator", kVersion}, {"records", std::move(records)}};
}

TuningDatabase database_from_json(const nlohmann::json& j, const std::string& name) {
  const Reader rd{name};
  if (!j.is_object())
    rd.fail("", fmt::format("expected a JSON object at the top level, found {}", j.type_name()));
  const json& schema = *rd.field(j, "", "schema", true);
  if (!schema.is_number_integer()) rd.expected("schema", "an integer", schema);
  if (schema != kTuningDbSchema)
    rd.fail("schema", fmt::format("unsupported tuning database schema {} (this version reads schema {})",
                                  dump(schema), kTuningDbSchema));
  (void)rd.string(j, "", "generator", false);
  const json& records = *rd.field(j, "", "records", true);
  if (!records.is_array()) rd.expected("records", "an array", records);
  TuningDatabase db;
  db.records.reserve(records.size());
  for (std::size_t i = 0; i < records.size(); ++i)
    db.put(record_from_json(rd, records[i], fmt::format("records[{}]", i)));
  return db;
}

TuningDatabase parse_database(std::string_view text, const std::string& name) {
  if (text.size() > kMaxTuningDatabaseBytes)
    throw InputError(SourceLocation::at_byte(name, 0),
                     fmt::format("tuning database is {} bytes, over the {} byte limit", text.size(),
                                 kMaxTuningDatabaseBytes));
  LoadResult r = database_from_text(text, name);
  if (r.state != FileState::ok) throw InputError(r.where, r.problem);
  return std::move(r.db);
}

TuningDatabase read_database_file(const std::string& path) {
  LoadResult loaded = read_database(path);
  if (loaded.state == FileState::ok) return std::move(loaded.db);
  if (loaded.state == FileState::missing) return {};
  throw InputError(loaded.where, loaded.problem);
}

TuningDatabase load_database(const std::string& path, std::vector<std::string>* warnings) {
  LoadResult loaded = read_database(path);
  if (loaded.state == FileState::ok) return std::move(loaded.db);
  if (loaded.state != FileState::missing && warnings)
    warnings->push_back(
        fmt::format("ignoring tuning database {}", InputError(loaded.where, loaded.problem).what()));
  return {};
}

void update_database(const std::string& path, const std::vector<TuningRecord>& records,
                     std::vector<std::string>* warnings) {
  if (path.empty()) throw UsageError("update_database: empty path");
  (void)output_destination(path, "tuning database");  // a regular file or nothing, before it is read
  const FileLock lock(path + ".lock");
  LoadResult current = read_database(path);
  switch (current.state) {
    case FileState::missing:
    case FileState::ok:
      break;
    case FileState::corrupt:
      // Not a database (perhaps not even one once): the user's file is never replaced.
      throw InputError(current.where, fmt::format("not replacing a file that is not a tuning database: {}",
                                                  current.problem));
    case FileState::unreadable:
      throw InputError(current.where, fmt::format("cannot update the tuning database: {}", current.problem));
    case FileState::newer:
      throw InputError(current.where, fmt::format("not updating the tuning database: {}", current.problem));
  }
  for (const TuningRecord& r : records) current.db.put(r);
  replace_file(path, dump(to_json(current.db), 1) + "\n");
}

}  // namespace sparsecc::tune
