// What the stages know of the machine a kernel is for: a target description, plain data that
// planners, emitters, the tuner and the predictor read instead of constants of one GPU.
//
// A GPU target comes from one table keyed by --arch (gpu_target), each row the figures of a
// reference part of that architecture, or from the live device (gpu_target_from_device, which the
// tools fill from the CUDA driver: the generator does not link it). A CPU target (ISA, vector width,
// cores, caches) sits beside it for the CPU backend. Sources of the table: docs/design/targets.md.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sparsecc/common/math.hpp"  // ceil_div, for the figures derived from the table

namespace sparsecc {

struct GpuTarget {
  std::string arch = "sm_90";     // the cubin's architecture: sm_80, sm_90, sm_90a, ...
  std::string name = "H100 SXM";  // the part the figures are of
  std::string source = "table";   // "table" (gpu_target) or "device" (gpu_target_from_device)
  std::int32_t cc_major = 9, cc_minor = 0;
  std::string ptx_isa = "7.8";  // the PTX ISA version emitted PTX declares

  // Execution resources.
  std::int32_t sm_count = 132;
  std::int32_t max_threads_per_block = 1024;
  std::int32_t max_threads_per_sm = 2048;
  std::int32_t max_blocks_per_sm = 32;
  std::int32_t registers_per_sm = 65536;
  std::int32_t registers_per_block = 65536;
  std::int32_t max_registers_per_thread = 255;
  std::int32_t register_allocation_unit = 256;       // registers, allocated per warp in these units
  std::int64_t shared_per_sm = 228 * 1024;           // bytes an SM holds for its blocks
  std::int64_t shared_per_block = 48 * 1024;         // dynamic shared memory a block has without opting in
  std::int64_t shared_per_block_optin = 227 * 1024;  // the most a block may opt in to
  std::int64_t shared_reserved_per_block = 1024;     // the system's share of each resident block
  std::int64_t max_grid_x = 2147483647, max_grid_y = 65535, max_grid_z = 65535;
  std::int64_t l2_bytes = 50 * 1024 * 1024;

  // Nominal speeds, for the predictor's estimates (not limits).
  double clock_mhz = 1755;           // sustained SM clock under load
  double dram_bytes_per_us = 3.0e6;  // HBM / GDDR bandwidth
  double l2_bytes_per_us = 5.5e6;    // L2 to the SMs, reads

  // Features.
  bool programmatic_launch = true;  // griddepcontrol (programmatic dependent launch): sm_90 on
  bool wgmma = false;               // warpgroup MMA: sm_90a
  bool cp_async = true;             // cp.async: sm_80 on
  bool mma_f16 = true;              // mma.sync m16n8k16 f16 / bf16 with fp32 accumulation: sm_80 on
  bool clusters = true;             // thread-block clusters with distributed shared memory: sm_90 on

  std::int32_t compute_capability() const { return cc_major * 10 + cc_minor; }
};

// The running GPU's own figures, as the CUDA driver reports them (cuDeviceGetAttribute), for
// gpu_target_from_device.
struct GpuDeviceFacts {
  std::string name;
  std::int32_t cc_major = 0, cc_minor = 0;
  std::int32_t sm_count = 0;
  std::int32_t max_threads_per_block = 0, max_threads_per_sm = 0, max_blocks_per_sm = 0;
  std::int32_t registers_per_sm = 0, registers_per_block = 0;
  std::int64_t shared_per_sm = 0, shared_per_block = 0, shared_per_block_optin = 0,
               shared_reserved_per_block = 0;
  std::int64_t max_grid_x = 0, max_grid_y = 0, max_grid_z = 0;
  std::int64_t l2_bytes = 0;
  double clock_mhz = 0;  // 0: keep the table's
};

struct CpuTarget {
  std::string isa = "x86-64-avx2";  // x86-64-avx512, x86-64-avx2, or native
  std::string cpu = "haswell";      // the code generator's CPU name ("native": the host's, at compile)
  std::int32_t vector_bits = 256;   // the widest vector the code uses
  std::int32_t vector_registers = 16;
  std::int32_t cores = 1;
  std::int64_t l1d_bytes = 32 * 1024, l2_bytes = 1024 * 1024, l3_bytes = 32 * 1024 * 1024;
  std::int32_t lanes_f32() const { return vector_bits / 32; }
};

enum class TargetKind { gpu, cpu };

// What a compile is for: a GPU or a CPU, with its description.
struct Target {
  TargetKind kind = TargetKind::gpu;
  GpuTarget gpu;
  CpuTarget cpu;
};

// The table's row for `arch` ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_120").
// Throws UsageError naming the known architectures for another word.
GpuTarget gpu_target(const std::string& arch);
// The architectures of the table, in order.
const std::vector<std::string>& known_gpu_archs();
// The default target: gpu_target("sm_90").
const GpuTarget& default_gpu_target();
// The table's row for the device's architecture (sm_XY from its compute capability; the nearest row
// below for an architecture the table lacks), with every figure the device reports replacing the
// table's. `arch` names the cubin's architecture when the caller compiles for another one (sm_90a on
// a 9.0 device): empty takes the device's.
GpuTarget gpu_target_from_device(const GpuDeviceFacts& facts, const std::string& arch = {});

nlohmann::json to_json(const GpuTarget& t);

// The CPU targets by name: "x86-64-avx512" (Skylake-AVX512 on: 512-bit vectors, 32 registers),
// "x86-64-avx2" (Haswell on: 256-bit, 16), or "native" (the host: AVX-512 where it has AVX-512F,
// else AVX2; refused on a host with neither). cores: the host's hardware threads. Throws UsageError
// naming the known names for another word.
CpuTarget cpu_target(const std::string& isa);
const std::vector<std::string>& known_cpu_targets();
// Whether this process's CPU runs code of `t` (its vector ISA).
bool host_runs(const CpuTarget& t);
nlohmann::json to_json(const CpuTarget& t);

}  // namespace sparsecc
