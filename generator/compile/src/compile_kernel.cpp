#include "sparsecc/compile/compile_kernel.hpp"

#include <fmt/format.h>

#include <string>

#include "sparsecc/common/error.hpp"

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

void check_ptxas_options(const std::vector<std::string>& options, const std::string& arch,
                         KernelLanguage language, const std::string& option) {
  if (options.empty()) return;
  static const char* const kEmpty = "extern \"C\" __global__ void sparsecc_option_check() {}\n";
  CudaCompileOptions plain;
  plain.arch = arch;
  // Without the options the empty kernel builds: what fails below is the options.
  const CudaCompileResult reference = compile_cuda(kEmpty, "option_check.cu", plain);
  CudaCompileOptions given = plain;
  given.extra = options;
  std::string joined;
  for (const std::string& o : options)
    joined += (joined.empty() ? "" : " ") + (o.rfind("-Xptxas=", 0) == 0 ? o.substr(8) : o);
  try {
    if (language == KernelLanguage::ptx)
      (void)assemble_ptx(reference.ptx, "option_check.ptx", given);
    else
      (void)compile_cuda(kEmpty, "option_check.cu", given);
  } catch (const CompileError& e) {
    std::string cause = e.log().empty() ? std::string(e.what()) : e.log();
    while (!cause.empty() && (cause.back() == '\n' || cause.back() == ' ')) cause.pop_back();
    throw UsageError(fmt::format("{}: the assembler refuses {}: {}", option, joined, cause));
  }
}

}  // namespace sparsecc
