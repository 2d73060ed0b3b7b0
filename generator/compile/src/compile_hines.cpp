#include "sparsecc/compile/compile_hines.hpp"

namespace sparsecc {

CompiledHines compile_hines(const HinesPlan& plan, const CudaCompileOptions& options) {
  CompiledHines out;
  out.schedule = schedule_hines(plan);
  out.emitted = emit_hines_cuda(plan, out.schedule);
  out.code = compile_cuda(out.emitted.source, plan.kernel_name + ".cu", options);
  return out;
}

}  // namespace sparsecc
