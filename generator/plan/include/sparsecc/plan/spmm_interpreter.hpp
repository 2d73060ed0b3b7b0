// CPU interpreter of an SpMM plan: executes exactly what the emitted kernel executes, in float32 and
// in the same order, so CI can check every plan against the fp64 reference without a GPU.
#pragma once

#include <cstdint>
#include <vector>

#include "sparsecc/matrix/dense.hpp"
#include "sparsecc/plan/spmm_plan.hpp"

namespace sparsecc {

// C = A*B (+bias) (ReLU) as the kernel computes it. `values` is the kernel's value array from
// spmm_kernel_values (packed in streamed mode, CSR order in baked mode, the step table in rolled mode); B's
// entries and the bias are rounded to float32 first. Per (block row, group, column): the first FMA of an
// accumulator is a multiply, later ones fused multiply-adds, in step order; groups 1.. are added to group 0
// in group order; then the bias is added and ReLU (fmax with 0) applied. Throws UsageError when B has the
// wrong number of rows (or columns, in fixed-N mode) or the bias has the wrong size.
//
// Rolled plans: `values` is the step table (spmm_rolled_table), read through its header as the kernel
// reads it; every record is an FMA into every accumulator of the block row, from 0, in record order
// (a malformed table throws UsageError).
//
// Half plans: B's entries are rounded to the dtype; with f32 accumulation every product and sum is
// the kernel's (exact products of widened halves, fp32 FMAs); with accumulation in the dtype, every
// multiply and FMA is rounded once to the dtype, as f16x2 / bf16x2 arithmetic does. Fragments (the
// words of spmm_fragment_words) are added per fragment as an fp32 rounding of the exact sum of the
// fragment's products plus the running tile value: tensor cores sum in an unspecified order with
// at least fp32 precision, so GPU and interpreter agree to a few fp32 ulps there, not bit for bit.
// The epilogue is fp32: accumulator, other groups, tile, bias, ReLU, then one rounding to the dtype.
// Compressed plans: `fragments` is their stream (spmm_fragment_words), interpreted by
// interpret_spmm_compressed (sparsecc/plan/spmm_compressed.hpp); `values` is unused.
DenseMatrix interpret_spmm(const SpmmPlan& plan, const std::vector<float>& values, const DenseMatrix& b,
                           const std::vector<double>* bias = nullptr,
                           const std::vector<std::uint32_t>& fragments = {});

// A convolution plan (SpmmProblem::conv) on `batch` images X in its layout (float32): each image's
// im2col matrix through interpret_spmm, the result stored in the layout (batch x M x OH x OW). Throws
// UsageError for a plan without conv or an X of another size.
std::vector<float> interpret_conv(const SpmmPlan& plan, const std::vector<float>& values,
                                  const std::vector<float>& x, std::int64_t batch,
                                  const std::vector<double>* bias = nullptr);

}  // namespace sparsecc
