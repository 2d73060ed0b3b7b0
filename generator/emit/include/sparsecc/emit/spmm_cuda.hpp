// CUDA C++ emitter for SpMM plans: renders templates/spmm_unrolled.cu into one SparseRT-style kernel
// with the plan's nonzeros unrolled into straight-line code. Baked mode writes every weight as an exact
// float literal (hex float, or __int_as_float for denormals); streamed mode reads values[p] with a
// compile-time index p into the packed value array. Rolled plans render templates/spmm_rolled.cu, a
// loop over the plan's step table (emit_spmm_rolled_cuda). Same plan and matrix, same bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sparsecc/emit/emitted_kernel.hpp"
#include "sparsecc/matrix/csr.hpp"
#include "sparsecc/plan/spmm_plan.hpp"

namespace sparsecc {

// Throws UsageError when the plan is not valid for `a` (check_plan) or the kernel name is not a C
// identifier.
// Half-precision plans (dtype f16 / bf16) render templates/spmm_half.cu (emit_spmm_half_cuda).
EmittedKernel emit_spmm_cuda(const SpmmPlan& plan, const CsrMatrix& a);
EmittedKernel emit_spmm_half_cuda(const SpmmPlan& plan, const CsrMatrix& a);
// Rolled plans (value mode rolled): the kernel and, as packed_values, the step table it reads.
EmittedKernel emit_spmm_rolled_cuda(const SpmmPlan& plan, const CsrMatrix& a);
// Compressed plans: the kernel (templates/spmm_compressed.cu) and, as fragment_words, the stream it
// reads (spmm_compressed_stream).
EmittedKernel emit_spmm_compressed_cuda(const SpmmPlan& plan, const CsrMatrix& a);

// A float32 value as an exact CUDA C++ expression ("0x1.8p+1f", "-0x0p+0f", "__int_as_float(0x1)").
std::string cuda_float_literal(float v);

// Convolution plans (SpmmPlan "Convolution"): the code that points a thread's b and c at its pixel (column
// `col` of the batch's n = images x N pixels) and sets `ldc` to Y's channel pitch; then, for kernels of at
// most kSpmmConvTapPointers taps, one pointer t<d> a tap d (its pixel's, or the zero buffer where it falls in
// the padding: the loads need no test), else `taps`, the mask of its taps inside the image (a load tests its
// bit).
std::string conv_setup(const SpmmPlan& plan);
// One pixel of conv_setup: from the column expression `col`, its image, position and window corner
// (names ending in `suffix`), b<suffix> and c<suffix> pointed at it, and either tap pointers to `element`
// (conv_tap_pointer) or the mask taps<suffix>.
std::string conv_pixel_setup(const SpmmPlan& plan, std::string_view col, std::string_view suffix,
                             bool tap_pointers, std::string_view element);
// The name of tap `tap`'s pointer for the pixel of `suffix`: t<tap>, or t<tap>_<suffix>.
std::string conv_tap_pointer(std::int64_t tap, std::string_view suffix);

}  // namespace sparsecc
