#include "sparsecc/emit/template.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <set>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/file.hpp"

namespace sparsecc {

namespace {
bool valid_name(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}
}  // namespace

KernelTemplate::KernelTemplate(std::string name, std::string text) : name_(std::move(name)) {
  std::size_t pos = 0;
  std::string literal;
  while (pos < text.size()) {
    const std::size_t open = text.find("/*@", pos);
    if (open == std::string::npos) {
      literal += text.substr(pos);
      break;
    }
    literal += text.substr(pos, open - pos);
    const std::size_t close = text.find("*/", open + 3);
    if (close == std::string::npos)
      throw UsageError(fmt::format("{}: unterminated insertion marker at byte {}", name_, open));
    std::string tag = text.substr(open + 3, close - open - 3);
    std::size_t after = close + 2;
    if (tag == "end")
      throw UsageError(fmt::format("{}: /*@end*/ without an opening marker at byte {}", name_, open));
    if (!tag.empty() && tag.back() == '@') {
      tag.pop_back();  // lone marker /*@NAME@*/
    } else {
      // Block marker: skip the default text up to /*@end*/.
      const std::size_t end = text.find("/*@end*/", after);
      if (end == std::string::npos)
        throw UsageError(fmt::format("{}: insertion point '{}' has no /*@end*/", name_, tag));
      if (text.find("/*@", after) < end)
        throw UsageError(fmt::format("{}: insertion point '{}' contains another marker", name_, tag));
      after = end + 8;
    }
    if (!valid_name(tag))
      throw UsageError(fmt::format("{}: bad insertion point name '{}' at byte {}", name_, tag, open));
    pieces_.push_back({false, std::move(literal)});
    literal.clear();
    pieces_.push_back({true, tag});
    pos = after;
  }
  pieces_.push_back({false, std::move(literal)});
}

KernelTemplate KernelTemplate::load(const std::string& file, const std::string& dir) {
  const std::string path = (dir.empty() ? template_dir() : dir) + "/" + file;
  Bytes b = read_file(path);
  return KernelTemplate(file, std::string(b.begin(), b.end()));
}

std::vector<std::string> KernelTemplate::points() const {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& p : pieces_)
    if (p.is_point && seen.insert(p.text).second) out.push_back(p.text);
  return out;
}

std::string KernelTemplate::render(const std::map<std::string, std::string>& values) const {
  const auto pts = points();
  const std::set<std::string> known(pts.begin(), pts.end());
  for (const auto& [k, v] : values)
    if (!known.count(k)) throw UsageError(fmt::format("{}: no insertion point named '{}'", name_, k));
  std::string out;
  for (const auto& p : pieces_) {
    if (!p.is_point) {
      out += p.text;
      continue;
    }
    auto it = values.find(p.text);
    if (it == values.end())
      throw UsageError(fmt::format("{}: insertion point '{}' left unfilled", name_, p.text));
    out += it->second;
  }
  return out;
}

std::string template_dir() {
  if (const char* env = std::getenv("SPARSECC_TEMPLATE_DIR"); env && *env) return env;
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path installed =
        self.parent_path().parent_path() / "share" / "sparsecc" / "templates";
    if (std::filesystem::is_directory(installed, ec)) return installed.string();
  }
  return SPARSECC_TEMPLATE_DIR;
}

}  // namespace sparsecc
