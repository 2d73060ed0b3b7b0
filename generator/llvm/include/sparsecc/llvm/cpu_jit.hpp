// CPU executors through LLVM: the IR text of a CPU SpMM plan (emit_spmm_llvm_ir) compiled in process
// by ORC's LLJIT for the plan's target, and run over the plan's panels on a caller-given number of
// threads. No LLVM type leaks out of this header.
#pragma once

#include <memory>
#include <string>

#include "sparsecc/plan/spmm_cpu_plan.hpp"

namespace sparsecc {

struct CpuCompileStats {
  double parse_seconds = 0;    // IR text -> module
  double codegen_seconds = 0;  // module -> machine code (the JIT's first lookup)
  std::size_t ir_bytes = 0;
};

class CpuSpmmKernel {
 public:
  // Compiles `ir` for plan.target at LLVM's code generation level `opt_level` (0..3). Throws
  // UsageError when this CPU cannot run the target's code (AVX-512 code on an AVX2 host) and
  // std::runtime_error carrying LLVM's message when the IR does not parse or compile.
  static CpuSpmmKernel compile(const std::string& ir, const SpmmCpuPlan& plan, int opt_level = 2);

  // C (M x N) = A * B (K x N) (+bias) (ReLU), row-major fp32; bias: M values when the plan has one.
  // threads: 0 takes the target's cores; the work items are the column tiles of every panel. Every
  // element of C is written.
  void run(const float* b, float* c, const float* bias, int threads = 0) const;

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
