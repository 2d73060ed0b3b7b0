// SpMM skeleton, vector layout: C = A B (+bias[row]) (ReLU) in fp16 or bf16 for one fixed sparse A at a
// fixed N of 1..16, on the CUDA cores (the 16-bit products are exact in fp32; sums in fp32). A is a vector
// stream (runtime/include/sparsecc/runtime/compressed_stream.hpp): a row table, then every row's entries
// value << 16 | column. The code does not grow with A; generator/emit/src/spmm_compressed_cuda.cpp
// fills the shape in from a compressed plan of the vector layout. The defaults between the markers make
// a valid example, so the file compiles on its own (nvcc -arch=sm_90 -c templates/spmm_vector.cu). No
// CUDA headers (inline PTX).
//   KERNEL_NAME   the extern "C" symbol the runtime looks up
//   BF16          0: fp16, 1: bf16
//   N             the columns of B and C (1..16; B is K x N and C M x N, rows contiguous)
//   WARPS         warps a block
//   ROWS          rows a block (a multiple of WARPS): warp w takes rows w, w + WARPS, .. of its block's
//   M             the rows of A
//   UNROLL        16-byte pieces a lane loads before it uses the first (the loads it has in flight)
//   BIAS, RELU    the epilogue; PROGRAMMATIC: wait for the grid this one depends on before B and C
// A warp reads its row's entries in aligned 16-byte pieces of four (lane l takes the pieces l, l + 32,
// .. from the row's first piece; entries of a piece outside the row are skipped), loads the entries'
// rows of B through the read-only cache (16-byte vectors where N is a multiple of 8, 8-byte ones where it
// is 4, 4-byte words where it is even, 2-byte values where it is odd; at N = 16 two groups of 16 lanes
// take 8 columns each, so that a row is one load), adds the products in fp32 (N / groups sums a lane),
// then the warp adds its lanes' sums: halving exchanges leave each column's sum with 32 / P lanes (P: N
// rounded up to a power of two), a butterfly finishes it, and the first of those lanes adds the bias,
// applies ReLU, rounds once and stores.
// ABI: grid (1, ceil(M / ROWS)), block (32 * WARPS), no shared memory; B and C 16-bit, aligned to 16
// bytes where N is a multiple of 8, 8 where N is 4, else 4; `stream` is the fragments argument.
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

// A row of B, read through the read-only cache: W 32-bit words (the N 16-bit values, two a word; an odd
// N's last word holds one).
template <int N>
static __device__ __forceinline__ void spcc_b_row(const spcc_u16* p, spcc_u32 (&w)[(N + 1) / 2]) {
  if constexpr (N % 8 == 0) {
#pragma unroll
    for (int v = 0; v < N / 8; ++v)
      asm("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];"
          : "=r"(w[4 * v]), "=r"(w[4 * v + 1]), "=r"(w[4 * v + 2]), "=r"(w[4 * v + 3])
          : "l"(p + 8 * v));
  } else if constexpr (N == 4) {
    asm("ld.global.nc.v2.u32 {%0,%1}, [%2];" : "=r"(w[0]), "=r"(w[1]) : "l"(p));
  } else if constexpr (N % 2 == 0) {
#pragma unroll
    for (int v = 0; v < N / 2; ++v) asm("ld.global.nc.u32 %0, [%1];" : "=r"(w[v]) : "l"(p + 2 * v));
  } else {
#pragma unroll
    for (int v = 0; v < N; ++v) {
      unsigned short h;
      asm("ld.global.nc.u16 %0, [%1];" : "=h"(h) : "l"(p + v));
      if (v % 2 == 0)
        w[v / 2] = h;
      else
        w[v / 2] |= spcc_u32{h} << 16;
    }
  }
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
  constexpr int N = /*@N*/1/*@end*/;
  constexpr int W = /*@WARPS*/16/*@end*/;
  constexpr int ROWS = /*@ROWS*/16/*@end*/;
  constexpr long long M = /*@M*/64/*@end*/;
  constexpr int U = /*@UNROLL*/4/*@end*/;
  constexpr long long DATA = (M + 1 + 3) / 4 * 4;
  // G groups of L lanes: group g takes columns g * NG .. + NG of every entry's row of B, so that the
  // whole row (one 32-byte sector at N = 16) is read by one instruction.
  constexpr int G = N % 8 == 0 ? N / 8 : 1;
  constexpr int NG = N / G, L = 32 / G, LB = G == 1 ? 5 : G == 2 ? 4 : 3;
  constexpr int WORDS = (NG + 1) / 2;
  constexpr int LOG = NG <= 1 ? 0 : NG <= 2 ? 1 : NG <= 4 ? 2 : NG <= 8 ? 3 : 4;
  constexpr int P = 1 << LOG;
  static_assert(N >= 1 && N <= 16, "N is 1..16");
  static_assert(ROWS % W == 0, "whole rows a warp");
  static_assert(1 << LB == L && LOG <= LB, "lanes a group");
  (void)values;
  (void)n;
  if (/*@PROGRAMMATIC*/ true /*@end*/) spcc_wait_for_predecessor();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> LB, sub = lane & (L - 1);
  const spcc_u32* data = stream + DATA;
  const spcc_u16* bg = B + g * NG;
  const long long first = static_cast<long long>(blockIdx.y) * ROWS;
  const long long last = first + ROWS < M ? first + ROWS : M;
  for (long long row = first + warp; row < last; row += W) {
    const spcc_u32 begin = stream[row], end = stream[row + 1];
    float acc[P];
#pragma unroll
    for (int c = 0; c < P; ++c) acc[c] = 0.f;
    for (spcc_u32 at = (begin & ~3u) + 4u * sub; at < end; at += 4u * L * U) {
      uint4 q[U];
#pragma unroll
      for (int u = 0; u < U; ++u)
        q[u] = at + 4u * L * u < end ? spcc_entries(data + at + 4u * L * u) : make_uint4(0u, 0u, 0u, 0u);
      // The entries' rows of B (column 0's for entries outside the row: in bounds, then zeroed).
      spcc_u32 bw[U][4][WORDS];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const spcc_u32 e[4] = {q[u].x, q[u].y, q[u].z, q[u].w};
#pragma unroll
        for (int j = 0; j < 4; ++j) spcc_b_row<NG>(bg + static_cast<long long>(e[j] & 0xffffu) * N, bw[u][j]);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const spcc_u32 e[4] = {q[u].x, q[u].y, q[u].z, q[u].w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const spcc_u32 i = at + 4u * L * u + j;
          const bool in = i >= begin && i < end;
          const float a = in ? spcc_float(e[j] >> 16) : 0.f;
#pragma unroll
          for (int w = 0; w < WORDS; ++w) bw[u][j][w] = in ? bw[u][j][w] : 0u;
#pragma unroll
          for (int c = 0; c < NG; ++c)
            acc[c] = fmaf(a, spcc_float(c % 2 ? bw[u][j][c / 2] >> 16 : bw[u][j][c / 2] & 0xffffu), acc[c]);
        }
      }
    }
    // Halving exchanges inside a group: after step s a lane keeps P >> (s + 1) sums, those of the
    // columns whose bits (from the top) are its bits LB - 1, LB - 2, .. of `sub`; a butterfly over the
    // remaining bits finishes them, and column g * NG + c's sum ends with lanes c << (LB - LOG) .. of g.
#pragma unroll
    for (int s = 0; s < LOG; ++s) {
      const int o = (L >> 1) >> s, h = P >> (s + 1);
      const bool up = (sub & o) != 0;
#pragma unroll
      for (int j = 0; j < h; ++j) {
        const float send = up ? acc[j] : acc[j + h], keep = up ? acc[j + h] : acc[j];
        acc[j] = keep + __shfl_xor_sync(0xffffffffu, send, o);
      }
    }
#pragma unroll
    for (int o = (L >> 1) >> LOG; o > 0; o >>= 1) acc[0] += __shfl_xor_sync(0xffffffffu, acc[0], o);
    const int col = g * NG + (sub >> (LB - LOG));
    if ((sub & ((L >> LOG) - 1)) == 0 && col < N) {
      float v = acc[0];
      if (/*@BIAS*/ false /*@end*/) v += bias[row];
      if (/*@RELU*/ false /*@end*/) v = fmaxf(v, 0.f);
      C[row * N + col] = spcc_round(v);
    }
  }
}
