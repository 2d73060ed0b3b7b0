// CUDA C++ emitter for rolled SpMM plans: renders templates/spmm_rolled.cu with the plan's shape; the
// steps themselves go to the table the kernel reads (spmm_rolled_table), not into the code.
#include <fmt/format.h>

#include <map>

#include "sparsecc/emit/contract.hpp"
#include "sparsecc/emit/spmm_cuda.hpp"
#include "sparsecc/emit/template.hpp"
#include "unrolled_groups.hpp"

namespace sparsecc {

EmittedKernel emit_spmm_rolled_cuda(const SpmmPlan& plan, const CsrMatrix& a) {
  if (plan.value_mode() != SpmmValueMode::rolled)
    throw UsageError("emit_spmm_rolled_cuda: the plan's value mode is not rolled");
  EmittedKernel out;
  emit_detail::start_cuda_kernel(plan, a, out);  // checks the plan; the table goes to out.packed_values
  const bool fixed = plan.problem.n_mode == SpmmNMode::fixed;
  const std::map<std::string, std::string> values = {
      {"BLOCK_X", std::to_string(plan.layout.block_x)},
      {"KERNEL_NAME", plan.hints.kernel_name},
      {"N_TILE", std::to_string(plan.layout.n_tile)},
      {"ROWS", std::to_string(plan.layout.rows_per_block)},
      {"GROUPS", std::to_string(plan.layout.groups)},
      {"BATCH", std::to_string(kSpmmRolledBatch)},
      {"STEP_LANES", std::to_string(plan.step_lanes())},
      {"HEADER", std::to_string(spmm_rolled_header_words(plan))},
      {"RECORD", std::to_string(spmm_rolled_record_words(plan))},
      {"M", std::to_string(plan.problem.m)},
      {"BIAS", plan.epilogue.bias ? "true" : "false"},
      {"RELU", plan.epilogue.relu ? "true" : "false"},
      {"PROGRAMMATIC", plan.hints.programmatic ? "true" : "false"},
      {"PROGRAMMATIC_TRIGGER", plan.hints.programmatic && plan.hints.programmatic_trigger ? "true" : "false"},
      {"LD", fixed ? fmt::format("{}", plan.problem.n) : "n"}};
  out.source = KernelTemplate::load("spmm_rolled.cu").render(values);
  stamp_spmm_contract(out, plan, a);
  return out;
}

}  // namespace sparsecc
