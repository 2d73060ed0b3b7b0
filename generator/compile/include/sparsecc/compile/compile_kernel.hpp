// One entry for both emitters' output: CUDA C++ goes through NVRTC (compile_cuda), PTX through the
// assembler (assemble_ptx).
#pragma once

#include <string>
#include <vector>

#include "sparsecc/compile/nvrtc.hpp"
#include "sparsecc/emit/emitted_kernel.hpp"

namespace sparsecc {

// `name` labels the input in logs ("<name>.cu" or "<name>.ptx" is used). Throws what the route throws.
CudaCompileResult compile_kernel(const EmittedKernel& kernel, const std::string& name,
                                 const CudaCompileOptions& options = {});

// Checks assembler options a user gave (ptxas options in the spellings CudaCompileOptions::extra
// takes, e.g. "-Xptxas=-O1") by building an empty kernel for `arch` with them through the route of
// `language` (NVRTC for cuda; nvJitLink for ptx), so that a bad option is reported as the user's
// before any work, and a later compile failure is the compiler's. Throws UsageError naming `option`
// with the assembler's cause.
void check_ptxas_options(const std::vector<std::string>& options, const std::string& arch,
                         KernelLanguage language, const std::string& option = "--Xptxas");

}  // namespace sparsecc
