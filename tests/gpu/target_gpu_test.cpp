// The live device's target (--arch native): the driver's figures replace the table's row, so the
// target has the device's SM count, shared memory and compute capability.
#include <gtest/gtest.h>

#include <cstdio>

#include "gpu_skip.hpp"
#include "sparsecc/runtime/device.hpp"
#include "sparsecc/target/target.hpp"
#include "target_flags.hpp"

using namespace sparsecc;

TEST(GpuTarget, TheLiveDevicesTargetHasItsFigures) {
  SPARSECC_GPU_OR_SKIP();
  const rt::DeviceInfo d = rt::device_info(0);
  const GpuTarget t = cli::resolve_gpu_target("native");
  std::printf("[ target ] %s\n", to_json(t).dump().c_str());
  EXPECT_EQ(t.source, "device");
  EXPECT_EQ(t.name, d.name);
  EXPECT_EQ(t.arch, d.arch());
  EXPECT_EQ(t.sm_count, d.multiprocessors);
  EXPECT_EQ(t.cc_major, d.cc_major);
  EXPECT_EQ(t.cc_minor, d.cc_minor);
  EXPECT_EQ(t.shared_per_block_optin, d.max_shared_per_block_optin);
  EXPECT_EQ(t.shared_per_sm, d.shared_per_sm);
  EXPECT_EQ(t.registers_per_sm, d.registers_per_sm);
  EXPECT_EQ(t.max_threads_per_sm, d.max_threads_per_sm);
  EXPECT_EQ(t.max_grid_y, d.max_grid[1]);
  EXPECT_EQ(t.l2_bytes, static_cast<std::int64_t>(d.l2_bytes));
  EXPECT_EQ(t.programmatic_launch, d.cc_major >= 9);
  EXPECT_GT(t.shared_reserved_per_block, 0);
  // On an H100 or H200 the figures that plan and emit are the table's sm_90 row's (only the SM count,
  // the name and the L2 may differ between parts).
  if (d.cc_major == 9 && d.cc_minor == 0) {
    const GpuTarget row = gpu_target("sm_90");
    EXPECT_EQ(t.ptx_isa, row.ptx_isa);
    EXPECT_EQ(t.shared_per_sm, row.shared_per_sm);
    EXPECT_EQ(t.shared_per_block_optin, row.shared_per_block_optin);
    EXPECT_EQ(t.shared_per_block, row.shared_per_block);
    EXPECT_EQ(t.shared_reserved_per_block, row.shared_reserved_per_block);
    EXPECT_EQ(t.registers_per_sm, row.registers_per_sm);
    EXPECT_EQ(t.registers_per_block, row.registers_per_block);
    EXPECT_EQ(t.max_threads_per_sm, row.max_threads_per_sm);
    EXPECT_EQ(t.max_blocks_per_sm, row.max_blocks_per_sm);
    EXPECT_EQ(t.max_grid_y, row.max_grid_y);
  }
}
