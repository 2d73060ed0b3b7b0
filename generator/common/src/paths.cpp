#include "sparsecc/common/paths.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <system_error>
#include <vector>

namespace sparsecc {

namespace fs = std::filesystem;

std::string path_outside_folder(const fs::path& folder, const std::string& entry) {
  if (entry.empty()) return "is empty";
  if (entry.find('\0') != std::string::npos) return "contains a NUL byte";
  const fs::path p(entry);
  if (p.is_absolute() || p.has_root_name() || p.has_root_directory()) return "is an absolute path";
  int depth = 0;
  for (const fs::path& part : p) {
    if (part == "..") {
      if (--depth < 0) return "climbs out of the folder with '..'";
    } else if (!part.empty() && part != ".") {
      ++depth;
    }
  }
  // Symbolic links: the canonical file must be inside the canonical folder.
  std::error_code ec;
  const fs::path dir = fs::weakly_canonical(folder.empty() ? fs::path(".") : folder, ec);
  if (ec) return fmt::format("cannot be resolved: {}", ec.message());
  const fs::path target = fs::weakly_canonical(dir / p, ec);
  if (ec) return fmt::format("cannot be resolved: {}", ec.message());
  const auto parts = [](const fs::path& x) {
    std::vector<fs::path> out;
    for (const fs::path& part : x)
      if (!part.empty() && part != ".") out.push_back(part);
    return out;
  };
  const std::vector<fs::path> d = parts(dir), t = parts(target);
  if (t.size() < d.size() || !std::equal(d.begin(), d.end(), t.begin()))
    return fmt::format("leads outside the folder (to {})", target.string());
  if (t.size() == d.size()) return "names the folder itself, not a file inside it";
  return {};
}

}  // namespace sparsecc
