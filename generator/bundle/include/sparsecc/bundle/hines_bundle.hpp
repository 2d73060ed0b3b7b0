// From a compiled Hines executor to its bundle and back: the metadata with the schedule's launch
// list, the tables and permutation sections, and the verification section (the system itself, so
// `sparsecc verify` can recompute the fp64 reference).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "sparsecc/neuron/hines.hpp"
#include "sparsecc/plan/hines_plan.hpp"
#include "sparsecc/plan/hines_schedule.hpp"
#include "sparsecc/runtime/bundle.hpp"

namespace sparsecc {

// Verification section layout (little-endian): u64 rows, u64 cells, u64 passive (1 when the
// passive-step terms are present), i32 parent[rows], i32 cell_offsets[cells + 1], f64 diag[rows],
// f64 upper[rows], f64 lower[rows], then when passive f64 cap_over_dt[rows], f64 leak[rows],
// f64 leak_reversal_mv. Permutations are not stored (the permutation section has them).
std::vector<unsigned char> hines_reference_bytes(const HinesSystem& system);
// Throws InputError naming `name` and the byte offset when the section is malformed.
HinesSystem hines_system_from_reference_bytes(std::span<const unsigned char> data, const std::string& name);

// The metadata keys of `plan` scheduled as `schedule` that size its launches and buffers: op, dtype,
// kernel and `hines` (rows, cells, rhs, workspace bytes, the launch list).
rt::BundleMetadata hines_launch_metadata(const HinesPlan& plan, const HinesSchedule& schedule);

// The bundle of `plan` (scheduled as `schedule`) for `system`, compiled for `arch`. The permutation
// section is the system's compartment_of when it has one.
rt::Bundle hines_bundle(const HinesPlan& plan, const HinesSchedule& schedule, const HinesSystem& system,
                        std::vector<unsigned char> cubin, std::string ptx, const std::string& arch);

// The plan a Hines bundle was compiled from, rebuilt by the (deterministic) planner from its metadata
// and its verification system `s` — for the plan interpreter, which checks an executor without a GPU.
// Throws rt::BundleError naming `name` when `s` is not the system the metadata describes or the
// re-plan does not reproduce the bundle's levels.
HinesPlan replan_hines_bundle(const rt::BundleMetadata& md, const HinesSystem& s, const std::string& name = "bundle");

}  // namespace sparsecc
