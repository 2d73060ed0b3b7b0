// The target table (every row round-trips, an unknown architecture is refused naming the known ones,
// sm_80 is an A100 and sm_90 keeps the H100 figures the stages had as constants), targets built from
// a device's facts, the tools' conversion of the runtime's device attributes, and the Hines
// shared-workspace rule read from the target.
#include "sparsecc/target/target.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>

#include "hines_support.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/inspector/hines_planner.hpp"
#include "target_flags.hpp"

namespace sparsecc {
namespace {

constexpr std::int64_t KiB = 1024;

TEST(Target, EveryRowOfTheTableRoundTrips) {
  const auto& archs = known_gpu_archs();
  ASSERT_EQ(archs,
            (std::vector<std::string>{"sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_120"}));
  for (const std::string& arch : archs) {
    const GpuTarget t = gpu_target(arch);
    EXPECT_EQ(t.arch, arch);
    EXPECT_EQ(t.source, "table");
    EXPECT_EQ(arch.rfind(fmt::format("sm_{}", t.compute_capability()), 0), 0u) << arch;
    const nlohmann::json j = to_json(t);
    EXPECT_EQ(j.at("arch"), arch);
    EXPECT_EQ(j.at("sm_count"), t.sm_count);
    EXPECT_EQ(j.at("compute_capability"), fmt::format("{}.{}", t.cc_major, t.cc_minor));
    EXPECT_EQ(j.at("features").at("programmatic_launch"), t.programmatic_launch);
    // Figures that hold on every part.
    EXPECT_GT(t.sm_count, 0) << arch;
    EXPECT_FALSE(t.ptx_isa.empty()) << arch;
    EXPECT_LT(t.shared_per_block_optin, t.shared_per_sm) << arch;
    EXPECT_LE(t.shared_per_block, t.shared_per_block_optin) << arch;
    EXPECT_EQ(t.max_threads_per_sm % 32, 0) << arch;
    EXPECT_EQ(t.programmatic_launch, t.cc_major >= 9) << arch;
    EXPECT_EQ(t.wgmma, arch == "sm_90a") << arch;
  }
  EXPECT_EQ(to_json(default_gpu_target()), to_json(gpu_target("sm_90")));
}

TEST(Target, AnUnknownArchitectureNamesTheKnownOnes) {
  for (const char* word : {"sm_91", "sm90", "", "native"}) {
    try {
      gpu_target(word);
      ADD_FAILURE() << "accepted '" << word << "'";
    } catch (const UsageError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(fmt::format("'{}'", word)), std::string::npos) << what;
      for (const std::string& arch : known_gpu_archs()) EXPECT_NE(what.find(arch), std::string::npos) << what;
    }
  }
}

// What the stages had as constants of the H100 before targets (predictor, Hines rule, PTX emitter,
// planner): sm_90's row keeps every one, so that planning and emitting for sm_90 does not change.
TEST(Target, Sm90KeepsTheH100FiguresTheStagesHadAsConstants) {
  const GpuTarget t = gpu_target("sm_90");
  EXPECT_EQ(t.sm_count, 132);
  EXPECT_EQ(t.clock_mhz, 1755);
  EXPECT_EQ(t.registers_per_sm, 65536);
  EXPECT_EQ(t.registers_per_block, 65536);
  EXPECT_EQ(t.max_threads_per_sm, 2048);
  EXPECT_EQ(t.max_blocks_per_sm, 32);
  EXPECT_EQ(t.shared_per_sm, 228 * KiB);
  EXPECT_EQ(t.shared_per_block_optin, 232448);  // kHinesSharedPerSm
  EXPECT_EQ(t.shared_per_block, 48 * KiB);
  EXPECT_EQ(t.shared_reserved_per_block, 1024);
  EXPECT_EQ(t.register_allocation_unit, 256);
  EXPECT_EQ(t.dram_bytes_per_us, 3.0e6);
  EXPECT_EQ(t.l2_bytes_per_us, 5.5e6);
  EXPECT_EQ(t.max_grid_y, 65535);
  EXPECT_EQ(t.ptx_isa, "7.8");
  EXPECT_TRUE(t.programmatic_launch);
  EXPECT_EQ(gpu_target("sm_90a").ptx_isa, "8.0");
}

TEST(Target, Sm80IsAnA100) {
  const GpuTarget a100 = gpu_target("sm_80"), h100 = gpu_target("sm_90");
  EXPECT_EQ(a100.sm_count, 108);
  EXPECT_EQ(a100.shared_per_sm, 164 * KiB);
  EXPECT_EQ(a100.shared_per_block_optin, 163 * KiB);
  EXPECT_EQ(a100.ptx_isa, "7.0");
  EXPECT_EQ(a100.compute_capability(), 80);
  EXPECT_FALSE(a100.programmatic_launch);
  EXPECT_TRUE(a100.cp_async);
  EXPECT_NE(a100.sm_count, h100.sm_count);
  EXPECT_NE(a100.shared_per_sm, h100.shared_per_sm);
  EXPECT_LT(a100.clock_mhz, h100.clock_mhz);
  EXPECT_LT(a100.dram_bytes_per_us, h100.dram_bytes_per_us);
}

GpuDeviceFacts h100_pcie() {
  GpuDeviceFacts f;
  f.name = "NVIDIA H100 PCIe";
  f.cc_major = 9;
  f.cc_minor = 0;
  f.sm_count = 114;
  f.l2_bytes = 50 * 1024 * 1024;
  f.shared_per_block_optin = 227 * KiB;
  return f;
}

TEST(Target, DeviceFactsOverrideTheTable) {
  const GpuTarget t = gpu_target_from_device(h100_pcie());
  EXPECT_EQ(t.arch, "sm_90");
  EXPECT_EQ(t.source, "device");
  EXPECT_EQ(t.name, "NVIDIA H100 PCIe");
  EXPECT_EQ(t.sm_count, 114);             // the device's
  EXPECT_EQ(t.shared_per_sm, 228 * KiB);  // not reported: the row's
  EXPECT_EQ(t.clock_mhz, 1755);           // not reported: the row's sustained clock
  EXPECT_EQ(t.ptx_isa, "7.8");
  EXPECT_TRUE(t.programmatic_launch);
  EXPECT_EQ(to_json(t).at("source"), "device");

  // An architecture the table lacks takes the nearest row below, under its own name.
  GpuDeviceFacts orin;
  orin.cc_major = 8;
  orin.cc_minor = 7;
  orin.sm_count = 16;
  const GpuTarget o = gpu_target_from_device(orin);
  EXPECT_EQ(o.arch, "sm_87");
  EXPECT_EQ(o.sm_count, 16);
  EXPECT_EQ(o.max_threads_per_sm, gpu_target("sm_86").max_threads_per_sm);
  EXPECT_FALSE(o.programmatic_launch);

  // A cubin for another architecture than the device's: that row's features, the device's figures.
  const GpuTarget a = gpu_target_from_device(h100_pcie(), "sm_90a");
  EXPECT_EQ(a.arch, "sm_90a");
  EXPECT_TRUE(a.wgmma);
  EXPECT_EQ(a.ptx_isa, "8.0");
  EXPECT_EQ(a.sm_count, 114);
  const GpuTarget old = gpu_target_from_device(h100_pcie(), "sm_80");
  EXPECT_EQ(old.arch, "sm_80");
  EXPECT_FALSE(old.programmatic_launch);  // an sm_80 cubin has no griddepcontrol, on any device
  EXPECT_EQ(old.sm_count, 114);
  EXPECT_THROW(gpu_target_from_device(h100_pcie(), "sm_91"), UsageError);
}

// The tools' conversion of the runtime's attributes (cuDeviceGetAttribute) into the target's facts.
TEST(Target, DeviceFactsFromTheRuntimesDeviceInfo) {
  rt::DeviceInfo d;
  d.name = "NVIDIA A100-SXM4-80GB";
  d.cc_major = 8;
  d.cc_minor = 0;
  d.multiprocessors = 108;
  d.l2_bytes = 40 * 1024 * 1024;
  d.max_shared_per_block_optin = 166912;
  d.max_threads_per_block = 1024;
  d.max_threads_per_sm = 2048;
  d.max_blocks_per_sm = 32;
  d.registers_per_sm = d.registers_per_block = 65536;
  d.shared_per_sm = 167936;
  d.shared_per_block = 49152;
  d.reserved_shared_per_block = 1024;
  d.max_grid[0] = 2147483647;
  d.max_grid[1] = d.max_grid[2] = 65535;
  d.clock_khz = 1410000;
  const GpuDeviceFacts f = cli::device_facts(d);
  EXPECT_EQ(f.sm_count, 108);
  EXPECT_EQ(f.shared_per_sm, 167936);
  EXPECT_EQ(f.shared_per_block_optin, 166912);
  EXPECT_EQ(f.max_grid_y, 65535);
  EXPECT_EQ(f.clock_mhz, 0);  // the table's sustained clock stays
  const GpuTarget t = gpu_target_from_device(f);
  const GpuTarget row = gpu_target("sm_80");
  EXPECT_EQ(t.arch, "sm_80");
  EXPECT_EQ(t.name, d.name);
  EXPECT_EQ(t.sm_count, row.sm_count);
  EXPECT_EQ(t.shared_per_sm, row.shared_per_sm);
  EXPECT_EQ(t.shared_per_block_optin, row.shared_per_block_optin);
  EXPECT_EQ(t.clock_mhz, row.clock_mhz);
}

// The rule as it was with the H100's constants: 227 KiB among the blocks an SM holds at 64
// registers a thread (2048 threads, 65536 registers, at most 32 blocks), less the base and 1 KiB.
std::int64_t h100_rule(std::int32_t threads, std::int64_t base) {
  const std::int64_t blocks =
      std::clamp<std::int64_t>(std::min<std::int64_t>(2048 / threads, 65536 / (threads * 64)), 1, 32);
  return std::clamp<std::int64_t>(232448 / blocks - base - 1024, 0, kHinesSharedWorkspaceMax);
}

TEST(HinesTarget, SharedWorkspaceRuleReadsTheTarget) {
  const GpuTarget sm90 = gpu_target("sm_90"), sm80 = gpu_target("sm_80");
  for (std::int32_t threads = 32; threads <= 1024; threads += 32)
    for (const std::int64_t base : {std::int64_t{0}, std::int64_t{4096}, std::int64_t{24576}}) {
      EXPECT_EQ(hines_shared_workspace_rule(threads, base), h100_rule(threads, base))
          << threads << " " << base;
      EXPECT_EQ(hines_shared_workspace_rule(threads, base, sm90), h100_rule(threads, base)) << threads;
    }
  EXPECT_EQ(hines_shared_workspace_rule(512, 0, sm90), 232448 / 2 - 1024);
  EXPECT_EQ(hines_shared_workspace_rule(512, 0, sm80), 163 * KiB / 2 - 1024);  // an A100 holds less
  EXPECT_LT(hines_shared_workspace_rule(256, 0, sm80), hines_shared_workspace_rule(256, 0, sm90));
  // An RTX 3090 (1536 threads an SM) holds 3 blocks of 512 threads by threads but 2 by registers.
  const GpuTarget sm86 = gpu_target("sm_86");
  EXPECT_EQ(hines_shared_workspace_rule(512, 0, sm86), 99 * KiB / 2 - 1024);
  EXPECT_EQ(hines_shared_workspace_rule(128, 0, sm86), 99 * KiB / 8 - 1024);
}

TEST(HinesTarget, PlanHinesTakesTheTargetsRule) {
  std::mt19937_64 rng(7);
  const HinesSystem s = test::random_system(rng, 4000, 40, 0.05);
  const HinesPlan by_default = plan_hines(s, 1, "f64");
  const HinesPlan sm90 = plan_hines(s, 1, "f64", {}, gpu_target("sm_90"));
  const HinesPlan sm80 = plan_hines(s, 1, "f64", {}, gpu_target("sm_80"));
  EXPECT_EQ(to_json(by_default), to_json(sm90));
  EXPECT_GT(sm90.shared_workspace_limit, 0);
  EXPECT_LT(sm80.shared_workspace_limit, sm90.shared_workspace_limit);
  // Only the limit depends on the target.
  HinesPlan same = sm80;
  same.shared_workspace_limit = sm90.shared_workspace_limit;
  EXPECT_EQ(to_json(same), to_json(sm90));
}

}  // namespace
}  // namespace sparsecc
