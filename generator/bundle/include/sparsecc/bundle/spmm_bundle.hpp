// From a compiled SpMM executor to its bundle and back: the matrix fingerprint, the verification
// section (the matrix in CSR, so `sparsecc verify` can recompute the fp64 reference), the plan
// section (the plan itself, for the CPU interpreter: reading a bundle never re-runs the inspector),
// and the metadata that records the plan's launch configuration.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/plan/launch_metadata.hpp"
#include "sparsecc/plan/spmm_plan.hpp"
#include "sparsecc/runtime/bundle.hpp"
#include "sparsecc/target/target.hpp"

namespace sparsecc {

// Verification section layout (little-endian): u64 rows, u64 cols, u64 nnz, i64 row_ptr[rows + 1],
// i32 col_idx[nnz], f32 values[nnz]. Values are stored as float32, the precision the executor uses.
std::vector<unsigned char> csr_reference_bytes(const CsrMatrix& a);
// Throws InputError naming `name` and the byte offset when the section is malformed.
CsrMatrix csr_from_reference_bytes(std::span<const unsigned char> data, const std::string& name);

// FNV-1a 64 of the verification bytes, as 16 hex digits: equal matrices (shape, pattern and float32
// values) give equal fingerprints.
std::string matrix_fingerprint(const CsrMatrix& a);

// Metadata for `plan` compiled for `target`: spmm_launch_metadata (sparsecc/plan/launch_metadata.hpp)
// and the fingerprint of `a`.
rt::BundleMetadata spmm_bundle_metadata(const SpmmPlan& plan, const CsrMatrix& a, const GpuTarget& target);

// The whole bundle of `plan` compiled for `target`: the metadata, the cubin and PTX, the `values` and
// `fragments` arrays the emitter packed, the bias (m values, or empty), the verification section and
// the plan section (to_json(plan)).
rt::Bundle make_spmm_bundle(const SpmmPlan& plan, const CsrMatrix& a, const GpuTarget& target,
                            std::vector<unsigned char> cubin, std::string ptx, std::vector<float> values,
                            std::vector<std::uint32_t> fragments, const std::vector<double>& bias);

// Throws rt::BundleError naming `name` and the key when `a` (the bundle's verification matrix) does not
// have the metadata's m, k and nnz.
void check_spmm_bundle_matrix(const rt::BundleMetadata& md, const CsrMatrix& a, const std::string& name);

// The plan `bundle` was compiled from, read from its plan section — for the plan interpreter, which
// checks an executor without a GPU; `a` is its verification matrix. Throws rt::BundleError naming
// `name` when the bundle has no plan section, when the section is not a valid plan for `a`
// (plan_from_json, check_plan), when `a` is not the matrix the metadata describes (m, k, nnz), or when
// the plan contradicts the metadata (every quantity of the code contract: the launch, the buffers,
// the value mode).
SpmmPlan spmm_bundle_plan(const rt::Bundle& bundle, const CsrMatrix& a, const std::string& name = "bundle");

}  // namespace sparsecc
