// The compile driver's CUDA C++ route: emitted source -> NVRTC (in process) -> cubin for the
// target architecture, plus PTX for drivers whose device differs. Works without a GPU.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace sparsecc {

struct CudaCompileOptions {
  std::string arch = "sm_90";           // real architecture for the cubin (sm_90, sm_90a, ...)
  std::vector<std::string> extra;       // further NVRTC options, e.g. "-DNAME=1"
  bool line_info = false;
};

struct CudaCompileResult {
  std::vector<unsigned char> cubin;  // machine code for `arch`
  std::string ptx;                   // PTX for the matching virtual architecture
  std::string log;                   // NVRTC's log (warnings) on success
  double seconds = 0;                // wall time of both compilations
};

class CompileError : public std::runtime_error {
 public:
  CompileError(const std::string& what, std::string log) : std::runtime_error(what), log_(std::move(log)) {}
  const std::string& log() const noexcept { return log_; }

 private:
  std::string log_;
};

// Throws CompileError (with NVRTC's log) when the source does not compile.
CudaCompileResult compile_cuda(const std::string& source, const std::string& name,
                               const CudaCompileOptions& options = {});


// "13.0" for the NVRTC library this process uses.
std::string nvrtc_version();

// Architectures NVRTC can target (e.g. "sm_75" ... "sm_120").
std::vector<std::string> nvrtc_architectures();

}  // namespace sparsecc
