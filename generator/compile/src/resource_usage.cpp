#include "sparsecc/compile/resource_usage.hpp"

#include <algorithm>
#include <regex>

namespace sparsecc {

namespace {

// Calls fn(match) for every match of `re` in `text`.
template <typename Fn>
void each_match(const std::string& text, const std::regex& re, Fn&& fn) {
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
    fn(*it);
}

std::int64_t num(const std::ssub_match& m) { return std::stoll(m.str()); }

}  // namespace

ResourceUsage parse_ptxas_log(const std::string& log) {
  static const std::regex frame(
      R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex used(R"(Used (\d+) registers)");
  static const std::regex smem(R"((\d+) bytes smem)");
  ResourceUsage u;
  each_match(log, frame, [&](const std::smatch& m) {
    u.found = true;
    u.stack_frame_bytes = std::max(u.stack_frame_bytes, num(m[1]));
    u.spill_store_bytes = std::max(u.spill_store_bytes, num(m[2]));
    u.spill_load_bytes = std::max(u.spill_load_bytes, num(m[3]));
  });
  each_match(log, used, [&](const std::smatch& m) {
    u.found = true;
    u.registers = std::max(u.registers, static_cast<std::int32_t>(num(m[1])));
  });
  each_match(log, smem, [&](const std::smatch& m) { u.shared_bytes = std::max(u.shared_bytes, num(m[1])); });
  return u;
}

}  // namespace sparsecc
