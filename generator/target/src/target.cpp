#include "sparsecc/target/target.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <thread>

#include "sparsecc/common/error.hpp"

namespace sparsecc {

namespace {

constexpr std::int64_t KiB = 1024, MiB = 1024 * 1024;

// One row per architecture: the figures of the part named (docs/design/targets.md gives the sources).
std::vector<GpuTarget> make_table() {
  std::vector<GpuTarget> rows;
  const auto row = [&](const char* arch, const char* name, int major, int minor, const char* isa, int sms,
                       int threads_sm, int blocks_sm, std::int64_t shared_sm, std::int64_t optin,
                       std::int64_t l2, double clock, double dram, double l2bw) {
    GpuTarget t;
    t.arch = arch;
    t.name = name;
    t.cc_major = major;
    t.cc_minor = minor;
    t.ptx_isa = isa;
    t.sm_count = sms;
    t.max_threads_per_sm = threads_sm;
    t.max_blocks_per_sm = blocks_sm;
    t.shared_per_sm = shared_sm;
    t.shared_per_block_optin = optin;
    t.l2_bytes = l2;
    t.clock_mhz = clock;
    t.dram_bytes_per_us = dram;
    t.l2_bytes_per_us = l2bw;
    t.programmatic_launch = major >= 9;
    t.wgmma = std::string(arch) == "sm_90a";
    t.cp_async = major >= 8;
    t.clusters = major >= 9;
    t.mma_f16 = major >= 8;
    rows.push_back(t);
  };
  //   arch      part             cc    PTX    SMs  thr/SM blk/SM shared/SM  opt-in     L2         MHz   DRAM
  //   B/us L2 B/us
  row("sm_80", "A100 SXM 40GB", 8, 0, "7.0", 108, 2048, 32, 164 * KiB, 163 * KiB, 40 * MiB, 1410, 1.555e6,
      3.8e6);
  row("sm_86", "RTX 3090", 8, 6, "7.1", 82, 1536, 16, 100 * KiB, 99 * KiB, 6 * MiB, 1695, 0.936e6, 2.0e6);
  row("sm_89", "L40S", 8, 9, "7.8", 142, 1536, 24, 100 * KiB, 99 * KiB, 96 * MiB, 2520, 0.864e6, 3.0e6);
  row("sm_90", "H100 SXM", 9, 0, "7.8", 132, 2048, 32, 228 * KiB, 227 * KiB, 50 * MiB, 1755, 3.0e6, 5.5e6);
  row("sm_90a", "H100 SXM", 9, 0, "8.0", 132, 2048, 32, 228 * KiB, 227 * KiB, 50 * MiB, 1755, 3.0e6, 5.5e6);
  row("sm_100", "B200", 10, 0, "8.6", 148, 2048, 32, 228 * KiB, 227 * KiB, 126 * MiB, 1965, 7.7e6, 10e6);
  row("sm_120", "RTX 5090", 12, 0, "8.7", 170, 1536, 32, 100 * KiB, 99 * KiB, 96 * MiB, 2407, 1.79e6, 4.0e6);
  return rows;
}

const std::vector<GpuTarget>& table() {
  static const std::vector<GpuTarget> t = make_table();
  return t;
}

}  // namespace

const std::vector<std::string>& known_gpu_archs() {
  static const std::vector<std::string> archs = [] {
    std::vector<std::string> v;
    for (const GpuTarget& t : table()) v.push_back(t.arch);
    return v;
  }();
  return archs;
}

GpuTarget gpu_target(const std::string& arch) {
  for (const GpuTarget& t : table())
    if (t.arch == arch) return t;
  throw UsageError(
      fmt::format("unknown GPU architecture '{}' (known: {})", arch, fmt::join(known_gpu_archs(), ", ")));
}

const GpuTarget& default_gpu_target() {
  static const GpuTarget t = gpu_target("sm_90");
  return t;
}

GpuTarget gpu_target_from_device(const GpuDeviceFacts& f, const std::string& arch) {
  const std::int32_t cc = f.cc_major * 10 + f.cc_minor;
  const GpuTarget* base = &table().front();
  for (const GpuTarget& t : table())
    if (t.compute_capability() <= cc && t.arch.back() != 'a') base = &t;
  GpuTarget t = arch.empty() ? *base : gpu_target(arch);
  if (arch.empty()) t.arch = fmt::format("sm_{}", cc);
  t.source = "device";
  if (!f.name.empty()) t.name = f.name;
  t.cc_major = f.cc_major;
  t.cc_minor = f.cc_minor;
  const auto take = [](auto& field, auto value) {
    if (value > 0) field = value;
  };
  take(t.sm_count, f.sm_count);
  take(t.max_threads_per_block, f.max_threads_per_block);
  take(t.max_threads_per_sm, f.max_threads_per_sm);
  take(t.max_blocks_per_sm, f.max_blocks_per_sm);
  take(t.registers_per_sm, f.registers_per_sm);
  take(t.registers_per_block, f.registers_per_block);
  take(t.shared_per_sm, f.shared_per_sm);
  take(t.shared_per_block, f.shared_per_block);
  take(t.shared_per_block_optin, f.shared_per_block_optin);
  take(t.shared_reserved_per_block, f.shared_reserved_per_block);
  take(t.max_grid_x, f.max_grid_x);
  take(t.max_grid_y, f.max_grid_y);
  take(t.max_grid_z, f.max_grid_z);
  take(t.l2_bytes, f.l2_bytes);
  take(t.clock_mhz, f.clock_mhz);
  // Features are the cubin's: with `arch` given they stay that row's (an sm_80 cubin on an H100 has
  // no griddepcontrol); otherwise they follow the device's compute capability.
  if (arch.empty()) {
    t.programmatic_launch = f.cc_major >= 9;
    t.cp_async = t.mma_f16 = f.cc_major >= 8;
    t.clusters = f.cc_major >= 9;
    t.wgmma = false;
  }
  return t;
}

nlohmann::json to_json(const GpuTarget& t) {
  return {{"arch", t.arch},
          {"name", t.name},
          {"source", t.source},
          {"compute_capability", fmt::format("{}.{}", t.cc_major, t.cc_minor)},
          {"ptx_isa", t.ptx_isa},
          {"sm_count", t.sm_count},
          {"max_threads_per_block", t.max_threads_per_block},
          {"max_threads_per_sm", t.max_threads_per_sm},
          {"max_blocks_per_sm", t.max_blocks_per_sm},
          {"registers_per_sm", t.registers_per_sm},
          {"registers_per_block", t.registers_per_block},
          {"max_registers_per_thread", t.max_registers_per_thread},
          {"register_allocation_unit", t.register_allocation_unit},
          {"shared_per_sm", t.shared_per_sm},
          {"shared_per_block", t.shared_per_block},
          {"shared_per_block_optin", t.shared_per_block_optin},
          {"shared_reserved_per_block", t.shared_reserved_per_block},
          {"max_grid", {t.max_grid_x, t.max_grid_y, t.max_grid_z}},
          {"l2_bytes", t.l2_bytes},
          {"clock_mhz", t.clock_mhz},
          {"dram_bytes_per_us", t.dram_bytes_per_us},
          {"l2_bytes_per_us", t.l2_bytes_per_us},
          {"features",
           {{"programmatic_launch", t.programmatic_launch},
            {"wgmma", t.wgmma},
            {"cp_async", t.cp_async},
            {"clusters", t.clusters},
            {"mma_f16", t.mma_f16}}}};
}

namespace {

bool host_has_avx512() { return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl"); }
bool host_has_avx2() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

}  // namespace

const std::vector<std::string>& known_cpu_targets() {
  static const std::vector<std::string> names = {"x86-64-avx512", "x86-64-avx2", "native"};
  return names;
}

CpuTarget cpu_target(const std::string& isa) {
  CpuTarget t;
  t.cores = static_cast<std::int32_t>(std::max(1u, std::thread::hardware_concurrency()));
  std::string name = isa;
  if (isa == "native") {
    if (!host_has_avx2()) throw UsageError("--target native: this CPU has neither AVX-512 nor AVX2 with FMA");
    name = host_has_avx512() ? "x86-64-avx512" : "x86-64-avx2";
  }
  if (name == "x86-64-avx512") {
    t.cpu = "skylake-avx512";
    t.vector_bits = 512;
    t.vector_registers = 32;
  } else if (name == "x86-64-avx2") {
    t.cpu = "haswell";
    t.vector_bits = 256;
    t.vector_registers = 16;
  } else {
    throw UsageError(
        fmt::format("unknown CPU target '{}' (known: {})", isa, fmt::join(known_cpu_targets(), ", ")));
  }
  t.isa = isa == "native" ? "native" : name;
  if (isa == "native") t.cpu = "native";
  return t;
}

bool host_runs(const CpuTarget& t) { return t.vector_bits > 256 ? host_has_avx512() : host_has_avx2(); }

nlohmann::json to_json(const CpuTarget& t) {
  return {{"isa", t.isa},
          {"cpu", t.cpu},
          {"vector_bits", t.vector_bits},
          {"vector_registers", t.vector_registers},
          {"cores", t.cores},
          {"l1d_bytes", t.l1d_bytes},
          {"l2_bytes", t.l2_bytes},
          {"l3_bytes", t.l3_bytes}};
}

}  // namespace sparsecc
