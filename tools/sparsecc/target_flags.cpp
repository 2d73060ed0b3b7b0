#include "target_flags.hpp"

#include <fmt/format.h>

#include "sparsecc/common/error.hpp"
#include "sparsecc/runtime/driver.hpp"

namespace sparsecc::cli {

GpuDeviceFacts device_facts(const rt::DeviceInfo& d) {
  GpuDeviceFacts f;
  f.name = d.name;
  f.cc_major = d.cc_major;
  f.cc_minor = d.cc_minor;
  f.sm_count = d.multiprocessors;
  f.max_threads_per_block = d.max_threads_per_block;
  f.max_threads_per_sm = d.max_threads_per_sm;
  f.max_blocks_per_sm = d.max_blocks_per_sm;
  f.registers_per_sm = d.registers_per_sm;
  f.registers_per_block = d.registers_per_block;
  f.shared_per_sm = d.shared_per_sm;
  f.shared_per_block = d.shared_per_block;
  f.shared_per_block_optin = d.max_shared_per_block_optin;
  f.shared_reserved_per_block = d.reserved_shared_per_block;
  f.max_grid_x = d.max_grid[0];
  f.max_grid_y = d.max_grid[1];
  f.max_grid_z = d.max_grid[2];
  f.l2_bytes = static_cast<std::int64_t>(d.l2_bytes);
  return f;
}

GpuTarget device_target(int ordinal, const std::string& arch) {
  rt::DeviceInfo info;
  try {
    info = rt::device_info(ordinal);
  } catch (const std::exception& e) {
    throw UsageError(
        fmt::format("--arch {}: no GPU to take the target from ({})", flags::kNativeArch, e.what()));
  }
  return gpu_target_from_device(device_facts(info), arch);
}

GpuTarget resolve_gpu_target(const std::string& arch) {
  return arch == flags::kNativeArch ? device_target() : gpu_target(arch);
}

}  // namespace sparsecc::cli
