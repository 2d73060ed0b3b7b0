// The CPU Hines executor through LLVM: the IR of a CPU Hines plan (emit_hines_llvm_modules) compiled
// to objects (compile_cpu_objects) and linked in process (CpuJit), and run over the plan's groups on
// a caller-given number of threads. The plan is all the code needs: the matrix values are the run's
// arguments. No LLVM type leaks out of this header.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sparsecc/llvm/cpu_compile.hpp"
#include "sparsecc/plan/hines_cpu_plan.hpp"

namespace sparsecc {

class CpuHinesKernel {
 public:
  // Parses and compiles `modules` (emit_hines_llvm_modules with `prefix`) on `threads` threads at
  // LLVM's code generation level `opt_level` (0..3), then links them. Throws UsageError when this CPU
  // cannot run the target's code (AVX-512 code on an AVX2 host) or the plan does not hold, and
  // std::runtime_error carrying LLVM's message when a module does not parse or compile.
  static CpuHinesKernel compile(const std::vector<std::string>& modules, const HinesCpuPlan& plan,
                                int opt_level, int threads, const std::string& prefix);
  // Object files whose entry is {prefix}_solve (compile_hines_cpu's), linked in process: the very
  // code a deployment links.
  static CpuHinesKernel link(std::vector<std::string> objects, const HinesCpuPlan& plan,
                             const std::string& prefix);
  // Lowers the plan into kCpuModulesPerThread modules a thread and compiles them on `threads`
  // threads (0: the target's cores).
  static CpuHinesKernel build(const HinesCpuPlan& plan, int opt_level = 2, int threads = 0);

  // One step: every group solved, on `threads` threads (0: the target's cores). Arrays in the plan's
  // row order (HinesCpuPlan::permutation), T the plan's dtype: d, u, l rows values; b, x rows x R
  // row-major; x may equal b. The workspace is the kernel's, so steps must not overlap. Throws
  // UsageError for a T that is not the plan's dtype, std::invalid_argument for a null pointer.
  void run(const double* d, const double* u, const double* l, const double* b, double* x, int threads = 0);
  void run(const float* d, const float* u, const float* l, const float* b, float* x, int threads = 0);

  const HinesCpuPlan& plan() const;
  const CpuCompileStats& stats() const;

  CpuHinesKernel(CpuHinesKernel&&) noexcept;
  CpuHinesKernel& operator=(CpuHinesKernel&&) noexcept;
  ~CpuHinesKernel();

 private:
  struct Impl;
  explicit CpuHinesKernel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sparsecc
