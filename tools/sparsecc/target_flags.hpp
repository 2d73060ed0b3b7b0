// The GPU target of a command (--arch): a row of the target table (`sparsecc targets` lists them),
// or "native", the live device's own figures. The device's attributes come from the runtime
// (rt::DeviceInfo); their conversion to the generator's GpuDeviceFacts lives here, since the runtime
// does not include generator headers.
#pragma once

#include <string>

#include "sparsecc/runtime/device.hpp"
#include "sparsecc/target/target.hpp"
#include "spmm_flags.hpp"  // flags::kNativeArch

namespace sparsecc::cli {

// What the driver reports of a device, as the target stage takes it. The clock is left out (0): the
// table's is the sustained clock under load the predictor's times assume, not the peak the driver
// reports.
GpuDeviceFacts device_facts(const rt::DeviceInfo& d);

// The target of device `ordinal`: gpu_target_from_device over its facts (arch empty: the device's).
// Throws UsageError when there is no driver or no such device.
GpuTarget device_target(int ordinal = 0, const std::string& arch = {});

// --arch's word (flags::add_arch_flag): native (the device's target) or an architecture of the
// table (gpu_target); UsageError naming the known ones otherwise.
GpuTarget resolve_gpu_target(const std::string& arch);

}  // namespace sparsecc::cli
