// The bundles of CPU executors (metadata target "cpu", sparsecc/runtime/bundle.hpp): the metadata of
// a CPU plan, the static archive of its objects, the bias or the permutation, the plan section.
#pragma once

#include <string>
#include <vector>

#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/neuron/hines.hpp"
#include "sparsecc/plan/hines_cpu_plan.hpp"
#include "sparsecc/plan/spmm_cpu_plan.hpp"
#include "sparsecc/runtime/bundle.hpp"

namespace sparsecc {

// A CPU executor's bundle is made before its code: its metadata's `kernel` is the symbol prefix the
// code is emitted with ("sparsecc_cpu_" and 16 hex digits of a digest of the matrix or system and the
// plan, so that executors of different matrices or plans link into one program side by side and
// equal ones are one); the pipeline then compiles the code and stores its static archive in
// `objects` (write_cpu_archive).

// The symbol prefix of the CPU SpMM executor of `plan` for `a` (make_cpu_spmm_bundle's `kernel`).
std::string cpu_spmm_symbol(const SpmmCpuPlan& plan, const CsrMatrix& a);

// The bundle of `plan` for `a` but its objects; the entry is {kernel}_tile. bias: m values, or empty.
// The verification section holds A, the plan section the plan.
rt::Bundle make_cpu_spmm_bundle(const SpmmCpuPlan& plan, const CsrMatrix& a, const std::vector<double>& bias);

// The plan of a CPU SpMM bundle, read from its plan section and checked against `a` (its
// verification matrix) and the metadata. Throws rt::BundleError naming `name`.
SpmmCpuPlan cpu_spmm_bundle_plan(const rt::Bundle& bundle, const CsrMatrix& a, const std::string& name);

// The bundle of `plan` for `system` but its objects; the entry is {kernel}_solve. The verification
// section holds the system, the tables section the executor's row order (plan.permutation()), the
// permutation section the system's compartment_of when it has one.
rt::Bundle make_cpu_hines_bundle(const HinesCpuPlan& plan, const HinesSystem& system);

}  // namespace sparsecc
