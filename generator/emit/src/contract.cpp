#include "sparsecc/emit/contract.hpp"

#include "sparsecc/plan/launch_metadata.hpp"

namespace sparsecc {

std::vector<rt::ContractField> spmm_plan_contract(const SpmmPlan& plan, const CsrMatrix& a,
                                                  std::int64_t values_words) {
  // The metadata the bundle of this plan states; the target (its arch and programmatic launch) does
  // not enter the contract, so any target's metadata states it.
  return rt::spmm_contract(spmm_launch_metadata(plan, a, default_gpu_target()), values_words);
}

std::vector<rt::ContractField> hines_plan_contract(const HinesPlan& plan, const HinesSchedule& schedule) {
  return rt::hines_contract(hines_launch_metadata(plan, schedule), schedule.tables);
}

void stamp_spmm_contract(EmittedKernel& kernel, const SpmmPlan& plan, const CsrMatrix& a) {
  const auto fields = spmm_plan_contract(plan, a, static_cast<std::int64_t>(kernel.packed_values.size()));
  if (kernel.language == KernelLanguage::cuda) {
    kernel.source += rt::contract_cuda(fields);
    return;
  }
  const std::string ptx = rt::contract_ptx(fields);
  kernel.source += ptx;
  if (!kernel.modules.empty()) kernel.modules.front() += ptx;
}

}  // namespace sparsecc
