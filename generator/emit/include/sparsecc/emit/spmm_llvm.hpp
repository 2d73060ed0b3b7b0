// The LLVM emitter of CPU SpMM plans (sparsecc/plan/spmm_cpu_plan.hpp): textual LLVM IR (LLVM 14,
// typed pointers), one function a panel and column width; straight-line plans have the pattern and
// the values baked in: for each row, for each of its nonzeros (in order), one fused multiply-add a
// vector of the row's accumulators (explicit <lanes x float> vectors, a narrower one for the last
// columns), the B offsets as constants, the value as a splatted constant; then bias and ReLU, and
// the stores. Rolled plans (SpmmCpuPlan::rolled) loop over the rows and their nonzeros instead,
// reading columns and values from the module's tables: the same fused multiply-adds in the same
// order. The compile stage (sparsecc/llvm) turns the text into machine code.
//
// Entry point of the module, for the runner, named by a symbol prefix (unique per executor, so that
// several link into one program; the panels are hidden {prefix}_panel_{q}_{full|rest}):
//   void {prefix}_tile(i64 panel, i64 col, i32 full, const float* B, float* C, const float* bias)
// computes C's rows of `panel` over columns [col, col + width), width the plan's column_tile when
// `full` is 1 and N mod column_tile otherwise. B is K x N, C M x N, row-major fp32. Half plans (dtype
// f16 or bf16) take B and C as i16* (uint16_t: the dtype's bits) and the bias as fp32:
//   void {prefix}_tile(i64 panel, i64 col, i32 full, const i16* B, i16* C, const float* bias)
// B's vectors widened to fp32 (f16: fpext, which x86 selects as vcvtph2ps, F16C or AVX-512; bf16: a
// zero extension shifted into the upper half), the same fp32 fused multiply-adds, bias and ReLU, and
// C rounded to the dtype once (f16: fptrunc, vcvtps2ph; bf16: round to nearest even in integer
// operations on every target, a NaN stored as the quiet NaN of its sign).
#pragma once

#include <string>
#include <vector>

#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/plan/spmm_cpu_plan.hpp"

namespace sparsecc {

inline constexpr const char* kCpuSpmmPrefix = "sparsecc_cpu";
inline constexpr const char* kCpuTileSymbol = "sparsecc_cpu_tile";  // the default prefix's entry

// Throws UsageError for a plan check_cpu_plan refuses.
std::string emit_spmm_llvm_ir(const SpmmCpuPlan& plan, const CsrMatrix& a,
                              const std::string& prefix = kCpuSpmmPrefix);
// The same code as `modules` IR modules (at most one a panel), compiled apart and linked by name:
// module i defines the panels of its share (consecutive panels, their values in a table of its own),
// the last one also the entry point, which calls the others' panels by their external names
// {prefix}_panel_{q}_full / _rest. Code generation grows faster than linearly in a module's size, and
// modules compile in parallel.
std::vector<std::string> emit_spmm_llvm_modules(const SpmmCpuPlan& plan, const CsrMatrix& a,
                                                std::int64_t modules,
                                                const std::string& prefix = kCpuSpmmPrefix);

}  // namespace sparsecc
