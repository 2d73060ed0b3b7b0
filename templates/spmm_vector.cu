// SpMM skeleton, vector layout: y = A x (+bias[row]) (ReLU) in fp16 or bf16 for one fixed sparse A at
// N = 1, on the CUDA cores (the 16-bit products are exact in fp32; sums in fp32). A is a vector stream
// (runtime/include/sparsecc/runtime/compressed_stream.hpp): a row table, then every row's entries
// value << 16 | column. The code does not grow with A; generator/emit/src/spmm_compressed_cuda.cpp
// fills the shape in from a compressed plan of the vector layout. The defaults between the markers make
// a valid example, so the file compiles on its own (nvcc -arch=sm_90 -c templates/spmm_vector.cu). No
// CUDA headers (inline PTX).
//   KERNEL_NAME   the extern "C" symbol the runtime looks up
//   BF16          0: fp16, 1: bf16
//   WARPS         warps a block
//   ROWS          rows a block (a multiple of WARPS): warp w takes rows w, w + WARPS, .. of its block's
//   M             the rows of A
//   UNROLL        16-byte pieces a lane loads before it uses the first (the loads it has in flight)
//   BIAS, RELU    the epilogue; PROGRAMMATIC: wait for the grid this one depends on before B and C
// A warp reads its row's entries in aligned 16-byte pieces of four (lane l takes the pieces l, l + 32,
// .. from the row's first piece; entries of a piece outside the row are skipped), looks x up through
// the read-only cache, adds the products in fp32, then the warp adds its lanes' sums (a butterfly of
// shuffles) and lane 0 adds the bias, applies ReLU, rounds once and stores.
// ABI: grid (1, ceil(M / ROWS)), block (32 * WARPS), no shared memory; B (K x 1) and C (M x 1)
// 16-bit; `stream` is the fragments argument.
#define SPCC_BF16 /*@BF16*/0/*@end*/

typedef unsigned short spcc_u16;
typedef unsigned int spcc_u32;

static __device__ __forceinline__ void spcc_wait_for_predecessor() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// A 16-bit value of the dtype, widened exactly.
static __device__ __forceinline__ float spcc_float(spcc_u32 h) {
#if SPCC_BF16
  return __uint_as_float(h << 16);
#else
  float f;
  asm("{ .reg .b16 t; cvt.u16.u32 t, %1; cvt.f32.f16 %0, t; }" : "=f"(f) : "r"(h));
  return f;
#endif
}

// Four entries of the stream, read once: no line of them is kept in L1 (x is).
static __device__ __forceinline__ uint4 spcc_entries(const spcc_u32* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

static __device__ __forceinline__ spcc_u32 spcc_x(const spcc_u16* p) {
  unsigned short v;
  asm("ld.global.nc.u16 %0, [%1];" : "=h"(v) : "l"(p));
  return v;
}

// A float rounded to nearest even in the dtype, as its 16 bits.
static __device__ __forceinline__ spcc_u16 spcc_round(float v) {
  spcc_u32 r;
#if SPCC_BF16
  asm("cvt.rn.bf16x2.f32 %0, %1, %1;" : "=r"(r) : "f"(v));
#else
  asm("cvt.rn.f16x2.f32 %0, %1, %1;" : "=r"(r) : "f"(v));
#endif
  return static_cast<spcc_u16>(r & 0xffffu);
}

extern "C" __global__ void __launch_bounds__(32 * /*@WARPS*/16/*@end*/)
/*@KERNEL_NAME*/sparsecc_spmm/*@end*/(const spcc_u16* __restrict__ B, spcc_u16* __restrict__ C,
                                     const float* __restrict__ bias, const float* __restrict__ values,
                                     int n, const spcc_u32* __restrict__ stream) {
  constexpr int W = /*@WARPS*/16/*@end*/;
  constexpr int ROWS = /*@ROWS*/16/*@end*/;
  constexpr long long M = /*@M*/64/*@end*/;
  constexpr int U = /*@UNROLL*/4/*@end*/;
  constexpr long long DATA = (M + 1 + 3) / 4 * 4;
  static_assert(ROWS % W == 0, "whole rows a warp");
  (void)values;
  (void)n;
  if (/*@PROGRAMMATIC*/ true /*@end*/) spcc_wait_for_predecessor();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const spcc_u32* data = stream + DATA;
  const long long first = static_cast<long long>(blockIdx.y) * ROWS;
  const long long last = first + ROWS < M ? first + ROWS : M;
  for (long long row = first + warp; row < last; row += W) {
    const spcc_u32 begin = stream[row], end = stream[row + 1];
    float acc = 0.f;
    for (spcc_u32 at = (begin & ~3u) + 4u * lane; at < end; at += 128u * U) {
      uint4 q[U];
#pragma unroll
      for (int u = 0; u < U; ++u)
        q[u] = at + 128u * u < end ? spcc_entries(data + at + 128u * u) : make_uint4(0u, 0u, 0u, 0u);
      spcc_u32 xv[U][4];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const spcc_u32 e[4] = {q[u].x, q[u].y, q[u].z, q[u].w};
#pragma unroll
        for (int j = 0; j < 4; ++j) xv[u][j] = spcc_x(B + (e[j] & 0xffffu));
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const spcc_u32 e[4] = {q[u].x, q[u].y, q[u].z, q[u].w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const spcc_u32 i = at + 128u * u + j;
          const bool in = i >= begin && i < end;
          acc = fmaf(in ? spcc_float(e[j] >> 16) : 0.f, in ? spcc_float(xv[u][j]) : 0.f, acc);
        }
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) {
      if (/*@BIAS*/ false /*@end*/) acc += bias[row];
      if (/*@RELU*/ false /*@end*/) acc = fmaxf(acc, 0.f);
      C[row] = spcc_round(acc);
    }
  }
}
