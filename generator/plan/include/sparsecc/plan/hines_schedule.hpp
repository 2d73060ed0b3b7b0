// The Hines executor's schedule: a HinesPlan lowered to what the kernels of templates/hines_edd.cu
// read and the runtime launches, still plain data. It fixes
//   - the workspace layout: per level l the stage-1 arrays of level l (rv, pv, qv, piv, w) and level
//     l + 1's matrix and solution (md, mu, ml, mb, mx), then the base's pivots; the deepest block
//     levels, as far as one cell's part of them fits the plan's shared_workspace_limit, keep these
//     arrays in the block kernel's dynamic shared memory instead (one cell's worth, per block);
//   - one int32 table section: the grid levels' chain/junction/gather lists (absolute indices), the
//     segment types of the block kernel (one cell's part of every block level and of the base, indices
//     relative to the cell's first row at each level; equal cells share one type) and the segment list
//     (per block: its type's offset and its first row at every block level and at the base);
//   - the launch list of one step: stage 1 and 2 of every grid level, the block kernel, stage 4 of
//     the grid levels in reverse.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sparsecc/plan/hines_plan.hpp"
#include "sparsecc/runtime/launch.hpp"

namespace sparsecc {

// Workspace arrays of a level, in the order of the kernels' kOff rows.
inline constexpr int kHinesLevelArrays = 10;  // rv pv qv piv w md mu ml mb mx
// Chains of up to this many rows are eliminated in registers (the emitter passes it to the template
// as kRegChainMax); longer ones keep their factorisation in the piv and w arrays.
inline constexpr int kHinesRegisterChain = 8;

// A launch of the list and its kernel arguments: the runtime's own record (sparsecc/runtime/launch.hpp),
// which the bundle's metadata carries unchanged. An argument is a pointer (`buffer` d, u, l, b, x,
// workspace or tables, plus `value` bytes) or an int (`buffer` "i32", `value` the int).
using HinesKernelArg = rt::LaunchArg;
using HinesLaunch = rt::KernelLaunch;

struct HinesSchedule {
  std::int32_t real_bytes = 8;  // 8 (f64) or 4 (f32)
  std::int32_t rhs = 1;
  std::int32_t first_block_level = 0;  // G
  std::int32_t block_levels = 0;       // depth - G
  std::int32_t block_threads = 256;
  // Per level, in elements: offsets into the workspace, or for levels from shared_from on into the
  // block kernel's dynamic shared memory (relative to the cell: no row offsets are added there).
  std::vector<std::array<std::int64_t, kHinesLevelArrays>> level_offsets;
  std::int32_t shared_from = 0;        // first level in shared memory; depth when none is
  std::int64_t shared_elements = 0;    // dynamic shared memory of the block kernel, in elements
  std::int64_t base_pivot_offset = 0;  // in elements
  std::int64_t workspace_elements = 0;
  std::vector<std::int32_t> tables;
  std::int32_t segment_stride = 2;  // ints per segment: type offset, rows at G .. depth
  std::int32_t segments = 0;        // blocks of the block kernel
  std::int32_t segment_types = 0;
  std::vector<std::int32_t> type_offsets;  // of every segment type in `tables`, by first appearance
  std::int32_t chain_max = 0;              // rows of the longest chain of any level
  std::int32_t base_max = 0;               // base rows of the largest segment
  std::int64_t segments_offset = 0;        // in ints
  std::vector<HinesLaunch> launches;

  std::int64_t workspace_bytes() const { return workspace_elements * real_bytes; }
  std::int64_t shared_bytes() const { return shared_elements * real_bytes; }
};

// Throws UsageError when the plan is invalid (check_hines_plan) or its tables exceed int32 offsets.
HinesSchedule schedule_hines(const HinesPlan& plan);

nlohmann::json launches_to_json(const std::vector<HinesLaunch>& launches);

}  // namespace sparsecc
