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
//   VEC8          1 when the row pitch is a compiled N divisible by 8: fragments load B rows as 16-byte
//                 vectors and block rows without unrolled nonzeros store their tile directly
//   STAGE         float offset in dynamic shared memory of the warps' fragment stages (plans whose
//                 block rows all store their tiles straight to C have none: 0, never dereferenced)
//   FRAGMENT_TABLE  the k of every fragment (a __device__ array), or nothing without fragments
//   PROGRAMMATIC  programmatic plans: true (the kernel waits for the grid it depends on, sm_90 on, before
//                 it reads B or writes C; it never lets the next grid launch early; under a plain
//                 launch the wait is a no-op)
//   CONV          1 for a convolution (SpmmProblem::conv): the columns are the batch's pixels, the
//                 pair's two pixels are read through their own tap pointers or window corners and taps
//                 masks and stored through their own pointers (CONV_SETUP), else 0
//   CONV_SETUP    convolutions: ldc (Y's channel pitch), each pixel's window corner (b, b1), output
//                 pointer (c, c1) and, up to 9 taps, a pointer a tap (t<d>, t<d>_1: the zero buffer in
//                 the padding), else a mask of the taps inside the image (taps, taps1); else nothing
//   BODY          one case per block row: accumulators, each group's steps, each group's share of the
//                 fragments, then the epilogue (group reduction through shared memory, the groups'
//                 fragment tiles, bias, ReLU, rounding to 16 bits, stores); the block rows
//                 without nonzeros share a `default:` that finds their rows from blockIdx.y
// ABI: grid (ceil(n / (2 * N_TILE)), block rows), block (BLOCK_X), dynamic shared memory from the plan.
// B is K x n and C is M x n, row-major, 16-bit; bias and values are float32 (values: the weights,
// rounded to the dtype, of a streamed plan); fragments holds the packed tensor-core operands.
// Convolutions: B is X and C is Y (NCHW or NHWC), n the batch's pixels; the last parameter is then the
// runtime's zero buffer (kConvParams), where the tap pointers in the padding point.
// Columns >= n neither load nor store; every thread reaches every barrier and every mma.
#define SPCC_BF16 /*@BF16*/0/*@end*/
#define SPCC_FRAGMENT_K /*@FRAGMENT_K*/8/*@end*/
#define SPCC_VEC8 /*@VEC8*/0/*@end*/
#define SPCC_CONV /*@CONV*/0/*@end*/

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

#if SPCC_CONV
// A convolution's pair of X values for one filter column: the column's channel and tap at `offset` from
// each pixel's window corner, 0 where the tap lies in the padding (its bit clear in the pixel's mask).
__device__ __forceinline__ spcc_u32 spcc_conv_pair(const spcc_u16* b, const spcc_u16* b1,
                                                   unsigned long long taps0, unsigned long long taps1,
                                                   unsigned long long bit, long long offset) {
  const spcc_u32 lo = (taps0 & bit) ? static_cast<spcc_u32>(__ldg(b + offset)) : 0u;
  const spcc_u32 hi = (taps1 & bit) ? static_cast<spcc_u32>(__ldg(b1 + offset)) : 0u;
  return lo | (hi << 16);
}

// The same through a tap pointer a pixel (at the pixel's tap, or at the zero buffer in the padding).
__device__ __forceinline__ spcc_u32 spcc_conv_pair_at(const spcc_u16* p0, const spcc_u16* p1) {
  return static_cast<spcc_u32>(__ldg(p0)) | (static_cast<spcc_u32>(__ldg(p1)) << 16);
}

// A convolution's pair of outputs: two pixels, each through its own pointer (the second only when live).
__device__ __forceinline__ void spcc_store_conv(spcc_u16* p, spcc_u16* p1, float v0, float v1, bool live1) {
  const spcc_u32 r = spcc_pack(v0, v1);
  p[0] = static_cast<spcc_u16>(r & 0xffffu);
  if (live1) p1[0] = static_cast<spcc_u16>(r >> 16);
}
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
// across the whole kernel were spilled by ptxas in kernels of hundreds of fragments): lane (g, q), the
// first of the warp's 64 columns (warps of every group cover the same columns), its B pointer, the
// columns left from there, the warp's stage. The 16-byte path reads the 8 columns from SPCC_VCOL(g) of
// the warp (the last 8 columns of B where those lie past n) at row 2q; the scalar path column g at
// row 2q.
#if SPCC_VEC8
#define SPCC_VCOL(g) (8 * (((g) >> 1) + 4 * ((g) & 1)))
#define SPCC_FRAGMENT_SETUP                                                                        \
  const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;                                  \
  const long long warp_col = static_cast<long long>(blockIdx.x) * (2 * T) + 64 * (t >> 5);         \
  const long long wcols = ld - warp_col;                                                            \
  const spcc_u16* bw = B + (SPCC_VCOL(g) < wcols ? warp_col + SPCC_VCOL(g) : ld - 8) + 2 * q * ld; \
  float* st = red + SPCC_STAGE + (threadIdx.x >> 5) * 16 * 72;
#else
#define SPCC_FRAGMENT_SETUP                                                                        \
  const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;                                  \
  const long long warp_col = static_cast<long long>(blockIdx.x) * (2 * T) + 64 * (t >> 5);         \
  const spcc_u16* bw = B + warp_col + g + 2 * q * ld;                                             \
  const long long wcols = ld - warp_col - g;                                                        \
  float* st = red + SPCC_STAGE + (threadIdx.x >> 5) * 16 * 72;
#endif
#define SPCC_STAGE /*@STAGE*/0/*@end*/
// Floats between the stages of warp w of group i and of group i + 1.
#define SPCC_GROUP_STAGE ((T / 32) * 16 * 72)

// One m16n8k{FRAGMENT_K} mma.sync with fp32 accumulation into d (a: the lane's A words, b0/b1 its B).
__device__ __forceinline__ void spcc_mma(float (&d)[4], const spcc_u32 (&a)[SPCC_FRAGMENT_K / 4], spcc_u32 b0,
                                         spcc_u32 b1) {
#if SPCC_FRAGMENT_K == 8
#if SPCC_BF16
  asm("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(b0));
#else
  asm("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(b0));
#endif
#else
#if SPCC_BF16
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
#endif
}

// The lane's A words of a fragment (one 8- or 16-byte load).
__device__ __forceinline__ void spcc_load_a(spcc_u32 (&av)[SPCC_FRAGMENT_K / 4], const spcc_u32* a) {
#if SPCC_FRAGMENT_K == 8
  const uint2 v = __ldg(reinterpret_cast<const uint2*>(a));
  av[0] = v.x; av[1] = v.y;
#else
  const uint4 v = __ldg(reinterpret_cast<const uint4*>(a));
  av[0] = v.x; av[1] = v.y; av[2] = v.z; av[3] = v.w;
#endif
}

#if SPCC_VEC8
// The 16-byte path. Lane (g, q) loads B rows k0 + 2q, k0 + 2q + 1 (+ 8, + 9 for k16) at its 8 columns
// SPCC_VCOL(g) + 0..7 of the warp (whole 128-byte rows per 8 lanes) and pairs the two rows' halves
// with a byte permute: mma j (0..7) takes column SPCC_VCOL(g) + j as its n index g, so the accumulators
// d[j] of lane (g, q) are columns 8q + j (d[j][0], d[j][2]: n index 2q) and 32 + 8q + j (d[j][1],
// d[j][3]: n index 2q + 1) of rows g and g + 8. Each 16-byte store of a row then covers, over the 4
// lanes of a row, 64 consecutive bytes of C.
struct spcc_operands {
  spcc_u32 a[SPCC_FRAGMENT_K / 4];
  uint4 b[SPCC_FRAGMENT_K / 4];  // rows 2q, 2q + 1 (, 2q + 8, 2q + 9)
};

// Rows at or past `krows` (beyond K) read as zero.
__device__ __forceinline__ void spcc_load_operands(spcc_operands& o, const spcc_u32* a, const spcc_u16* bp,
                                                   long long ld, int krows, int q) {
  spcc_load_a(o.a, a);
#pragma unroll
  for (int i = 0; i < SPCC_FRAGMENT_K / 4; ++i) {
    const int r = 2 * q + (i & 1) + 8 * (i >> 1);
    o.b[i] = r < krows ? __ldg(reinterpret_cast<const uint4*>(bp + ((i & 1) + 8 * (i >> 1)) * ld))
                       : make_uint4(0u, 0u, 0u, 0u);
  }
}

__device__ __forceinline__ spcc_u32 spcc_word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

__device__ __forceinline__ void spcc_multiply(float (&d)[8][4], const spcc_operands& o) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const spcc_u32 r0 = spcc_word(o.b[0], i), r1 = spcc_word(o.b[1], i);
#if SPCC_FRAGMENT_K == 16
    const spcc_u32 r8 = spcc_word(o.b[2], i), r9 = spcc_word(o.b[3], i);
    spcc_mma(d[2 * i], o.a, __byte_perm(r0, r1, 0x5410), __byte_perm(r8, r9, 0x5410));
    spcc_mma(d[2 * i + 1], o.a, __byte_perm(r0, r1, 0x7632), __byte_perm(r8, r9, 0x7632));
#else
    spcc_mma(d[2 * i], o.a, __byte_perm(r0, r1, 0x5410), 0u);
    spcc_mma(d[2 * i + 1], o.a, __byte_perm(r0, r1, 0x7632), 0u);
#endif
  }
}

// `count` fragments wholly inside K (operands from `a`, one fragment every 8 * FRAGMENT_K words; k
// from `ks`), the next one's loads in flight while one multiplies.
__device__ __forceinline__ void spcc_fragments(float (&d)[8][4], const spcc_u32* a, const int* ks, int count,
                                               const spcc_u16* bw, long long ld, long long, int q) {
  spcc_operands cur, next;
  spcc_load_operands(cur, a, bw + __ldg(ks) * ld, ld, SPCC_FRAGMENT_K, q);
  int k_next = __ldg(ks + (count > 1 ? 1 : 0));
  for (int f = 0; f < count; ++f) {
    const int after = f + 2 < count ? f + 2 : count - 1;
    const int k_after = __ldg(ks + after);
    const int nf = f + 1 < count ? f + 1 : f;
    spcc_load_operands(next, a + nf * (8 * SPCC_FRAGMENT_K), bw + k_next * ld, ld, SPCC_FRAGMENT_K, q);
    spcc_multiply(d, cur);
    cur = next;
    k_next = k_after;
  }
}

// One fragment reaching past K: rows k0 + krows .. read as zero.
__device__ __forceinline__ void spcc_fragment(float (&d)[8][4], const spcc_u32* a, const spcc_u16* bp,
                                              long long ld, long long, int krows, int q) {
  spcc_operands o;
  spcc_load_operands(o, a, bp, ld, krows, q);
  spcc_multiply(d, o);
}

// The warp's tile into its stage, row-major (row r, warp column c at st[r * 72 + c]).
__device__ __forceinline__ void spcc_stage(float* st, const float (&d)[8][4], int g, int q) {
#pragma unroll
  for (int h = 0; h < 4; ++h) {  // h: row g + 8 (h / 2), columns 32 (h % 2) + 8q + j
    float* p = st + (g + 8 * (h >> 1)) * 72 + 8 * q + 32 * (h & 1);
    *reinterpret_cast<float4*>(p) = make_float4(d[0][h], d[1][h], d[2][h], d[3][h]);
    *reinterpret_cast<float4*>(p + 4) = make_float4(d[4][h], d[5][h], d[6][h], d[7][h]);
  }
  __syncwarp();
}

// Adds another warp's staged tile (same columns) to the lane's accumulators.
__device__ __forceinline__ void spcc_add_stage(float (&d)[8][4], const float* st, int g, int q) {
#pragma unroll
  for (int h = 0; h < 4; ++h) {
    const float* p = st + (g + 8 * (h >> 1)) * 72 + 8 * q + 32 * (h & 1);
    const float4 u = *reinterpret_cast<const float4*>(p), v = *reinterpret_cast<const float4*>(p + 4);
    d[0][h] = __fadd_rn(d[0][h], u.x); d[1][h] = __fadd_rn(d[1][h], u.y);
    d[2][h] = __fadd_rn(d[2][h], u.z); d[3][h] = __fadd_rn(d[3][h], u.w);
    d[4][h] = __fadd_rn(d[4][h], v.x); d[5][h] = __fadd_rn(d[5][h], v.y);
    d[6][h] = __fadd_rn(d[6][h], v.z); d[7][h] = __fadd_rn(d[7][h], v.w);
  }
}

// The epilogue of a block row without unrolled nonzeros, straight from the tile: row `row` of C (the
// lane's row g, or g + 8 for h >= 2) gets bias, ReLU, rounding, and one 16-byte store of 8 columns.
__device__ __forceinline__ void spcc_store_tile_row(spcc_u16* c, const float (&d)[8][4], int h, float bias,
                                                    bool relu) {
  float v[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    v[j] = __fadd_rn(d[j][h], bias);
    if (relu) v[j] = fmaxf(v[j], 0.0f);
  }
  *reinterpret_cast<uint4*>(c) =
      make_uint4(spcc_pack(v[0], v[1]), spcc_pack(v[2], v[3]), spcc_pack(v[4], v[5]), spcc_pack(v[6], v[7]));
}
#else
// The scalar path (runtime N or N not divisible by 8). One fragment times the warp's 64 columns of B:
// 8 mma.sync into d[j] (columns 8j .. 8j + 7 of the warp). Lane (g = lane / 4, q = lane % 4) reads
// its operand words from `a`, and from B rows k0 + 2q, k0 + 2q + 1 (+ 8, + 9) of column
// warp_col + 8j + g; rows at or past `krows` (beyond K) read as zero, columns at or past `cols`
// (beyond n, counted from warp_col + g; cols - 1 is column n - 1, at or after column 0 of B) as
// column n - 1.
__device__ __forceinline__ void spcc_fragment(float (&d)[8][4], const spcc_u32* a, const spcc_u16* bp,
                                              long long ld, long long cols, int krows, int q) {
  spcc_u32 av[SPCC_FRAGMENT_K / 4];
  spcc_load_a(av, a);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    spcc_u32 b0 = 0, b1 = 0;
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
    spcc_mma(d[j], av, b0, b1);
  }
}

// `count` fragments wholly inside K (operands from `a`, one every 8 * FRAGMENT_K words; k from `ks`).
__device__ __forceinline__ void spcc_fragments(float (&d)[8][4], const spcc_u32* a, const int* ks, int count,
                                               const spcc_u16* bw, long long ld, long long cols, int q) {
  for (int f = 0; f < count; ++f)
    spcc_fragment(d, a + f * (8 * SPCC_FRAGMENT_K), bw + __ldg(ks + f) * ld, ld, cols, SPCC_FRAGMENT_K, q);
}

// The warp's tile into its stage, row-major (row r, warp column c at st[r * 72 + c]).
__device__ __forceinline__ void spcc_stage(float* st, const float (&d)[8][4], int g, int q) {
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    *reinterpret_cast<float2*>(st + g * 72 + 8 * j + 2 * q) = make_float2(d[j][0], d[j][1]);
    *reinterpret_cast<float2*>(st + (g + 8) * 72 + 8 * j + 2 * q) = make_float2(d[j][2], d[j][3]);
  }
  __syncwarp();
}
#endif  // SPCC_VEC8
#endif  // SPCC_FRAGMENT_K

// The column k of every fragment, in fragment order: a group's share of more than 32 fragments runs
// a rolled loop over them (straight-line fragments kept values live across hundreds of mma and ptxas
// spilled them); shorter shares are straight-line calls with k in the address.
/*@FRAGMENT_TABLE*/static __device__ const int spcc_fragment_k[] = {0};/*@end*/

static __device__ __forceinline__ void sparsecc_wait_for_predecessor() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

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
/*@CONV_SETUP*//*@end*/  extern __shared__ float red[];
  if (/*@PROGRAMMATIC*/ true /*@end*/) sparsecc_wait_for_predecessor();
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
          spcc_fragments(d, fragments + lane * (SPCC_FRAGMENT_K / 4), spcc_fragment_k, 1, bw, ld, wcols, q);
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
