#include "sparsecc/compile/resource_usage.hpp"

#include <algorithm>
#include <cstring>
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

// .nv.info is a list of attributes: a format byte, an attribute byte, then for format 4 (EIFMT_SVAL)
// a 16-bit size and that many bytes, for format 3 (EIFMT_HVAL) 2 bytes, for 2 (EIFMT_BVAL) 1, for 1
// (EIFMT_NVAL) none. EIATTR_REGCOUNT (0x2f) and EIATTR_FRAME_SIZE (0x11) carry a function's symbol
// index and a 32-bit value.
ResourceUsage read_cubin_resource_usage(std::span<const unsigned char> cubin) {
  constexpr unsigned char kSval = 4, kHval = 3, kBval = 2, kNval = 1;
  constexpr unsigned char kRegCount = 0x2f, kFrameSize = 0x11;
  ResourceUsage u;
  const auto sections = elf_sections(cubin);
  const auto info = sections.find(".nv.info");
  if (info == sections.end()) return u;
  const std::vector<unsigned char>& b = info->second;
  bool regs = false;
  for (std::size_t at = 0; at + 2 <= b.size();) {
    const unsigned char format = b[at], attribute = b[at + 1];
    at += 2;
    std::size_t size = 0;
    if (format == kSval) {
      if (at + 2 > b.size()) return {};
      size = static_cast<std::size_t>(b[at] | (b[at + 1] << 8));
      at += 2;
    } else if (format == kHval) {
      size = 2;
    } else if (format == kBval) {
      size = 1;
    } else if (format != kNval) {
      return {};  // not an attribute list this reader knows
    }
    if (size > b.size() - at) return {};
    if (format == kSval && size == 8 && (attribute == kRegCount || attribute == kFrameSize)) {
      std::uint32_t value = 0;
      std::memcpy(&value, b.data() + at + 4, 4);
      if (attribute == kRegCount) {
        regs = true;
        u.registers = std::max(u.registers, static_cast<std::int32_t>(value));
      } else {
        u.stack_frame_bytes = std::max<std::int64_t>(u.stack_frame_bytes, value);
      }
    }
    at += size;
  }
  if (!regs) return {};
  u.found = u.from_cubin = true;
  u.spill_store_bytes = u.spill_load_bytes = u.stack_frame_bytes == 0 ? 0 : -1;
  return u;
}

ResourceUsage resource_usage(const CudaCompileResult& compiled) {
  const ResourceUsage logged = parse_ptxas_log(compiled.log);
  return logged.found ? logged : read_cubin_resource_usage(compiled.cubin);
}

}  // namespace sparsecc
