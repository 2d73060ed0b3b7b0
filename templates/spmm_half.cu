// SpMM skeleton for 16-bit B and C (fp16 or bf16): C = A*B (+bias[row]) (ReLU) for one fixed sparse A.
// generator/emit/src/spmm_half_cuda.cpp fills it from an SpMM plan (sparsecc/plan/spmm_plan.hpp): the
// unrolled path (every nonzero of A outside the tensor-core tiles, straight-line code, each thread
// owning two adjacent columns of C) and the tensor-core fragments (mma.sync, fp32 accumulation).
// The default text between the markers is a valid example, so the file compiles on its own
// (nvcc -arch=sm_90 -c templates/spmm_half.cu). No CUDA headers: the 16-bit arithmetic is inline PTX,
// so NVRTC needs no include path.
//   BLOCK_X       threads per block (groups * N_TILE)
//   KERNEL_NAME   the extern "C" symbol the runtime looks up
//   N_TILE        threads per group; a group covers 2 * N_TILE columns
//   LD            the column count of B and C: the compiled N, or the argument n
//   BF16          0: fp16, 1: bf16
//   FRAGMENT_K    0 (no tensor-core fragments), 8 or 16 (mma.sync m16n8k8 / m16n8k16)
//   PAIR32        1 when the row pitch is a compiled even N (32-bit loads of B pairs), else 0
//   STAGE         float offset in dynamic shared memory of the warps' fragment stages
//   FRAGMENT_TABLE  the k of every fragment (a __device__ array), or nothing without fragments
//   BODY          one case per block row: accumulators, each group's steps, the fragments, then the
//                 epilogue (group reduction through shared memory, the fragment tile, bias, ReLU,
//                 rounding to 16 bits, stores)
// ABI: grid (ceil(n / (2 * N_TILE)), block rows), block (BLOCK_X), dynamic shared memory from the plan.
// B is K x n and C is M x n, row-major, 16-bit; bias and values are float32 (values: the weights,
// rounded to the dtype, of a streamed plan); fragments holds the packed tensor-core operands.
// Columns >= n neither load nor store; every thread reaches every barrier and every mma.
#define SPCC_BF16 /*@BF16*/0/*@end*/
#define SPCC_FRAGMENT_K /*@FRAGMENT_K*/8/*@end*/

typedef unsigned short spcc_u16;
typedef unsigned int spcc_u32;

// 16-bit value -> float (exact).
__device__ __forceinline__ float spcc_h2f(spcc_u32 h) {
#if SPCC_BF16
  return __uint_as_float(h << 16);
#else
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(static_cast<spcc_u16>(h)));
  return f;
#endif
}
__device__ __forceinline__ float spcc_lo(spcc_u32 x) { return spcc_h2f(x & 0xffffu); }
__device__ __forceinline__ float spcc_hi(spcc_u32 x) { return spcc_h2f(x >> 16); }

// Two floats -> a packed pair (lo in the low half), each rounded to nearest even.
__device__ __forceinline__ spcc_u32 spcc_pack(float lo, float hi) {
  spcc_u32 r;
#if SPCC_BF16
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#endif
  return r;
}

// d = a * b + c on both halves, rounded once (a product alone: c = -0 in both halves).
__device__ __forceinline__ spcc_u32 spcc_fma2(spcc_u32 a, spcc_u32 b, spcc_u32 c) {
  spcc_u32 d;
#if SPCC_BF16
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
#else
  asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
#endif
  return d;
}
#define SPCC_NEG0 0x80008000u

// The pair of B in row k (columns col, col + 1), without a branch: one 32-bit load when the row pitch
// is even (col is even, so the pair is aligned and col < n implies col + 1 < n), else two 16-bit loads,
// the second from b1 (col + 1, or col again at the last column of an odd n). Runtime-N kernels take
// the 16-bit form: their pitch is not known when compiling.
#if /*@PAIR32*/0/*@end*/
#define SPCC_LOAD(k) __ldg(reinterpret_cast<const spcc_u32*>(b + (k) * ld))
#else
#define SPCC_LOAD(k) \
  (static_cast<spcc_u32>(__ldg(b + (k) * ld)) | (static_cast<spcc_u32>(__ldg(b1 + (k) * ld)) << 16))
#endif

__device__ __forceinline__ void spcc_store_pair(spcc_u16* p, float v0, float v1, bool pair, bool live1) {
  const spcc_u32 r = spcc_pack(v0, v1);
  if (pair) {
    *reinterpret_cast<spcc_u32*>(p) = r;
  } else {
    p[0] = static_cast<spcc_u16>(r & 0xffffu);
    if (live1) p[1] = static_cast<spcc_u16>(r >> 16);
  }
}

#if SPCC_FRAGMENT_K
// The lane's view of the fragments, set up in each block row's case that has fragments (values held
// across the whole kernel were spilled by ptxas in kernels of hundreds of fragments): lane (g, q),
// its B pointer at row 2q of the warp's columns, the columns left from there, the warp's stage.
#define SPCC_FRAGMENT_SETUP                                                                        \
  const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;                                  \
  const long long warp_col = static_cast<long long>(blockIdx.x) * (2 * T) + 64 * (threadIdx.x >> 5); \
  const spcc_u16* bw = B + warp_col + g + 2 * q * ld;                                             \
  const long long wcols = ld - warp_col - g;                                                        \
  float* st = red + SPCC_STAGE + (threadIdx.x >> 5) * 16 * 72;
#define SPCC_STAGE /*@STAGE*/0/*@end*/

// One fragment times the warp's 64 columns of B: 8 mma.sync of m16n8k{FRAGMENT_K} into d[j] (columns
// 8j .. 8j + 7 of the warp). Lane (g = lane / 4, q = lane % 4) reads its operand words from `a`, and
// from B rows k0 + 2q, k0 + 2q + 1 (+ 8, + 9) of column warp_col + 8j + g; rows at or past `krows`
// (beyond K) read as zero, columns at or past `cols` (beyond n, counted from warp_col + g; cols - 1
// is column n - 1, at or after column 0 of B) as column n - 1.
__device__ __forceinline__ void spcc_fragment(float (&d)[8][4], const spcc_u32* a, const spcc_u16* bp,
                                              long long ld, long long cols, int krows, int q) {
#if SPCC_FRAGMENT_K == 8
  const uint2 av = __ldg(reinterpret_cast<const uint2*>(a));
#else
  const uint4 av = __ldg(reinterpret_cast<const uint4*>(a));
#endif
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    spcc_u32 b0 = 0;
#if SPCC_FRAGMENT_K == 16
    spcc_u32 b1 = 0;
#endif
    {
      // Columns past n read column n - 1 instead: finite values whose products only reach output
      // columns that are never stored. No predicate per column group, so nothing stays live across
      // the fragments of a block row (eight of them did not fit the predicate registers and spilled).
      const spcc_u16* p = bp + (8 * j < cols ? 8 * j : cols - 1);
      if (2 * q < krows) b0 = __ldg(p);
      if (2 * q + 1 < krows) b0 |= static_cast<spcc_u32>(__ldg(p + ld)) << 16;
#if SPCC_FRAGMENT_K == 16
      if (2 * q + 8 < krows) b1 = __ldg(p + 8 * ld);
      if (2 * q + 9 < krows) b1 |= static_cast<spcc_u32>(__ldg(p + 9 * ld)) << 16;
#endif
    }
#if SPCC_FRAGMENT_K == 8
#if SPCC_BF16
    asm("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
        : "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
        : "r"(av.x), "r"(av.y), "r"(b0));
#else
    asm("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
        : "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
        : "r"(av.x), "r"(av.y), "r"(b0));
#endif
#else
#if SPCC_BF16
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
        : "r"(av.x), "r"(av.y), "r"(av.z), "r"(av.w), "r"(b0), "r"(b1));
#else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
        : "r"(av.x), "r"(av.y), "r"(av.z), "r"(av.w), "r"(b0), "r"(b1));
#endif
#endif
  }
}

// Hands the warp's 16 x 64 tile to its lanes' column pairs: lane l then reads rows r at st[r * 72 + 2l].
__device__ __forceinline__ void spcc_stage(float* st, const float (&d)[8][4], int g, int q) {
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    *reinterpret_cast<float2*>(st + g * 72 + 8 * j + 2 * q) = make_float2(d[j][0], d[j][1]);
    *reinterpret_cast<float2*>(st + (g + 8) * 72 + 8 * j + 2 * q) = make_float2(d[j][2], d[j][3]);
  }
  __syncwarp();
}
#endif

// The column k of every fragment, in fragment order: block rows run a rolled loop over their
// fragments (straight-line fragments kept values live across hundreds of mma and ptxas spilled them).
/*@FRAGMENT_TABLE*/static __device__ const int spcc_fragment_k[] = {0};/*@end*/

extern "C" __global__ void __launch_bounds__(/*@BLOCK_X*/32/*@end*/)
/*@KERNEL_NAME*/sparsecc_spmm_half/*@end*/(const spcc_u16* __restrict__ B, spcc_u16* __restrict__ C,
                                          const float* __restrict__ bias, const float* __restrict__ values,
                                          int n, const spcc_u32* __restrict__ fragments) {
  constexpr int T = /*@N_TILE*/32/*@end*/;
  const long long ld = /*@LD*/n/*@end*/;
  const int t = threadIdx.x % T;
  const int group = threadIdx.x / T;
  const long long col = static_cast<long long>(blockIdx.x) * (2 * T) + 2 * t;
  const bool live = col < ld;
  const bool live1 = col + 1 < ld;
  const bool pair = live1 && ld % 2 == 0;
  const spcc_u16* b = B + col;
  const spcc_u16* b1 = live1 ? b + 1 : b;
  spcc_u16* c = C + col;
  extern __shared__ float red[];
  switch (blockIdx.y) {
/*@BODY*/
    case 0: {
      spcc_u32 x;
      float x0, x1, a0x = 0.0f, a0y = 0.0f;
      if (live && group == 0) {
        x = SPCC_LOAD(0); x0 = spcc_lo(x); x1 = spcc_hi(x);
        a0x = __fmul_rn(x0, 0x1p+0f); a0y = __fmul_rn(x1, 0x1p+0f);
      }
      {
#if SPCC_FRAGMENT_K
        SPCC_FRAGMENT_SETUP
        {
          float d[8][4] = {};
          for (int f = 0; f < 1; ++f)
            spcc_fragment(d, fragments + f * (8 * SPCC_FRAGMENT_K) + lane * (SPCC_FRAGMENT_K / 4),
                          bw + __ldg(spcc_fragment_k + f) * ld, ld, wcols, 1, q);
          spcc_stage(st, d, g, q);
        }
#endif
        if (live && group == 0) {
          float v0 = a0x, v1 = a0y;
#if SPCC_FRAGMENT_K
          v0 = __fadd_rn(v0, st[0 * 72 + 2 * lane]); v1 = __fadd_rn(v1, st[0 * 72 + 2 * lane + 1]);
#endif
          spcc_store_pair(c + 0 * ld, v0, v1, pair, live1);
        }
      }
      break;
    }
/*@end*/
  }
}
