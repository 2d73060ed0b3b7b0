#include "sparsecc/compile/compile_kernel.hpp"

namespace sparsecc {

CudaCompileResult compile_kernel(const EmittedKernel& kernel, const std::string& name,
                                 const CudaCompileOptions& options) {
  if (kernel.language == KernelLanguage::ptx) {
    if (kernel.modules.empty()) return assemble_ptx(kernel.source, name + ".ptx", options);
    return assemble_ptx_modules(kernel.modules, kernel.source, name + ".ptx", options);
  }
  return compile_cuda(kernel.source, name + ".cu", options);
}

}  // namespace sparsecc
