#include "sparsecc/compile/resource_usage.hpp"

#include <algorithm>
#include <regex>
#include <sstream>

namespace sparsecc {

namespace {

std::int64_t num(const std::ssub_match& m) { return std::stoll(m.str()); }

}  // namespace

// Two formats, line by line:
//  - ptxas -v (from NVRTC's --ptxas-options=-v or nvJitLink's -Xptxas=-v):
//      ptxas info    : Function properties for k
//      ptxas         .     8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
//      ptxas info    : Used 40 registers, used 1 barriers, 256 bytes smem, 388 bytes cmem[0]
//  - nvJitLink -verbose's summary of the linked cubin:
//      info    : used 40 registers, used 1 barriers, 8 stack, 1280 bytes smem, 536 bytes cmem[0], 0 bytes
//      lmem
//    whose smem includes the 1 KiB the system reserves per block on sm_80+, so only its registers
//    and stack are taken.
ResourceUsage parse_ptxas_log(const std::string& log) {
  static const std::regex frame(
      R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex used(R"(\bUsed (\d+) registers)");
  static const std::regex smem(R"((\d+) bytes smem)");
  static const std::regex linked(R"(\bused (\d+) registers,.*\b(\d+) stack\b)");
  ResourceUsage u;
  std::istringstream lines(log);
  std::smatch m;
  for (std::string line; std::getline(lines, line);) {
    if (std::regex_search(line, m, frame)) {
      u.found = true;
      u.stack_frame_bytes = std::max(u.stack_frame_bytes, num(m[1]));
      u.spill_store_bytes = std::max(u.spill_store_bytes, num(m[2]));
      u.spill_load_bytes = std::max(u.spill_load_bytes, num(m[3]));
    } else if (std::regex_search(line, m, used)) {
      u.found = true;
      u.registers = std::max(u.registers, static_cast<std::int32_t>(num(m[1])));
      if (std::regex_search(line, m, smem)) u.shared_bytes = std::max(u.shared_bytes, num(m[1]));
    } else if (std::regex_search(line, m, linked)) {
      u.found = true;
      u.registers = std::max(u.registers, static_cast<std::int32_t>(num(m[1])));
      u.stack_frame_bytes = std::max(u.stack_frame_bytes, num(m[2]));
    }
  }
  return u;
}

}  // namespace sparsecc
