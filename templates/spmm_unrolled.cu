// SpMM skeleton, SparseRT style: C = A*B (+bias[row]) (ReLU) for one fixed sparse A whose nonzeros are
// unrolled into straight-line code (generator/emit/src/spmm_cuda.cpp fills it from an SpMM plan).
// The default text between the markers is a valid 1x1 example, so the file compiles on its own
// (nvcc -arch=sm_90 -c templates/spmm_unrolled.cu).
//   BLOCK_X       threads per block (groups * N_TILE)
//   KERNEL_NAME   the extern "C" symbol the runtime looks up
//   N_TILE        threads per group
//   COLS          output columns a thread computes: 1, or 2 adjacent ones (a compiled even N; B and
//                 C 8-byte aligned: one float2 load of B a step, one float2 store a row)
//   LD            the column count of B and C: the compiled N, or the argument n
//   PROGRAMMATIC  programmatic plans: true (see below)
//   CONV          `ldc`, C's row pitch (ld); convolutions: the pixel's pointers, tap pointers or mask
//   CONV_PARAMS   convolutions: the zero buffer (kConvParams)
//   BODY          one case per block row, self-contained: accumulators (one float per row and
//                 column, indexed only by name), each group's steps, then the epilogue (group
//                 reduction through shared memory, bias, ReLU, stores); staged steps copy B to
//                 shared memory with cp.async from `stage` and read it back from `red`; the
//                 block rows without nonzeros share a `default:` that finds their rows from
//                 blockIdx.y (spmm_plain_empty_block)
// ABI: grid (ceil(n / (COLS N_TILE)), block rows), block (BLOCK_X), dynamic shared memory from the plan:
// column tiles along x, so that consecutive blocks run the same block row's code.
// Columns >= n neither load nor store but reach every __syncthreads().
// Programmatic plans (programmatic dependent launch, sm_90 on): the kernel waits for the grid it
// depends on before it reads B or writes C; where the plan asks for the trigger, every epilogue
// starts by letting the next grid launch early (its blocks then wait in their own prologue). Under a
// plain launch both are no-ops.
static __device__ __forceinline__ void sparsecc_wait_for_predecessor() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
static __device__ __forceinline__ void sparsecc_launch_dependents() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
extern "C" __global__ void __launch_bounds__(/*@BLOCK_X*/32/*@end*/)
/*@KERNEL_NAME*/sparsecc_spmm/*@end*/(const float* __restrict__ B, float* __restrict__ C,
                                     const float* __restrict__ bias, const float* __restrict__ values,
                                     int n/*@CONV_PARAMS*//*@end*/) {
  constexpr int T = /*@N_TILE*/32/*@end*/;
  constexpr int CPT = /*@COLS*/1/*@end*/;
  const long long ld = /*@LD*/n/*@end*/;
  const int t = threadIdx.x % T;
  const int group = threadIdx.x / T;
  const long long col = (static_cast<long long>(blockIdx.x) * T + t) * CPT;
  const bool live = col < ld;
  const float* b = B + col;
  float* c = C + col;
  // C's row pitch; convolutions (SpmmPlan "Convolution") also move b and c to the thread's pixel
  // (column col of the batch's n pixels) and set `taps`, its taps inside the image (a load of tap d
  // reads only where bit d is set).
/*@CONV*/
  const long long ldc = ld;
/*@end*/
  extern __shared__ float red[];
  // Staged steps: the shared-memory address of the thread's slot 0, less the plan's stage offset.
  [[maybe_unused]] const unsigned stage = static_cast<unsigned>(__cvta_generic_to_shared(red)) + threadIdx.x * 4u * CPT;
  if (/*@PROGRAMMATIC*/ true /*@end*/) sparsecc_wait_for_predecessor();
  switch (blockIdx.y) {
/*@BODY*/
    case 0: {
      float x, a0 = 0.0f;
      if (live && group == 0) {
        x = __ldg(b + 0 * ld); a0 = __fmul_rn(x, 0x1p+0f);
      }
      sparsecc_launch_dependents();
      if (live && group == 0) {
        c[0 * ldc] = a0;
      }
      break;
    }
/*@end*/
  }
}
