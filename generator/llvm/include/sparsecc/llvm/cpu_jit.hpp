// CPU executors through LLVM: the IR text of a CPU SpMM plan (emit_spmm_llvm_ir) compiled in process
// by ORC's LLJIT for the plan's target, and run over the plan's panels on a caller-given number of
// threads. No LLVM type leaks out of this header.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sparsecc/llvm/cpu_compile.hpp"
#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/plan/spmm_cpu_plan.hpp"

namespace sparsecc {

// Modules a compile thread takes (emit_spmm_llvm_modules): more than one, so that the threads finish
// together. Evidence: docs/performance/2026-11-28-cpu-llvm.md#compile-time
inline constexpr int kCpuModulesPerThread = 4;

class CpuSpmmKernel {
 public:
  // Compiles `ir` for plan.target at LLVM's code generation level `opt_level` (0..3). Throws
  // UsageError when this CPU cannot run the target's code (AVX-512 code on an AVX2 host) and
  // std::runtime_error carrying LLVM's message when the IR does not parse or compile.
  static CpuSpmmKernel compile(const std::string& ir, const SpmmCpuPlan& plan, int opt_level = 2);
  // The modules of emit_spmm_llvm_modules, each parsed and compiled to an object file on one of
  // `threads` threads, then linked.
  static CpuSpmmKernel compile(const std::vector<std::string>& modules, const SpmmCpuPlan& plan,
                               int opt_level, int threads);
  // Object files of an executor whose entry is {symbol}_tile (compile_spmm_cpu's), linked in process:
  // the very code a deployment links.
  static CpuSpmmKernel link(std::vector<std::string> objects, const SpmmCpuPlan& plan,
                            const std::string& symbol);
  // Lowers `a` by `plan` into kCpuModulesPerThread modules a thread and compiles them on `threads`
  // threads (0: the target's cores).
  static CpuSpmmKernel build(const CsrMatrix& a, const SpmmCpuPlan& plan, int opt_level = 2, int threads = 0);

  // C (M x N) = A * B (K x N) (+bias) (ReLU), row-major fp32; bias: M values when the plan has one.
  // threads: 0 takes the target's cores; the work items are the column tiles of every panel. Every
  // element of C is written.
  void run(const float* b, float* c, const float* bias, int threads = 0) const;
  // The same for a half plan (dtype f16 or bf16): B and C hold the dtype's bits, the bias is fp32.
  // Each overload throws std::invalid_argument for a plan of the other kind.
  void run(const std::uint16_t* b, std::uint16_t* c, const float* bias, int threads = 0) const;

  const CpuCompileStats& stats() const;

  CpuSpmmKernel(CpuSpmmKernel&&) noexcept;
  CpuSpmmKernel& operator=(CpuSpmmKernel&&) noexcept;
  ~CpuSpmmKernel();

 private:
  struct Impl;
  explicit CpuSpmmKernel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sparsecc
