#include "sparsecc/compile/compile_kernel.hpp"

#include <string>

namespace sparsecc {

CudaCompileResult compile_kernel(const EmittedKernel& kernel, const std::string& name,
                                 const CudaCompileOptions& options) {
  CudaCompileOptions o = options;
  // The kernel's level goes first so that a ptxas option the caller passes can override it.
  o.extra.insert(o.extra.begin(), "-Xptxas=-O" + std::to_string(kernel.opt_level));
  if (kernel.max_registers > 0) o.extra.push_back("-maxrregcount=" + std::to_string(kernel.max_registers));
  if (kernel.language == KernelLanguage::ptx) {
    if (kernel.modules.empty()) return assemble_ptx(kernel.source, name + ".ptx", o);
    return assemble_ptx_modules(kernel.modules, kernel.source, name + ".ptx", o);
  }
  return compile_cuda(kernel.source, name + ".cu", o);
}

}  // namespace sparsecc
