// Direct PTX emitter for SpMM plans (SparseRT's route around NVVM): writes the plan's kernel as PTX
// text, which the compile driver assembles to a cubin (assemble_ptx) in a fraction of NVRTC's time.
// The kernel has the same ABI, launch configuration and arithmetic as emit_spmm_cuda's, operation for
// operation (first touch of an accumulator a multiply, later ones fused multiply-adds, in step order;
// groups reduced in group order; bias add; ReLU as max with 0), so both emitters give the same bits.
//
// Shape of the text: the prologue computes the thread's column and base addresses, then jumps through
// a table (brx.idx) to the case of its block row; inside it a second table picks the thread group.
// B is read with ld.global.nc at immediate offsets from the thread's column (k * N * 4 bytes when N is
// fixed, one multiply-add per load when N is a kernel argument); baked weights are exact 32-bit
// immediates (0fXXXXXXXX), streamed ones ld.global.nc of values[p] at immediate offsets. Same plan and
// matrix, same bytes.
#pragma once

#include <string>

#include "sparsecc/emit/emitted_kernel.hpp"
#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/plan/spmm_plan.hpp"
#include "sparsecc/target/target.hpp"

namespace sparsecc {

// Kernels above this many instructions (B loads, value loads and FMAs) are emitted in the split
// layout (EmittedKernel::modules): every block row a function of its own, in modules of about
// kSpmmPtxModuleInstructions, so that assembly time stays linear in the number of nonzeros. One
// function's assembly time grows faster than linearly with its size: 52k nonzeros take 17 s inline
// against 4-7 s split on one core. The entry calls the case of its block row, one call per thread;
// the case functions never return and are assembled under a register cap (spmm_ptx_split_registers),
// so neither layout has a stack frame.
inline constexpr std::int64_t kSpmmPtxSplitInstructions = 64000;
// Runtime N computes an address per load; ptxas hoists those across a long function and spills, so
// runtime-N kernels split sooner.
inline constexpr std::int64_t kSpmmPtxRuntimeNSplitInstructions = 4000;
inline constexpr std::int64_t kSpmmPtxModuleInstructions = 30000;
// Entries of one jump table (.branchtargets); the entry dispatches longer grids in chunks of this many
// block rows (a power of two).
inline constexpr std::size_t kSpmmPtxJumpTableEntries = 4096;
// Registers the split layout's case functions get beyond the plan's cap: their seven parameters
// stay in registers where an entry reads its own from the constant bank. Measured on an H100 against
// the plan's cap itself (p07-p10, p19, p20 of the SparseRT suite): +32 was 1.14x faster in geomean
// (0.92-1.41x), +16 1.03x.
inline constexpr std::int32_t kSpmmPtxSplitExtraRegisters = 32;

// Whether emit_spmm_ptx writes the plan in the split layout: an unrolled fp32 plan above
// kSpmmPtxSplitInstructions (kSpmmPtxRuntimeNSplitInstructions for runtime N) instructions.
bool spmm_ptx_splits(const SpmmPlan& plan);

// The register cap of a split-layout kernel: the plan's cap plus kSpmmPtxSplitExtraRegisters, at most
// what lets a block of block_x threads fit the target's registers per block (64k; the linked kernel
// takes its largest case function's count), in steps of 8.
std::int32_t spmm_ptx_split_registers(const SpmmPlan& plan, const GpuTarget& target = default_gpu_target());

// The target sets the .target (its arch: sm_80 ... sm_120, sm_90a), the PTX ISA version (ptx_isa),
// whether programmatic plans wait and trigger (programmatic_launch) and the split layout's register
// cap (registers_per_block). Throws UsageError when the plan is not valid for `a`, the kernel name
// is not a C identifier or the target has no PTX ISA version.
EmittedKernel emit_spmm_ptx(const SpmmPlan& plan, const CsrMatrix& a,
                            const GpuTarget& target = default_gpu_target());

// A float32 value as an exact PTX immediate ("0f3F800000").
std::string ptx_float_literal(float v);

}  // namespace sparsecc

namespace sparsecc {

// The plan's kernel from the emitter `language` names (emit_spmm_ptx for `target`, or emit_spmm_cuda).
// Rolled plans always take emit_spmm_cuda (the kernel is a small loop; the result says which language).
EmittedKernel emit_spmm(const SpmmPlan& plan, const CsrMatrix& a, KernelLanguage language,
                        const GpuTarget& target = default_gpu_target());

}  // namespace sparsecc
