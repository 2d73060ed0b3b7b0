// What a plan states in the runtime's metadata (sparsecc/runtime/bundle.hpp): the keys that size its
// launches and buffers, and the plan_summary the runtime checks them against. The emitters stamp
// the code contract of these keys into every module (sparsecc/emit/contract.hpp) and the bundle stage
// writes them with the matrix fingerprint and the sections (sparsecc/bundle/).
#pragma once

#include <string>

#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/plan/hines_plan.hpp"
#include "sparsecc/plan/hines_schedule.hpp"
#include "sparsecc/plan/spmm_plan.hpp"
#include "sparsecc/runtime/bundle.hpp"
#include "sparsecc/target/target.hpp"

namespace sparsecc {

// The metadata of `plan` for `a` compiled for `target` (its arch; programmatic_launch where the plan
// and the target have it), every key but the matrix fingerprint; plan_summary records the plan's
// tiling (the runtime reads rows_per_block and groups of rolled plans).
rt::BundleMetadata spmm_launch_metadata(const SpmmPlan& plan, const CsrMatrix& a, const GpuTarget& target);

// The metadata keys of `plan` scheduled as `schedule` that size its launches and buffers: op, dtype,
// kernel and `hines` (rows, cells, rhs, workspace bytes, the launch list).
rt::BundleMetadata hines_launch_metadata(const HinesPlan& plan, const HinesSchedule& schedule);

}  // namespace sparsecc
