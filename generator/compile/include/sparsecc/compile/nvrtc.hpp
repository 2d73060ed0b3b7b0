// The compile driver's CUDA C++ route: emitted source -> NVRTC (in process, once, for the real
// architecture) -> cubin, plus the PTX NVRTC handed ptxas, for drivers whose device differs. And
// PTX -> cubin through nvJitLink (assemble_ptx) for PTX made elsewhere. Works without a GPU.
#pragma once

#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace sparsecc {

struct CudaCompileOptions {
  std::string arch = "sm_90";  // real architecture for the cubin (sm_90, sm_90a, ...)
  // Further NVRTC options, e.g. "-DNAME=1". nvJitLink's spelling -Xptxas=X is accepted too. In
  // assemble_ptx only the ptxas ones apply ("--ptxas-options=X" or "-Xptxas=X",
  // "-maxrregcount=N" or "--maxrregcount=N"); the rest are ignored.
  std::vector<std::string> extra;
  bool line_info = false;
  // assemble_ptx_modules: modules assembled at once, each to relocatable code on its own thread,
  // before one link; 0: one per hardware thread.
  unsigned threads = 0;
};

struct CudaCompileResult {
  std::vector<unsigned char> cubin;  // machine code for `arch`
  std::string ptx;                   // PTX for the matching virtual architecture
  std::string log;                   // NVRTC's log (compile_cuda) or nvJitLink's info log (assemble_ptx):
                                     // warnings, and the ptxas report when asked for (kPtxasVerbose)
  double seconds = 0;                // wall time of the whole route
  double ptx_seconds = 0;            // NVRTC (source -> PTX -> cubin in one call); 0 in assemble_ptx
  double cubin_seconds = 0;          // nvJitLink (PTX -> cubin); 0 in compile_cuda
};

class CompileError : public std::runtime_error {
 public:
  CompileError(const std::string& what, std::string log) : std::runtime_error(what), log_(std::move(log)) {}
  const std::string& log() const noexcept { return log_; }

 private:
  std::string log_;
};

// Source -> PTX -> cubin for options.arch in one NVRTC compilation (ptxas in whole-program mode).
// Throws CompileError (with NVRTC's log) when the source does not compile, and
// std::invalid_argument when options.arch is not a real architecture this toolkit knows.
CudaCompileResult compile_cuda(const std::string& source, const std::string& name,
                               const CudaCompileOptions& options = {});

// PTX -> cubin for options.arch through nvJitLink; `name` labels the input in logs and errors. The
// result's ptx is the input. Throws CompileError (with nvJitLink's logs) or std::invalid_argument.
// nvJitLink assembles PTX as relocatable code (ptxas -c), which can take more registers than
// compile_cuda's whole-program ptxas for the same PTX (47 against 32 on a small unrolled SpMM).
CudaCompileResult assemble_ptx(const std::string& ptx, const std::string& name,
                               const CudaCompileOptions& options = {});

// Several PTX modules (one entry, the functions it calls in the others) assembled separately (in
// parallel, options.threads at a time, each by nvJitLink to relocatable code) and linked into one
// cubin by nvJitLink; `whole` (the same program as one module) becomes the result's
// ptx. Throws like assemble_ptx, and std::invalid_argument when `modules` is empty.
CudaCompileResult assemble_ptx_modules(const std::vector<std::string>& modules, const std::string& whole,
                                       const std::string& name, const CudaCompileOptions& options = {});

// The sections of an ELF64 file such as a cubin, by name (contents; empty for NOBITS sections);
// empty when the bytes are not a well-formed ELF64 file.
std::map<std::string, std::vector<unsigned char>> elf_sections(std::span<const unsigned char> elf);

// "13.0" for the NVRTC library this process uses.
std::string nvrtc_version();

// Architectures NVRTC can target (e.g. "sm_75" ... "sm_120").
std::vector<std::string> nvrtc_architectures();

}  // namespace sparsecc
