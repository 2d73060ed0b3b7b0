// SpMM skeleton, rolled: C = A*B (+bias[row]) (ReLU) for one fixed sparse A whose steps are read from a
// table instead of being unrolled into code (generator/emit/src/spmm_rolled_cuda.cpp fills it from a
// rolled SpMM plan; the table is spmm_rolled_table in generator/plan). The code does not grow with
// A: a large layer at small N spends its time on the table's loads, not on fetching megabytes of
// unrolled instructions. Groups of whole warps load 32 records at a time, one a lane, and shuffle
// them round. The defaults between the markers make a valid one-row example, so the file
// compiles on its own (nvcc -arch=sm_90 -c templates/spmm_rolled.cu).
//   BLOCK_X       threads per block (groups * N_TILE)
//   KERNEL_NAME   the extern "C" symbol the runtime looks up
//   N_TILE        threads per group; each owns two columns, t and t + N_TILE of the block's 2 N_TILE
//                 (with step lanes: 32, one warp a group)
//   STEP_LANES    1, or step lanes (see below): slots of 32 / STEP_LANES column lanes in each warp
//   ROWS          rows per block row (accumulators per column); block row y owns rows y * ROWS ..
//   GROUPS        thread groups splitting a block row's steps (K), summed through shared memory
//   BATCH         steps whose B loads are in flight at once before they are multiplied (groups
//                 narrower than a warp: records a thread loads with their B loads)
//   HEADER        words of the table's header: block rows * GROUPS + 1 record indices, padded to 4
//   RECORD        words of a step record: 1 + ROWS, padded to 4 (spmm_rolled_record_words)
//   M             rows of A and C
//   LD            the column count of B and C: the compiled N, or the argument n
//   CONV          convolutions: kConv and the geometry (neutral values otherwise)
//   CONV_PARAMS   convolutions: the zero buffer argument (kConvParams; unused: rolled kernels test a mask)
//   BIAS, RELU    the epilogue
//   PROGRAMMATIC  programmatic plans: true (see below)
//   PROGRAMMATIC_TRIGGER  programmatic plans that let the next grid launch early: true
// Table (`values`): the header's int32 record index where each (block row, group) begins, then one
// record of RECORD words a step: k (int32 bits), ROWS weights (0 for rows without an entry), zeros.
// ABI: grid (ceil(n / (2 N_TILE)), block rows), block (BLOCK_X), dynamic shared memory
// (GROUPS - 1) * ROWS * 2 N_TILE floats. Columns >= n neither load nor store but reach the barrier.
// Step lanes (small N): lane l of a group works on column l % (32 / STEP_LANES) of the block's
// 32 / STEP_LANES (grid x: ceil(n / (32 / STEP_LANES))) and on the group's steps l / (32 /
// STEP_LANES), + STEP_LANES, ...; the slots' sums are added by a butterfly of shuffles (pairwise:
// slot 0 + 1, 2 + 3, then the pairs), then the groups' as above. Same table, at most the same
// shared memory.
// Convolutions (CONV: kConv and the geometry): B is the images X and C the images Y, and the columns
// are the batch's pixels (n = images x PIX); a step's k is a filter column (i, dy, dx), read at the
// column's pixel where the tap is inside the image and taken as 0 where it falls in the padding.
// Programmatic plans (programmatic dependent launch, sm_90 on): the kernel reads its table (constant)
// before it waits for the grid it depends on, and only then B; with PROGRAMMATIC_TRIGGER it lets the
// next grid launch once its steps are done. Under a plain launch both are no-ops.
static __device__ __forceinline__ void sparsecc_wait_for_predecessor() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
// The pointer unchanged, but the compiler no longer knows how it was formed.
static __device__ __forceinline__ const char* sparsecc_opaque(const char* p) {
  asm("mov.b64 %0, %0;" : "+l"(p));
  return p;
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
  constexpr int R = /*@ROWS*/1/*@end*/;
  constexpr int G = /*@GROUPS*/1/*@end*/;
  constexpr int U = /*@BATCH*/8/*@end*/;
  constexpr int L = /*@STEP_LANES*/ 1 /*@end*/;
  constexpr long long H = /*@HEADER*/4/*@end*/;
  constexpr long long M = /*@M*/1/*@end*/;
  constexpr bool kBias = /*@BIAS*/false/*@end*/;
  constexpr bool kRelu = /*@RELU*/false/*@end*/;
  constexpr int S = /*@RECORD*/4/*@end*/;  // words of a step record
  constexpr int Q = S / 4;                // its 16-byte loads
  const long long ld = /*@LD*/n/*@end*/;
  // Convolutions (SpmmPlan "Convolution"): the geometry, element strides of X and Y included.
/*@CONV*/
  constexpr bool kConv = false;
  constexpr int KH = 1, KW = 1;
  constexpr long long PIX = 1, OW = 1, SH = 1, SW = 1, PT = 0, PL = 0, IH = 1, IW = 1;
  constexpr long long XIMG = 0, XCH = 0, XROW = 0, XCOL = 0, YIMG = 0, YCH = 0, YROW = 0, YCOL = 0;
/*@end*/
  static_assert(!kConv || (T % 32 == 0 && L == 1), "convolutions need groups of whole warps, no step lanes");
  // Column c of a convolution is pixel p = c % PIX, (p / OW, p % OW), of image c / PIX: its window's
  // corner in X (where a step's offset starts) with the mask of its taps inside the image (none for a
  // column past n), and its element in Y's channel 0.
  [[maybe_unused]] const auto sparsecc_conv_corner = [](const float* X, long long c, bool live,
                                                        unsigned long long& taps) {
    const long long image = c / PIX, p = c - image * PIX;
    const long long oy = p / OW, ox = p % OW, iy = oy * SH - PT, ix = ox * SW - PL;
    taps = 0;
    if (!live) return sparsecc_opaque(reinterpret_cast<const char*>(X));
#pragma unroll
    for (int dy = 0; dy < KH; ++dy)
#pragma unroll
      for (int dx = 0; dx < KW; ++dx)
        if (iy + dy >= 0 && iy + dy < IH && ix + dx >= 0 && ix + dx < IW) taps |= 1ull << (dy * KW + dx);
    return sparsecc_opaque(reinterpret_cast<const char*>(X + image * XIMG + iy * XROW + ix * XCOL));
  };
  [[maybe_unused]] const auto sparsecc_conv_output = [](long long c) {
    const long long image = c / PIX, p = c - image * PIX;
    return image * YIMG + p / OW * YROW + p % OW * YCOL;
  };
  const int t = threadIdx.x % T;
  const int group = threadIdx.x / T;
  const long long col = static_cast<long long>(blockIdx.x) * 2 * T + t;
  const bool live0 = col < ld, live1 = col + T < ld;
  const int* head = reinterpret_cast<const int*>(values);
  const int slot = static_cast<int>(blockIdx.y) * G + group;
  const int first = __ldg(head + slot), last = __ldg(head + slot + 1);
  if (/*@PROGRAMMATIC*/ true /*@end*/) sparsecc_wait_for_predecessor();
  extern __shared__ float red[];
  static_assert(L == 1 || (T == 32 && 32 % L == 0), "step lanes need groups of one warp");
  if constexpr (L > 1) {
    constexpr int NC = 32 / L;  // column lanes of a slot
    const int lane = threadIdx.x & 31, c = lane % NC, lslot = lane / NC;
    const long long cl = static_cast<long long>(blockIdx.x) * NC + c;
    const bool live = cl < ld;
    const float* bl = B + (live ? cl : 0);  // columns past n read column 0 (never stored)
    float a[R];
#pragma unroll
    for (int r = 0; r < R; ++r) a[r] = 0.0f;
    // A lane takes U of its slot's steps at a time, their records and B loads all in flight before
    // the multiplications; a step past the group's last is neither loaded nor multiplied.
    for (int i = first + lslot; i < last; i += L * U) {
      long long k[U];
      float w[U][R];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int j = i + u * L;
        float rec[S];
        if constexpr (S == 4 && R == 1) {  // k and one weight: an 8-byte load
          const float2 v = j < last ? __ldg(reinterpret_cast<const float2*>(values + H) + 2ll * j) : float2{};
          rec[0] = v.x, rec[1] = v.y;
        } else {
#pragma unroll
          for (int q = 0; q < Q; ++q) {
            const float4 v =
                j < last
                    ? __ldg(reinterpret_cast<const float4*>(values + H) + static_cast<long long>(j) * Q + q)
                    : float4{};
            rec[4 * q] = v.x, rec[4 * q + 1] = v.y, rec[4 * q + 2] = v.z, rec[4 * q + 3] = v.w;
          }
        }
        k[u] = __float_as_int(rec[0]);
#pragma unroll
        for (int r = 0; r < R; ++r) w[u][r] = rec[1 + r];
      }
      float x[U];
#pragma unroll
      for (int u = 0; u < U; ++u) x[u] = __ldg(bl + k[u] * ld);
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (i + u * L < last) {
#pragma unroll
          for (int r = 0; r < R; ++r) a[r] = __fmaf_rn(x[u], w[u][r], a[r]);
        }
    }
#pragma unroll
    for (int off = NC; off < 32; off *= 2)
#pragma unroll
      for (int r = 0; r < R; ++r) a[r] = __fadd_rn(a[r], __shfl_xor_sync(0xffffffffu, a[r], off));
    if (/*@PROGRAMMATIC_TRIGGER*/ true /*@end*/) sparsecc_launch_dependents();
    if (G > 1) {
      if (group > 0 && lslot == 0) {
#pragma unroll
        for (int r = 0; r < R; ++r) red[((group - 1) * R + r) * NC + c] = a[r];
      }
      __syncthreads();
    }
    if (group != 0 || lslot != 0) return;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const long long row = static_cast<long long>(blockIdx.y) * R + r;
      if (row >= M) break;
      float v = a[r];
      for (int g = 1; g < G; ++g) v = __fadd_rn(v, red[((g - 1) * R + r) * NC + c]);
      if (kBias) v = __fadd_rn(v, __ldg(bias + row));
      if (kRelu) v = fmaxf(v, 0.0f);
      if (live) C[row * ld + cl] = v;
    }
    return;
  }
  const float* b = B + col;
  float a0[R], a1[R];
#pragma unroll
  for (int r = 0; r < R; ++r) a0[r] = a1[r] = 0.0f;
  int i = first;
  if constexpr (T % 32 == 0) {
    // A group is whole warps: a warp's lanes load 32 consecutive records at once, one each, and
    // hand every step's k and weights round by shuffles, so a warp waits for the table once per 32
    // steps and only for B once per batch. The batches of a chunk are unrolled, so a step's shuffles
    // take the lane as an immediate and each of its B addresses is one wide multiply-add on the
    // column's base (opaque to the compiler, which would otherwise index from B and scale). Records
    // past the chunk's count are zero: their steps load row 0 and are left out of the sums (a
    // select). Columns past n read column 0 of B (never stored).
    const int lane = threadIdx.x & 31;
    const float4* at = reinterpret_cast<const float4*>(values + H);
    const char* b0 = sparsecc_opaque(reinterpret_cast<const char*>(B + (live0 ? col : 0)));
    const char* b1 = sparsecc_opaque(reinterpret_cast<const char*>(B + (live1 ? col + T : 0)));
    const unsigned row_bytes =
        static_cast<unsigned>(ld) * 4u;  // N < 2^30 (the runtime's and the plan's bound)
    if constexpr (kConv) {
      // A convolution: each column's pointer at its window's corner in X and its taps inside the
      // image; a step's k gives the byte offset from the corner and the tap, which the lane that
      // loaded the record works out once and hands round with the weights.
      unsigned long long taps0 = 0, taps1 = 0;
      b0 = sparsecc_conv_corner(B, col, live0, taps0);
      b1 = sparsecc_conv_corner(B, col + T, live1, taps1);
      for (; i < last; i += 32) {
        const int count = min(32, last - i);
        float mine[S];
#pragma unroll
        for (int q = 0; q < Q; ++q) {
          const float4 v = lane < count ? __ldg(at + static_cast<long long>(i + lane) * Q + q) : float4{};
          mine[4 * q] = v.x, mine[4 * q + 1] = v.y, mine[4 * q + 2] = v.z, mine[4 * q + 3] = v.w;
        }
        const int kmine = __float_as_int(mine[0]);
        const int cmine = kmine / (KH * KW), tmine = kmine - cmine * (KH * KW);
        const unsigned offmine = static_cast<unsigned>(
            (cmine * XCH + tmine / KW * XROW + tmine % KW * XCOL) * 4);  // bytes from the corner
#pragma unroll
        for (int s = 0; s < 32; s += U) {
          if (s >= count) break;
          float x0[U], x1[U];
#pragma unroll
          for (int u = 0; u < U; ++u) {
            const unsigned offset = __shfl_sync(0xffffffffu, offmine, s + u);
            const int tap = __shfl_sync(0xffffffffu, tmine, s + u);
            x0[u] = (taps0 >> tap) & 1 ? __ldg(reinterpret_cast<const float*>(b0 + offset)) : 0.0f;
            x1[u] = (taps1 >> tap) & 1 ? __ldg(reinterpret_cast<const float*>(b1 + offset)) : 0.0f;
          }
          float w[U][R];
#pragma unroll
          for (int u = 0; u < U; ++u)
#pragma unroll
            for (int r = 0; r < R; ++r) w[u][r] = __shfl_sync(0xffffffffu, mine[1 + r], s + u);
#pragma unroll
          for (int u = 0; u < U; ++u)
            if (s + u < count) {
#pragma unroll
              for (int r = 0; r < R; ++r) {
                a0[r] = __fmaf_rn(x0[u], w[u][r], a0[r]);
                a1[r] = __fmaf_rn(x1[u], w[u][r], a1[r]);
              }
            }
        }
      }
    }
    for (; i < last && !kConv; i += 32) {
      const int count = min(32, last - i);
      float mine[S];
#pragma unroll
      for (int q = 0; q < Q; ++q) {
        const float4 v = lane < count ? __ldg(at + static_cast<long long>(i + lane) * Q + q) : float4{};
        mine[4 * q] = v.x, mine[4 * q + 1] = v.y, mine[4 * q + 2] = v.z, mine[4 * q + 3] = v.w;
      }
      const int kmine = __float_as_int(mine[0]);
#pragma unroll
      for (int s = 0; s < 32; s += U) {
        if (s >= count) break;
        float x0[U], x1[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const unsigned long long offset =
              static_cast<unsigned long long>(static_cast<unsigned>(__shfl_sync(0xffffffffu, kmine, s + u))) *
              row_bytes;
          x0[u] = __ldg(reinterpret_cast<const float*>(b0 + offset));
          x1[u] = __ldg(reinterpret_cast<const float*>(b1 + offset));
        }
        float w[U][R];
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
          for (int r = 0; r < R; ++r) w[u][r] = __shfl_sync(0xffffffffu, mine[1 + r], s + u);
#pragma unroll
        for (int u = 0; u < U; ++u)
          if (s + u < count) {
#pragma unroll
            for (int r = 0; r < R; ++r) {
              a0[r] = __fmaf_rn(x0[u], w[u][r], a0[r]);
              a1[r] = __fmaf_rn(x1[u], w[u][r], a1[r]);
            }
          }
      }
    }
  } else {
    // Groups narrower than a warp: each thread loads a batch of records itself.
    const float4* rec = reinterpret_cast<const float4*>(values + H) + static_cast<long long>(first) * Q;
    for (; i + U <= last; i += U, rec += U * Q) {
      float w[U][S];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int q = 0; q < Q; ++q) {
          const float4 v = __ldg(rec + u * Q + q);
          w[u][4 * q] = v.x, w[u][4 * q + 1] = v.y, w[u][4 * q + 2] = v.z, w[u][4 * q + 3] = v.w;
        }
      float x0[U], x1[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const long long k = __float_as_int(w[u][0]);
        x0[u] = live0 ? __ldg(b + k * ld) : 0.0f;
        x1[u] = live1 ? __ldg(b + k * ld + T) : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int r = 0; r < R; ++r) {
          a0[r] = __fmaf_rn(x0[u], w[u][1 + r], a0[r]);
          a1[r] = __fmaf_rn(x1[u], w[u][1 + r], a1[r]);
        }
    }
    for (; i < last; ++i, rec += Q) {
      float w[S];
#pragma unroll
      for (int q = 0; q < Q; ++q) {
        const float4 v = __ldg(rec + q);
        w[4 * q] = v.x, w[4 * q + 1] = v.y, w[4 * q + 2] = v.z, w[4 * q + 3] = v.w;
      }
      const long long k = __float_as_int(w[0]);
      const float x0 = live0 ? __ldg(b + k * ld) : 0.0f;
      const float x1 = live1 ? __ldg(b + k * ld + T) : 0.0f;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        a0[r] = __fmaf_rn(x0, w[1 + r], a0[r]);
        a1[r] = __fmaf_rn(x1, w[1 + r], a1[r]);
      }
    }
  }
  // Groups 1.. hand their sums to group 0 (added in group order), which adds the bias, applies ReLU
  // and stores.
  if (/*@PROGRAMMATIC_TRIGGER*/ true /*@end*/) sparsecc_launch_dependents();
  if (G > 1) {
    if (group > 0) {
      float* to = red + (group - 1) * R * 2 * T + t;
#pragma unroll
      for (int r = 0; r < R; ++r) to[2 * r * T] = a0[r], to[(2 * r + 1) * T] = a1[r];
    }
    __syncthreads();
  }
  if (group != 0) return;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const long long row = static_cast<long long>(blockIdx.y) * R + r;
    if (row >= M) break;
    float v0 = a0[r], v1 = a1[r];
    for (int g = 1; g < G; ++g) {
      v0 = __fadd_rn(v0, red[((g - 1) * R + r) * 2 * T + t]);
      v1 = __fadd_rn(v1, red[((g - 1) * R + r) * 2 * T + T + t]);
    }
    if (kBias) {
      const float s = __ldg(bias + row);
      v0 = __fadd_rn(v0, s), v1 = __fadd_rn(v1, s);
    }
    if (kRelu) v0 = fmaxf(v0, 0.0f), v1 = fmaxf(v1, 0.0f);
    if constexpr (kConv) {
      if (live0) C[sparsecc_conv_output(col) + row * YCH] = v0;
      if (live1) C[sparsecc_conv_output(col + T) + row * YCH] = v1;
    } else {
      if (live0) C[row * ld + col] = v0;
      if (live1) C[row * ld + col + T] = v1;
    }
  }
}
