// The code contract (sparsecc/runtime/bundle.hpp) stamped into every module the emitters write: the
// numbers of the plan that size the kernel's launch and buffers, as the bundle's metadata will state
// them. The runtime compares the module's contract with the metadata before any launch.
#pragma once

#include <cstdint>
#include <vector>

#include "sparsecc/emit/emitted_kernel.hpp"
#include "sparsecc/emit/hines_cuda.hpp"
#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/plan/spmm_plan.hpp"
#include "sparsecc/runtime/bundle.hpp"

namespace sparsecc {

// The contract of `plan`'s kernel for `a`, whose values argument has `values_words` words.
std::vector<rt::ContractField> spmm_plan_contract(const SpmmPlan& plan, const CsrMatrix& a,
                                                  std::int64_t values_words);
// The contract of `plan`'s kernels scheduled as `schedule`.
std::vector<rt::ContractField> hines_plan_contract(const HinesPlan& plan, const HinesSchedule& schedule);

// Appends the contract of `plan` to `kernel`'s text (CUDA C++ or PTX; with split PTX, to the entry
// module as well). The values argument is kernel.packed_values.
void stamp_spmm_contract(EmittedKernel& kernel, const SpmmPlan& plan, const CsrMatrix& a);

}  // namespace sparsecc
