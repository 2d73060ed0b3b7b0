#include "sparsecc/common/output.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/file.hpp"

namespace sparsecc {

namespace {

namespace fs = std::filesystem;

std::atomic<std::uint64_t> name_counter{0};

std::string errno_text(int e) { return std::strerror(e); }

std::string label(std::string_view option, const std::string& path) {
  return option.empty() ? path : fmt::format("{} {}", option, path);
}

[[noreturn]] void refuse(std::string_view option, const std::string& path, const std::string& why) {
  throw UsageError(fmt::format("{}: {}", label(option, path), why));
}

bool same_file(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

std::string folder_of(const std::string& path) {
  const fs::path dir = fs::path(path).parent_path();
  return dir.empty() ? std::string(".") : dir.string();
}

// Why no file can be created in `dir` (the create failed with `err`): the folder is missing, a part
// of its path is not a folder, or the folder refuses new files.
std::string folder_problem(const std::string& dir, int err) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) return fmt::format("{} is not a folder", dir);
    return fmt::format("cannot create files in folder {}: {}", dir, errno_text(err));
  }
  // The deepest part of the path that exists tells a missing folder from a file in the way.
  fs::path p = dir;
  while (p.has_parent_path() && p.parent_path() != p) {
    p = p.parent_path();
    if (::stat(p.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) return fmt::format("{} is not a folder", p.string());
      break;
    }
  }
  return fmt::format("folder {} does not exist", dir);
}

// Creates `base.tmp.PID.N` exclusively (never through a link, never over an existing name) and
// returns its descriptor, or -1 with `err` set.
int create_temporary(const std::string& base, std::string& tmp, int& err) {
  for (int attempt = 0; attempt < 1000; ++attempt) {
    tmp = fmt::format("{}.tmp.{}.{}", base, static_cast<long>(::getpid()), name_counter++);
    int fd;
    do fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    while (fd < 0 && errno == EINTR);
    if (fd >= 0) return fd;
    if (errno != EEXIST) {
      err = errno;
      return -1;
    }
  }
  err = EEXIST;
  return -1;
}

// renameat2(RENAME_NOREPLACE), or -1 with errno; EINVAL / ENOSYS where the file system lacks it.
int rename_noreplace(const std::string& from, const std::string& to) {
  return ::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE);
}

void sync_folder(const std::string& path) {
  const int dfd = ::open(folder_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);  // best effort: makes the rename itself durable
    ::close(dfd);
  }
}

// The nesting depth of a JSON text's arrays and objects (outside strings).
std::size_t json_depth(const std::string& text) {
  std::size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

// Reads `folder`'s manifest.json as a compile-model manifest and lists the files it names; returns
// why not, or "".
std::string read_model_manifest(const std::string& folder, std::set<std::string>& files) {
  const std::string manifest = (fs::path(folder) / "manifest.json").string();
  struct stat st {};
  if (::lstat(manifest.c_str(), &st) != 0) return "it has no manifest.json";
  if (!S_ISREG(st.st_mode)) return fmt::format("its manifest.json is {}", file_kind_name(st.st_mode));
  if (static_cast<std::uint64_t>(st.st_size) > kMaxModelManifestBytes)
    return fmt::format("its manifest.json is larger than a model manifest ({} MiB)",
                       kMaxModelManifestBytes >> 20);
  std::ifstream in(manifest, std::ios::binary);
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(text.size())))
    return "its manifest.json cannot be read";
  const std::string not_ours = "its manifest.json is not a sparsecc model manifest";
  constexpr std::size_t kMaxDepth = 16;  // a model manifest nests 4 deep
  if (json_depth(text) > kMaxDepth) return not_ours;
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return not_ours + " (not a JSON object)";
  const auto format = j.find("format");
  const auto version = j.find("version");
  if (format == j.end() || !format->is_string() || format->get<std::string>() != kModelManifestFormat ||
      version == j.end() || !version->is_number_integer() ||
      version->get<std::int64_t>() != kModelManifestVersion)
    return not_ours +
           fmt::format(" (format \"{}\", version {})", kModelManifestFormat, kModelManifestVersion);
  const auto layers = j.find("layers");
  if (layers == j.end() || !layers->is_array()) return not_ours + " (no \"layers\" array)";
  for (const nlohmann::json& l : *layers) {
    const auto file = l.is_object() ? l.find("file") : l.end();
    if (!l.is_object() || file == l.end() || !file->is_string())
      return not_ours + " (a layer without a \"file\")";
    const std::string name = file->get<std::string>();
    if (name.empty() || name == "." || name == ".." || name == "manifest.json" ||
        name.find('/') != std::string::npos || name.find('\0') != std::string::npos)
      return not_ours + fmt::format(" (layer file \"{}\" is not a plain file name)", name);
    files.insert(name);
  }
  return {};
}

std::string model_folder_problem(const std::string& path, std::set<std::string>& files) {
  if (std::string problem = read_model_manifest(path, files); !problem.empty()) return problem;
  std::error_code ec;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name == "manifest.json") continue;
    if (!files.count(name)) return fmt::format("it holds {}, which its manifest.json does not list", name);
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0)
      return fmt::format("{} cannot be examined: {}", name, errno_text(errno));
    if (!S_ISREG(st.st_mode)) return fmt::format("its {} is {}", name, file_kind_name(st.st_mode));
  }
  if (ec) return fmt::format("it cannot be listed: {}", ec.message());
  return {};
}

std::string strip_trailing_slashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

}  // namespace

std::string output_destination(const std::string& path, std::string_view option) {
  if (path.empty()) refuse(option, path, "the output path is empty");
  if (path.back() == '/') refuse(option, path, "names a folder; give a file name");
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return path;  // the folder check names what is missing
    refuse(option, path, fmt::format("cannot be examined: {}", errno_text(errno)));
  }
  if (S_ISREG(st.st_mode)) return path;
  if (S_ISDIR(st.st_mode)) refuse(option, path, "is a folder; give a file name");
  if (!S_ISLNK(st.st_mode))
    refuse(option, path,
           fmt::format("is {}, not a regular file; outputs only ever replace regular files",
                       file_kind_name(st.st_mode)));
  char* resolved = ::realpath(path.c_str(), nullptr);
  if (!resolved)
    refuse(option, path, fmt::format("is a symbolic link that leads nowhere: {}", errno_text(errno)));
  const std::string target = resolved;
  std::free(resolved);
  if (::stat(target.c_str(), &st) != 0)
    refuse(option, path,
           fmt::format("is a symbolic link to {}, which cannot be examined: {}", target, errno_text(errno)));
  if (!S_ISREG(st.st_mode))
    refuse(option, path,
           fmt::format("is a symbolic link to {}, {}; outputs only ever replace regular files", target,
                       file_kind_name(st.st_mode)));
  return target;
}

void check_output_file(const std::string& path, const std::vector<std::string>& inputs,
                       std::string_view option) {
  const std::string destination = output_destination(path, option);
  struct stat out {};
  if (::stat(destination.c_str(), &out) == 0)
    for (const std::string& input : inputs) {
      struct stat in {};
      if (!input.empty() && ::stat(input.c_str(), &in) == 0 && same_file(in, out))
        refuse(option, path,
               fmt::format("is the input {} (the same file); an output never replaces an input", input));
    }
  std::string tmp;
  int err = 0;
  const int fd = create_temporary(destination, tmp, err);
  if (fd < 0) refuse(option, path, folder_problem(folder_of(destination), err));
  ::close(fd);
  ::unlink(tmp.c_str());
}

StagedOutput::StagedOutput(const std::string& path, std::span<const unsigned char> data,
                           std::string_view option)
    : path_(path), option_(option), destination_(output_destination(path, option)) {
  struct stat existing {};
  const bool exists = ::stat(destination_.c_str(), &existing) == 0;
  int err = 0;
  int fd = create_temporary(destination_, temporary_, err);
  if (fd < 0) {
    temporary_.clear();
    refuse(option_, path_, folder_problem(folder_of(destination_), err));
  }
  auto give_up = [&](const char* step, int e) {
    if (fd >= 0) ::close(fd);
    ::unlink(temporary_.c_str());
    temporary_.clear();
    throw std::runtime_error(
        fmt::format("{}: cannot write ({}: {})", label(option_, path_), step, errno_text(e)));
  };
  if (exists) (void)::fchmod(fd, existing.st_mode & 07777);  // best effort; a new file takes the umask's bits
  const unsigned char* p = data.data();
  std::size_t left = data.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) give_up("write", errno);
    if (n == 0) give_up("write", EIO);
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  // Durable before it becomes visible: a crash after the rename must not leave an empty file.
  if (::fsync(fd) != 0) give_up("fsync", errno);
  const int closed = ::close(fd);
  fd = -1;
  if (closed != 0) give_up("close", errno);
}

StagedOutput::~StagedOutput() {
  if (!committed_ && !temporary_.empty()) ::unlink(temporary_.c_str());
}

void StagedOutput::commit() {
  if (committed_) return;
  for (int attempt = 0; attempt < 3; ++attempt) {
    struct stat st {};
    if (::lstat(destination_.c_str(), &st) == 0) {
      if (!S_ISREG(st.st_mode))
        refuse(option_, path_,
               fmt::format("{} is now {}, not a regular file; outputs only ever replace regular files",
                           destination_, file_kind_name(st.st_mode)));
      if (::rename(temporary_.c_str(), destination_.c_str()) != 0)
        throw std::runtime_error(
            fmt::format("{}: cannot rename into place: {}", label(option_, path_), errno_text(errno)));
    } else {
      if (rename_noreplace(temporary_, destination_) != 0) {
        const int e = errno;
        if (e == EEXIST) continue;  // something appeared there: look at it again
        if (e != EINVAL && e != ENOSYS)
          throw std::runtime_error(
              fmt::format("{}: cannot rename into place: {}", label(option_, path_), errno_text(e)));
        if (::rename(temporary_.c_str(), destination_.c_str()) != 0)
          throw std::runtime_error(
              fmt::format("{}: cannot rename into place: {}", label(option_, path_), errno_text(errno)));
      }
    }
    committed_ = true;
    sync_folder(destination_);
    return;
  }
  throw std::runtime_error(
      fmt::format("{}: cannot rename into place: it keeps changing", label(option_, path_)));
}

void commit_outputs(std::span<StagedOutput* const> outputs) {
  // A hard link to each destination that exists keeps what it held until all are in place.
  struct Previous {
    bool existed = false;
    std::string backup;  // empty when no link could be made
  };
  std::vector<Previous> previous(outputs.size());
  auto drop_backups = [&] {
    for (const Previous& p : previous)
      if (!p.backup.empty()) ::unlink(p.backup.c_str());
  };
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const std::string& dest = outputs[i]->destination();
    struct stat st {};
    if (::lstat(dest.c_str(), &st) != 0) continue;
    previous[i].existed = true;
    for (int attempt = 0; attempt < 1000; ++attempt) {
      const std::string name =
          fmt::format("{}.old.{}.{}", dest, static_cast<long>(::getpid()), name_counter++);
      if (::link(dest.c_str(), name.c_str()) == 0) {
        previous[i].backup = name;
        break;
      }
      if (errno != EEXIST) break;
    }
  }
  std::size_t done = 0;
  try {
    for (; done < outputs.size(); ++done) outputs[done]->commit();
  } catch (...) {
    for (std::size_t i = 0; i < done; ++i) {
      const std::string& dest = outputs[i]->destination();
      if (!previous[i].existed) {
        ::unlink(dest.c_str());
      } else if (!previous[i].backup.empty() && ::rename(previous[i].backup.c_str(), dest.c_str()) == 0) {
        previous[i].backup.clear();
      }
    }
    drop_backups();
    throw;
  }
  drop_backups();
}

void write_output_file(const std::string& path, std::span<const unsigned char> data,
                       std::string_view option) {
  StagedOutput staged(path, data, option);
  staged.commit();
}

std::string model_folder_problem(const std::string& path) {
  std::set<std::string> files;
  return model_folder_problem(path, files);
}

OutputFolder check_output_folder(const std::string& given, const std::vector<std::string>& inputs,
                                 std::string_view option) {
  if (given.empty()) refuse(option, given, "the output path is empty");
  const std::string path = strip_trailing_slashes(given);
  OutputFolder state = OutputFolder::absent;
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode)) refuse(option, given, "is a symbolic link; give the output folder itself");
    if (!S_ISDIR(st.st_mode))
      refuse(option, given, fmt::format("exists and is not a folder (it is {})", file_kind_name(st.st_mode)));
    std::error_code ec;
    const bool empty = fs::is_empty(path, ec);
    if (ec) refuse(option, given, fmt::format("cannot be listed: {}", ec.message()));
    if (empty) {
      state = OutputFolder::empty;
    } else {
      std::set<std::string> files;
      const std::string problem = model_folder_problem(path, files);
      if (!problem.empty())
        refuse(
            option, given,
            fmt::format("is a folder that sparsecc compile-model did not write ({}); refusing to replace it",
                        problem));
      files.insert("manifest.json");
      for (const std::string& input : inputs) {
        struct stat in {};
        if (input.empty() || ::stat(input.c_str(), &in) != 0) continue;
        for (const std::string& f : files) {
          struct stat held {};
          if (::stat((fs::path(path) / f).c_str(), &held) == 0 && same_file(in, held))
            refuse(option, given,
                   fmt::format("holds the input {}; an output never replaces an input", input));
        }
      }
      state = OutputFolder::ours;
    }
  } else if (errno != ENOENT && errno != ENOTDIR) {
    refuse(option, given, fmt::format("cannot be examined: {}", errno_text(errno)));
  }
  // A folder can be made beside it (the staging folder, renamed into place at the end).
  std::string probe;
  try {
    probe = make_staging_folder(path);
  } catch (const std::system_error& e) {
    refuse(option, given, folder_problem(folder_of(path), e.code().value()));
  }
  ::rmdir(probe.c_str());
  return state;
}

void remove_model_folder(const std::string& path) {
  std::set<std::string> files;
  if (const std::string problem = model_folder_problem(path, files); !problem.empty())
    throw std::runtime_error(fmt::format("{}: not removed: {}", path, problem));
  for (const std::string& f : files) {
    const std::string p = (fs::path(path) / f).string();
    if (::unlink(p.c_str()) != 0 && errno != ENOENT)
      throw std::runtime_error(fmt::format("{}: cannot remove: {}", p, errno_text(errno)));
  }
  const std::string manifest = (fs::path(path) / "manifest.json").string();
  if (::unlink(manifest.c_str()) != 0)
    throw std::runtime_error(fmt::format("{}: cannot remove: {}", manifest, errno_text(errno)));
  if (::rmdir(path.c_str()) != 0)
    throw std::runtime_error(fmt::format("{}: cannot remove: {}", path, errno_text(errno)));
}

std::string make_staging_folder(const std::string& given) {
  const std::string path = strip_trailing_slashes(given);
  const fs::path p(path);
  const std::string dir = folder_of(path);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const std::string name = (fs::path(dir) / fmt::format(".{}.tmp.{}.{}", p.filename().string(),
                                                          static_cast<long>(::getpid()), name_counter++))
                                 .string();
    if (::mkdir(name.c_str(), 0777) == 0) return name;
    if (errno != EEXIST)
      throw std::system_error(errno, std::generic_category(),
                              fmt::format("{}: cannot create a folder", name));
  }
  throw std::system_error(EEXIST, std::generic_category(),
                          fmt::format("{}: no free staging folder name", path));
}

void rename_without_replacing(const std::string& from, const std::string& to) {
  if (rename_noreplace(from, to) == 0) return;
  int e = errno;
  if (e == EINVAL || e == ENOSYS) {
    struct stat st {};
    if (::lstat(to.c_str(), &st) == 0) {
      e = EEXIST;
    } else if (::rename(from.c_str(), to.c_str()) == 0) {
      return;
    } else {
      e = errno;
    }
  }
  throw std::runtime_error(fmt::format("cannot rename {} to {}: {}", from, to, errno_text(e)));
}

std::string move_aside(const std::string& given) {
  const std::string path = strip_trailing_slashes(given);
  const fs::path p(path);
  const std::string dir = folder_of(path);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const std::string name = (fs::path(dir) / fmt::format(".{}.old.{}.{}", p.filename().string(),
                                                          static_cast<long>(::getpid()), name_counter++))
                                 .string();
    if (rename_noreplace(path, name) == 0) return name;
    if (errno == EEXIST) continue;
    if (errno != EINVAL && errno != ENOSYS)
      throw std::runtime_error(fmt::format("cannot move {} aside: {}", path, errno_text(errno)));
    rename_without_replacing(path, name);  // throws when the name is taken
    return name;
  }
  throw std::runtime_error(fmt::format("cannot move {} aside: no free name", path));
}

}  // namespace sparsecc
