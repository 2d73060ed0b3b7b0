// SpMM skeleton, compressed: C = A*B (+bias[row]) (ReLU) in fp16 or bf16 (fp32 accumulation) for one
// fixed sparse A held as a compressed stream (runtime/include/sparsecc/runtime/compressed_stream.hpp)
// that the kernel decodes on chip straight into mma.sync m16n8k16 operands. The code does not grow
// with A; generator/emit/src/spmm_compressed_cuda.cpp fills the shape in from a compressed SpMM plan.
// The defaults between the markers make a valid example, so the file compiles on its own
// (nvcc -arch=sm_90 -c templates/spmm_compressed.cu). No CUDA headers (inline PTX).
//   KERNEL_NAME   the extern "C" symbol the runtime looks up
//   BF16          0: fp16, 1: bf16
//   WARPS         warps a block; warp w owns strips w * STRIPS .. + STRIPS of its row block
//   STRIPS        16-row strips a warp owns (a row block is 16 * WARPS * STRIPS rows)
//   CHUNK_K       rows of B (columns of A) a block stages at a time
//   STAGES        chunks a block holds in shared memory at once (2..8): STAGES - 1 in flight
//   PITCH         bytes of a staged row of B; SWIZZLE 1: rows of 2 * N_TILE bytes whose 16-byte pieces
//                 are permuted per row against bank conflicts (N_TILE 16, 32, 64), 0: padded rows
//   SPLITS        blocks splitting a row block's chunks: one thread-block cluster (sm_90), whose
//                 blocks add their partial sums through distributed shared memory
//   N_TILE        columns of C a block (grid x: ceil(n / N_TILE)), a multiple of 8
//   M, K          the shape of A; CHUNKS = ceil(K / CHUNK_K); ROW_BLOCKS = ceil(M / rows of a block)
//   STAGE_BYTES   the largest segment (16-byte multiple)
//   LD            the column count of B and C: the compiled N, or the argument n
//   VEC           1 when LD is a compiled multiple of 8: B rows are copied as 16-byte vectors (also
//                 where a run-time LD is a multiple of 8 and B is 16-byte aligned)
//   COLUMN        1 when LD is a compiled 1: B's chunk is copied as one vector in 4-byte pieces, and
//                 lanes 0..3 take its operands straight from it (the other columns are zero); also
//                 where a run-time LD is 1
//   BIAS, RELU    the epilogue; PROGRAMMATIC: wait for the grid this one depends on before B and C
//   CLUSTER       the cluster attribute for SPLITS > 1, else nothing
//   SCATTER       1: the scatter layout (segments are warp lists of value << 16 | place entries)
//   KEEP          scatter layout: rounds of 32 list entries a warp loads at once, keeping their places
//                 in registers for the zeros it writes back (the plan's kept_rounds, 1..8)
// Each chunk of the block's split: B's rows of the chunk (N_TILE columns, zero past K and n) and the
// row block's segment of the stream go to shared memory with cp.async, STAGES - 1 chunks ahead of the
// one the block works on (one block barrier a chunk); then every
// warp walks its strips' records: a record's format decides how its four 16 x 16 steps become A
// operands (dense: two 8-byte loads a lane; bitmap: each lane finds its two elements of each 8 x 8
// sub-tile by popc; positions: the warp scatters the nonzeros into a zeroed 16 x 64 operand in shared
// memory, two 2 KiB buffers a warp used in turn, so that one warp barrier a record orders them), B's
// operands come from ldmatrix.trans, and mma.sync accumulates in fp32. The scatter layout instead has
// each warp scatter its list of the chunk's entries into its strips' part of the block's zeroed operand
// tile (ROWS x CHUNK_K, mma order, a pad slot past its end), then, step by step, load B's operands once
// for all its strips and read each strip's A operands (one 16-byte load a lane), then zero the places it
// wrote; warp barriers order the three, the next chunk's block barrier orders the zeros before its
// scatter.
// ABI: grid (ceil(n / N_TILE), ROW_BLOCKS * SPLITS), block (32 * WARPS), dynamic shared memory from
// the plan; B (K x n) and C (M x n) row-major 16-bit; `stream` is the fragments argument.
#define SPCC_BF16 /*@BF16*/0/*@end*/
#define SPCC_SPLITS /*@SPLITS*/1/*@end*/
#define SPCC_VEC /*@VEC*/1/*@end*/
#define SPCC_COLUMN /*@COLUMN*/0/*@end*/
#define SPCC_SWIZZLE /*@SWIZZLE*/1/*@end*/
#define SPCC_SCATTER /*@SCATTER*/0/*@end*/

typedef unsigned short spcc_u16;
typedef unsigned int spcc_u32;
typedef unsigned long long spcc_u64;

static __device__ __forceinline__ void spcc_wait_for_predecessor() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

static __device__ __forceinline__ spcc_u32 spcc_smem(const void* p) {
  spcc_u32 r;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
  return r;
}

// 16 bytes global -> shared, zero-filled where `bytes` is 0.
static __device__ __forceinline__ void spcc_copy16(spcc_u32 dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
// 4 bytes global -> shared, of which the first `bytes` are read and the rest zero-filled.
static __device__ __forceinline__ void spcc_copy4(spcc_u32 dst, const void* src, int bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
static __device__ __forceinline__ spcc_u32 spcc_load_shared(spcc_u32 addr) {
  spcc_u32 v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(addr));
  return v;
}
static __device__ __forceinline__ void spcc_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Until at most `pending` of this thread's committed copy groups are still in flight.
template <int pending>
static __device__ __forceinline__ void spcc_wait_pending() {
  asm volatile("cp.async.wait_group %0;" ::"n"(pending) : "memory");
}

static __device__ __forceinline__ void spcc_ldmatrix_x4_trans(spcc_u32 (&r)[4], spcc_u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
static __device__ __forceinline__ void spcc_ldmatrix_x2_trans(spcc_u32 (&r)[4], spcc_u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr));
}

static __device__ __forceinline__ void spcc_mma(float (&d)[4], const spcc_u32 (&a)[4], spcc_u32 b0, spcc_u32 b1) {
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
}

// Two floats -> a packed pair (lo in the low half), each rounded to nearest even.
static __device__ __forceinline__ spcc_u32 spcc_pack(float lo, float hi) {
  spcc_u32 r;
#if SPCC_BF16
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#endif
  return r;
}

#if SPCC_SPLITS > 1
static __device__ __forceinline__ void spcc_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// The four floats at shared address `addr` (16-byte aligned) of the block of cluster rank `rank`.
static __device__ __forceinline__ float4 spcc_cluster_load4(spcc_u32 addr, spcc_u32 rank) {
  spcc_u32 remote;
  float4 v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(addr), "r"(rank));
  asm volatile("ld.shared::cluster.v4.f32 {%0,%1,%2,%3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(remote)
               : "memory");
  return v;
}
#endif

extern "C" __global__ void __launch_bounds__(32 * /*@WARPS*/4/*@end*/) /*@CLUSTER*//*@end*/
/*@KERNEL_NAME*/sparsecc_spmm/*@end*/(const spcc_u16* __restrict__ B, spcc_u16* __restrict__ C,
                                     const float* __restrict__ bias, const float* __restrict__ values,
                                     int n, const spcc_u32* __restrict__ stream) {
  constexpr int W = /*@WARPS*/4/*@end*/;
  constexpr int S = /*@STRIPS*/1/*@end*/;
  constexpr int CK = /*@CHUNK_K*/256/*@end*/;
  constexpr int NT = /*@N_TILE*/16/*@end*/;
  constexpr long long M = /*@M*/64/*@end*/;
  constexpr long long K = /*@K*/256/*@end*/;
  constexpr int CHUNKS = /*@CHUNKS*/1/*@end*/;
  constexpr int STAGE_BYTES = /*@STAGE_BYTES*/8192/*@end*/;
  constexpr int NS = /*@STAGES*/3/*@end*/;
  constexpr int SPLITS = SPCC_SPLITS;
  constexpr int ROWS = 16 * W * S;
  constexpr int PITCH = /*@PITCH*/32/*@end*/;
  constexpr int PIECES = NT / 8;  // 16-byte pieces of a row of B
  constexpr int B_BYTES = CK * PITCH;
  constexpr int STAGE = B_BYTES + STAGE_BYTES;
  constexpr int HEADER = (4 * W * S + 15) / 16 * 16;
  constexpr int SPLIT_WORDS = /*@ROW_BLOCKS*/1/*@end*/ * (SPLITS + 1);
  constexpr long long DATA_WORD = (SPLIT_WORDS + /*@ROW_BLOCKS*/1/*@end*/ * CHUNKS + 1 + 3) / 4 * 4;
  const long long ld = /*@LD*/16/*@end*/;
  (void)values;
  (void)n;

  extern __shared__ __align__(16) unsigned char smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int rb = blockIdx.y / SPLITS, split = blockIdx.y % SPLITS;
  const long long col0 = static_cast<long long>(blockIdx.x) * NT;
  const int c_begin = static_cast<int>(stream[rb * (SPLITS + 1) + split]);
  const int c_end = static_cast<int>(stream[rb * (SPLITS + 1) + split + 1]);
  const spcc_u32* segments = stream + SPLIT_WORDS + static_cast<long long>(rb) * CHUNKS;
  const unsigned char* data = reinterpret_cast<const unsigned char*>(stream + DATA_WORD);
#if SPCC_SCATTER
  constexpr int STEPS = CK / 16;
  constexpr int LIST_HEADER = (W + 3) / 4;                     // 16-byte units of a segment's list ends
  constexpr spcc_u32 PAD = ROWS * CK;                          // the pad slot's place (value 0)
  constexpr int KEEP = /*@KEEP*/4/*@end*/;                      // list rounds loaded at once, places kept
  uint4* tile = reinterpret_cast<uint4*>(smem + NS * STAGE);  // ROWS x CK values, then the pad slot
  for (int i = threadIdx.x; i < ROWS * CK / 8 + 1; i += 32 * W) tile[i] = make_uint4(0, 0, 0, 0);
#else
  spcc_u16* scratch = reinterpret_cast<spcc_u16*>(smem + NS * STAGE) + warp * 2048;
#pragma unroll
  for (int q = 0; q < 8; ++q) reinterpret_cast<uint4*>(scratch)[q * 32 + lane] = make_uint4(0, 0, 0, 0);
  __syncwarp();
#endif
  int turn = 0;  // the scratch buffer of the next positions record
  // The 16-byte piece of a staged row of B where its piece `p` lies.
  const auto piece_at = [](int row, int p) {
    return SPCC_SWIZZLE ? p ^ ((row / (8 / PIECES)) & (PIECES - 1)) : p;
  };

  float acc[S][NT / 8][4];
#pragma unroll
  for (int s = 0; s < S; ++s)
#pragma unroll
    for (int j = 0; j < NT / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[s][j][e] = 0.f;

  if (/*@PROGRAMMATIC*/ true /*@end*/) spcc_wait_for_predecessor();

  // B's rows go as 16-byte vectors where the compiled N is a multiple of 8, or a run-time one is and B
  // is 16-byte aligned; else value by value.
  const bool vec = SPCC_VEC || (ld % 8 == 0 && (reinterpret_cast<unsigned long long>(B) & 15) == 0);
  // B is one column (a compiled or a run-time N of 1): its chunk is one vector (B is 4-byte aligned).
  const bool column = SPCC_COLUMN || ld == 1;
  // B's operands of 16 x 16 step `step` of the staged chunk at `btile`, N_TILE columns, as the mma's
  // two registers for each 8 columns.
  const auto load_b = [&](spcc_u32(&b)[NT / 8][2], spcc_u32 btile, int step) {
    const int krow = 16 * step + (lane & 7) + 8 * ((lane >> 3) & 1);  // the ldmatrix row this lane supplies
    if (column) {
      // Column 0 of the mma's B operand: rows 2t, 2t + 1 and 2t + 8, 2t + 9 of the step, lanes 0..3;
      // the other columns are zero.
      const spcc_u32 at = btile + 32 * step + 4 * t;
      b[0][0] = g == 0 ? spcc_load_shared(at) : 0u;
      b[0][1] = g == 0 ? spcc_load_shared(at + 16) : 0u;
#pragma unroll
      for (int j = 1; j < NT / 8; ++j) b[j][0] = b[j][1] = 0u;
    } else if (NT == 8) {
      spcc_u32 r[4];
      spcc_ldmatrix_x2_trans(r, btile + krow * PITCH);
      b[0][0] = r[0], b[0][1] = r[1];
    } else {
#pragma unroll
      for (int p = 0; p < NT / 16; ++p) {
        spcc_u32 r[4];
        spcc_ldmatrix_x4_trans(r, btile + krow * PITCH + 16 * piece_at(krow, 2 * p + (lane >> 4)));
        b[2 * p][0] = r[0], b[2 * p][1] = r[1], b[2 * p + 1][0] = r[2], b[2 * p + 1][1] = r[3];
      }
      if (NT % 16) {
        spcc_u32 r[4];
        spcc_ldmatrix_x2_trans(r, btile + krow * PITCH + 32 * (NT / 16));
        b[NT / 8 - 1][0] = r[0], b[NT / 8 - 1][1] = r[1];
      }
    }
  };
  // One 16 x 16 step of a strip: the A operands `a` times B's operands `b`, into `acc_s`.
  const auto mma_step = [&](float(&acc_s)[NT / 8][4], const spcc_u32(&a)[4], const spcc_u32(&b)[NT / 8][2]) {
#pragma unroll
    for (int j = 0; j < NT / 8; ++j) spcc_mma(acc_s[j], a, b[j][0], b[j][1]);
  };

  // Stage chunk c (B's rows and the segment) into buffer `buf`.
  const auto stage = [&](int c, int buf) {
    const long long seg_begin = 16ll * segments[c], seg_len = 16ll * segments[c + 1] - seg_begin;
    if (seg_len == 0) return;
    unsigned char* base = smem + buf * STAGE;
    const long long k0 = static_cast<long long>(c) * CK;
    if (column) {
      // B is K x 1: the chunk's rows are CK consecutive values (4-byte aligned, K's tail zero-filled).
#pragma unroll 1
      for (int i = threadIdx.x; i < CK / 2; i += 32 * W) {
        const long long k = k0 + 2 * i;
        const int bytes = k + 1 < K ? 4 : k < K ? 2 : 0;
        spcc_copy4(spcc_smem(base + 4 * i), bytes ? B + k : B, bytes);
      }
    } else if (vec) {
#pragma unroll 1
      for (int i = threadIdx.x; i < CK * (NT / 8); i += 32 * W) {
        const int row = i / (NT / 8), piece = i % (NT / 8);
        const long long k = k0 + row, col = col0 + 8 * piece;
        const bool live = k < K && col < ld;
        spcc_copy16(spcc_smem(base + row * PITCH + 16 * piece_at(row, piece)), live ? B + k * ld + col : B,
                    live ? 16 : 0);
      }
    } else {
#pragma unroll 1
      for (int i = threadIdx.x; i < CK * NT; i += 32 * W) {
        const int row = i / NT, j = i % NT;
        const long long k = k0 + row, col = col0 + j;
        reinterpret_cast<spcc_u16*>(base + row * PITCH + 16 * piece_at(row, j / 8))[j % 8] =
            k < K && col < ld ? B[k * ld + col] : 0;
      }
    }
    for (long long i = threadIdx.x; i < seg_len / 16; i += 32 * W)
      spcc_copy16(spcc_smem(base + B_BYTES + 16 * i), data + seg_begin + 16 * i, 16);
  };

  // Prologue: the first NS - 1 chunks in flight (one copy group each, empty past the split).
#pragma unroll 1
  for (int i = 0; i < NS - 1; ++i) {
    if (c_begin + i < c_end) stage(c_begin + i, i);
    spcc_commit();
  }
  int buf = 0;
  // Chunk c's segment ends, loaded a chunk ahead so that no chunk waits on them after its barrier.
  spcc_u32 seg_lo = c_begin < c_end ? segments[c_begin] : 0u, seg_hi = c_begin < c_end ? segments[c_begin + 1] : 0u;
  for (int c = c_begin; c < c_end; ++c, buf = buf + 1 == NS ? 0 : buf + 1) {
    const spcc_u32 seg_next = c + 2 <= CHUNKS ? segments[c + 2] : 0u;
    spcc_wait_pending<NS - 2>();  // chunk c has landed (this thread's copies) ...
    __syncthreads();              // ... everyone's, and chunk c - 1's buffer is free again
    if (c + NS - 1 < c_end) stage(c + NS - 1, buf == 0 ? NS - 1 : buf - 1);
    spcc_commit();
    const bool live = seg_hi != seg_lo;
    seg_lo = seg_hi;
    seg_hi = seg_next;
#if SPCC_SCATTER
    if (live) {
      // This warp's list of the chunk: quads [from, to) of the staged segment, after its list ends.
      const uint4* e = reinterpret_cast<const uint4*>(smem + buf * STAGE + B_BYTES);
      const spcc_u32* ends = reinterpret_cast<const spcc_u32*>(e);
      const int from = warp == 0 ? LIST_HEADER : static_cast<int>(ends[warp - 1]);
      const int to = static_cast<int>(ends[warp]);
      spcc_u16* slots = reinterpret_cast<spcc_u16*>(tile);
      // An entry quad's four values into their places, or zeros there.
      const auto put = [&](const uint4 v, bool zero) {
        slots[v.x & 0xffffu] = zero ? spcc_u16{0} : static_cast<spcc_u16>(v.x >> 16);
        slots[v.y & 0xffffu] = zero ? spcc_u16{0} : static_cast<spcc_u16>(v.y >> 16);
        slots[v.z & 0xffffu] = zero ? spcc_u16{0} : static_cast<spcc_u16>(v.z >> 16);
        slots[v.w & 0xffffu] = zero ? spcc_u16{0} : static_cast<spcc_u16>(v.w >> 16);
      };
      if (from != to) {  // an empty list leaves the warp's strips zero for this chunk
        // The first KEEP rounds of the list are loaded together and their places kept for the zeros.
        spcc_u32 kept[KEEP][2];
#pragma unroll
        for (int r = 0; r < KEEP; ++r) {
          const int i = from + lane + 32 * r;
          const uint4 v = i < to ? e[i] : make_uint4(PAD, PAD, PAD, PAD);
          kept[r][0] = (v.x & 0xffffu) | (v.y << 16);
          kept[r][1] = (v.z & 0xffffu) | (v.w << 16);
          put(v, false);
        }
#pragma unroll 2
        for (int i = from + lane + 32 * KEEP; i < to; i += 32) put(e[i], false);
        __syncwarp();
        const spcc_u32 btile = spcc_smem(smem + buf * STAGE);
        // Step by step, B's operands once for the warp's strips.
#pragma unroll
        for (int q = 0; q < STEPS; ++q) {
          spcc_u32 b[NT / 8][2];
          load_b(b, btile, q);
#pragma unroll
          for (int s = 0; s < S; ++s) {
            const uint4 w = tile[((warp * S + s) * STEPS + q) * 32 + lane];
            const spcc_u32 a[4] = {w.x, w.y, w.z, w.w};
            mma_step(acc[s], a, b);
          }
        }
        __syncwarp();
        // Zero the places this warp wrote (the next chunk's block barrier orders them before its scatter).
#pragma unroll
        for (int r = 0; r < KEEP; ++r)
          put(make_uint4(kept[r][0], kept[r][0] >> 16, kept[r][1], kept[r][1] >> 16), true);
#pragma unroll 2
        for (int i = from + lane + 32 * KEEP; i < to; i += 32) put(e[i], true);
      }
    }
#else
    if (segments[c + 1] != segments[c]) {
      const unsigned char* seg = smem + buf * STAGE + B_BYTES;
      const spcc_u32 btile = spcc_smem(smem + buf * STAGE);
#pragma unroll
      for (int s = 0; s < S; ++s) {
        const int strip = warp * S + s;
        int at = strip == 0 ? HEADER : reinterpret_cast<const int*>(seg)[strip - 1];
        const int end = reinterpret_cast<const int*>(seg)[strip];
        while (at < end) {
          const uint2 h = *reinterpret_cast<const uint2*>(seg + at);
          const int format = h.x & 0xff, kt = (h.x >> 8) & 0xff, nvals = h.x >> 16;
          const unsigned char* rec = seg + at;
          // The four steps' A operands, decoded first so that their loads overlap.
          spcc_u32 a[4][4];
          if (format == 2) {
            const uint2* v = reinterpret_cast<const uint2*>(rec + 8);
#pragma unroll
            for (int q = 0; q < 4; ++q) {
              const uint2 w0 = v[2 * (q * 32 + lane)], w1 = v[2 * (q * 32 + lane) + 1];
              a[q][0] = w0.x, a[q][1] = w0.y, a[q][2] = w1.x, a[q][3] = w1.y;
            }
            at += 8 + 2 * 1024;
          } else if (format == 0) {
            // Bitmaps: lane L holds bits 2L, 2L + 1 of each 8 x 8 sub-tile, found by popc; branch-free
            // (an absent sub-tile reads bitmap 0 and no value).
            const spcc_u32 present = h.y & 0xffffu;
            const spcc_u64* bitmaps = reinterpret_cast<const spcc_u64*>(rec + 8);
            const spcc_u16* vals = reinterpret_cast<const spcc_u16*>(rec + 8 + 8 * __popc(present));
            const int sh = (2 * lane) & 31;
            const spcc_u32 below = (1u << sh) - 1u;
            int voff = 0;
#pragma unroll
            for (int j = 0; j < 16; ++j) {
              const bool has = (present >> j) & 1u;
              const spcc_u64 bm = has ? bitmaps[__popc(present & ((1u << j) - 1u))] : 0ull;
              const spcc_u32 lo = static_cast<spcc_u32>(bm), hi = static_cast<spcc_u32>(bm >> 32);
              const spcc_u32 w = lane < 16 ? lo : hi;
              const int rank = voff + (lane < 16 ? 0 : __popc(lo)) + __popc(w & below);
              const spcc_u32 bits = (w >> sh) & 3u;
              const spcc_u32 x0 = (bits & 1u) ? vals[rank] : 0u;
              const spcc_u32 x1 = (bits & 2u) ? vals[rank + (bits & 1u)] : 0u;
              a[j >> 2][j & 3] = x0 | (x1 << 16);
              voff += __popc(lo) + __popc(hi);
            }
            at += (8 + 8 * __popc(present) + 2 * nvals + 7) & ~7;
          } else {
            // Positions: the warp scatters the record's nonzeros into its zeroed operand tile (lane-major
            // mma order), reads its operands back and zeroes what it read.
            // Each lane reads back and zeroes only its own operands, and a buffer is scattered into
            // again two records later, past the other buffer's warp barrier.
            const spcc_u16* vals = reinterpret_cast<const spcc_u16*>(rec + 8);
            const unsigned char* pos = rec + 8 + 2 * nvals;
            const int c0 = h.y & 0xff, c1 = c0 + ((h.y >> 8) & 0xff), c2 = c1 + ((h.y >> 16) & 0xff);
            spcc_u16* tile = scratch + 1024 * turn;
            turn ^= 1;
#pragma unroll 4
            for (int i = lane; i < nvals; i += 32) {
              const int q = (i >= c0) + (i >= c1) + (i >= c2);
              tile[q * 256 + pos[i]] = vals[i];
            }
            __syncwarp();
#pragma unroll
            for (int q = 0; q < 4; ++q) {
              uint4* own = reinterpret_cast<uint4*>(tile) + q * 32 + lane;
              const uint4 w = *own;
              a[q][0] = w.x, a[q][1] = w.y, a[q][2] = w.z, a[q][3] = w.w;
              *own = make_uint4(0, 0, 0, 0);
            }
            at += (8 + 3 * nvals + 7) & ~7;
          }
          // B's operands: rows 64 kt + 16 q .. + 16 of the staged chunk, N_TILE columns.
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            spcc_u32 b[NT / 8][2];
            load_b(b, btile, 4 * kt + q);
            mma_step(acc[s], a[q], b);
          }
        }
      }
    }
#endif
  }

  // Epilogue: the sums of every split (added in split order), bias, ReLU, one rounding, the stores.
  const long long row_base = static_cast<long long>(rb) * ROWS;
#if SPCC_SPLITS > 1
  __syncthreads();                               // every warp is done with the stages ...
  float* part = reinterpret_cast<float*>(smem);  // ... which now hold ROWS x NT partial sums
#pragma unroll
  for (int s = 0; s < S; ++s)
#pragma unroll
    for (int j = 0; j < NT / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        part[((warp * S + s) * 16 + g + 8 * (e >> 1)) * NT + 8 * j + 2 * t + (e & 1)] = acc[s][j][e];
  spcc_cluster_sync();
  {
    // Four columns of one row at a time (N_TILE is a multiple of 8): every split's four loaded first.
    const int lo = split * ROWS / SPLITS, hi = (split + 1) * ROWS / SPLITS;
    for (int i = lo * NT / 4 + threadIdx.x; i < hi * NT / 4; i += 32 * W) {
      const long long row = row_base + 4 * i / NT, col = col0 + 4 * i % NT;
      float4 p[SPLITS];
#pragma unroll
      for (int r = 0; r < SPLITS; ++r) p[r] = spcc_cluster_load4(spcc_smem(part + 4 * i), r);
      float v[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int r = 0; r < SPLITS; ++r) v[0] += p[r].x, v[1] += p[r].y, v[2] += p[r].z, v[3] += p[r].w;
      if (row >= M) continue;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (/*@BIAS*/ false /*@end*/) v[e] += bias[row];
        if (/*@RELU*/ false /*@end*/) v[e] = fmaxf(v[e], 0.f);
      }
      spcc_u16* out = C + row * ld + col;
      if (col + 3 < ld && (reinterpret_cast<unsigned long long>(out) & 7) == 0) {
        *reinterpret_cast<uint2*>(out) = make_uint2(spcc_pack(v[0], v[1]), spcc_pack(v[2], v[3]));
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (col + e < ld) out[e] = static_cast<spcc_u16>(spcc_pack(v[e], 0.f) & 0xffffu);
      }
    }
  }
  spcc_cluster_sync();
#else
#pragma unroll
  for (int s = 0; s < S; ++s)
#pragma unroll
    for (int j = 0; j < NT / 8; ++j)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const long long row = row_base + (warp * S + s) * 16 + g + 8 * half;
        const long long col = col0 + 8 * j + 2 * t;
        if (row >= M || col >= ld) continue;
        float v0 = acc[s][j][2 * half], v1 = acc[s][j][2 * half + 1];
        if (/*@BIAS*/ false /*@end*/) {
          v0 += bias[row];
          v1 += bias[row];
        }
        if (/*@RELU*/ false /*@end*/) {
          v0 = fmaxf(v0, 0.f);
          v1 = fmaxf(v1, 0.f);
        }
        const spcc_u32 r = spcc_pack(v0, v1);
        spcc_u16* p = C + row * ld + col;
        if (col + 1 < ld && (ld & 1) == 0) {
          *reinterpret_cast<spcc_u32*>(p) = r;
        } else {
          p[0] = static_cast<spcc_u16>(r & 0xffffu);
          if (col + 1 < ld) p[1] = static_cast<spcc_u16>(r >> 16);
        }
      }
#endif
}
