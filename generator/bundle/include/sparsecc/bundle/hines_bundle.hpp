// From a compiled Hines executor to its bundle and back: the metadata with the schedule's launch
// list, the tables and permutation sections, the verification section (the system itself, so
// `sparsecc verify` can recompute the fp64 reference) and the plan section (the plan itself, for the
// CPU interpreter: reading a bundle never re-runs the planner).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "sparsecc/neuron/hines.hpp"
#include "sparsecc/plan/hines_plan.hpp"
#include "sparsecc/plan/hines_schedule.hpp"
#include "sparsecc/plan/launch_metadata.hpp"
#include "sparsecc/runtime/bundle.hpp"

namespace sparsecc {

// Verification section layout (little-endian): u64 rows, u64 cells, u64 passive (1 when the
// passive-step terms are present), i32 parent[rows], i32 cell_offsets[cells + 1], f64 diag[rows],
// f64 upper[rows], f64 lower[rows], then when passive f64 cap_over_dt[rows], f64 leak[rows],
// f64 leak_reversal_mv. Permutations are not stored (the permutation section has them).
std::vector<unsigned char> hines_reference_bytes(const HinesSystem& system);
// Throws InputError naming `name` and the byte offset when the section is malformed.
HinesSystem hines_system_from_reference_bytes(std::span<const unsigned char> data, const std::string& name);

// The bundle of `plan` (scheduled as `schedule`) for `system`, compiled for `arch`: the metadata
// (hines_launch_metadata, sparsecc/plan/launch_metadata.hpp, with the fingerprint and plan_summary),
// the tables, the verification section and the plan section (to_json(plan)). The permutation section
// is the system's compartment_of when it has one.
rt::Bundle hines_bundle(const HinesPlan& plan, const HinesSchedule& schedule, const HinesSystem& system,
                        std::vector<unsigned char> cubin, std::string ptx, const std::string& arch);

// The plan a Hines bundle was compiled from, read from its plan section — for the plan interpreter,
// which checks an executor without a GPU; `s` is its verification system. Throws rt::BundleError
// naming `name` when the bundle has no plan section, when `s` is not the system the metadata
// describes, when the section is not a valid plan of `s` (hines_plan_from_json, check_hines_plan, its
// parents and cells) or when its schedule contradicts the metadata or the tables (the code contract).
HinesPlan hines_bundle_plan(const rt::Bundle& bundle, const HinesSystem& s,
                            const std::string& name = "bundle");

}  // namespace sparsecc
