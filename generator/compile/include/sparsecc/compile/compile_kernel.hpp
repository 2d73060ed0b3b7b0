// One entry for both emitters' output: CUDA C++ goes through NVRTC (compile_cuda), PTX through the
// assembler (assemble_ptx).
#pragma once

#include <string>

#include "sparsecc/compile/nvrtc.hpp"
#include "sparsecc/emit/emitted_kernel.hpp"

namespace sparsecc {

// `name` labels the input in logs ("<name>.cu" or "<name>.ptx" is used). Throws what the route throws.
CudaCompileResult compile_kernel(const EmittedKernel& kernel, const std::string& name,
                                 const CudaCompileOptions& options = {});

}  // namespace sparsecc
