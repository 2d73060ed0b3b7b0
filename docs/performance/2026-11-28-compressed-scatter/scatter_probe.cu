// Probe: a block-cooperative scatter kernel for the compressed family (fp16, N = 16).
// A row block's nonzeros of one chunk are one flat list of u32 (value << 16 | place), place = the slot
// of the nonzero in the block's dense operand tile (lane-major mma.sync order); the whole block scatters
// the list into the zeroed tile, then each warp reads its operands (one 16-byte load a lane a step),
// re-zeroes them, and runs the mma with B's fragments shared by its strips. Splits reduce through
// distributed shared memory in a cluster. Checked against fp64 on sampled rows; timed cold (L2
// flushed before every launch) against cublasGemmEx fp16 (fp32 compute).
// nvcc -O3 -arch=sm_90a -std=c++17 scatter_probe.cu -lcublas -o scatter_probe
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#define CK_(x)                                                                              \
  do {                                                                                      \
    cudaError_t e = (x);                                                                    \
    if (e != cudaSuccess) {                                                                 \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e));    \
      exit(1);                                                                              \
    }                                                                                       \
  } while (0)

typedef unsigned int u32;

static __device__ __forceinline__ u32 smem_addr(const void* p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}
static __device__ __forceinline__ void copy16(u32 dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
static __device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int n>
static __device__ __forceinline__ void wait_pending() {
  asm volatile("cp.async.wait_group %0;" ::"n"(n) : "memory");
}
static __device__ __forceinline__ void ldsm_x4_t(u32 (&r)[4], u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
static __device__ __forceinline__ void mma(float (&d)[4], const uint4& a, u32 b0, u32 b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
}
static __device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
static __device__ __forceinline__ float cluster_load(u32 addr, u32 rank) {
  u32 remote;
  float v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(addr), "r"(rank));
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(remote) : "memory");
  return v;
}

// NT = 16 columns, B rows of 32 bytes with the two 16-byte pieces swapped on odd 4-row groups.
template <int W, int S, int CK, int NS>
__global__ void __launch_bounds__(32 * W) scatter_kernel(const unsigned short* __restrict__ B,
                                                         unsigned short* __restrict__ C,
                                                         const u32* __restrict__ seg_table,
                                                         const u32* __restrict__ split_table,
                                                         const uint4* __restrict__ entries, int M, int K,
                                                         int chunks, int splits, int stage_bytes) {
  constexpr int NT = 16, PITCH = 32, ROWS = 16 * W * S, STEPS = CK / 16;
  constexpr int B_BYTES = CK * PITCH;
  constexpr int TILE_BYTES = ROWS * CK * 2 + 16;
  extern __shared__ __align__(16) unsigned char smem[];
  const int stage = B_BYTES + stage_bytes;
  unsigned short* tile = reinterpret_cast<unsigned short*>(smem + NS * stage);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int rb = blockIdx.x / splits, split = blockIdx.x % splits;
  const int c_begin = split_table[rb * (splits + 1) + split], c_end = split_table[rb * (splits + 1) + split + 1];
  const u32* segs = seg_table + static_cast<long long>(rb) * chunks;
  for (int i = threadIdx.x; i < TILE_BYTES / 16; i += 32 * W)
    reinterpret_cast<uint4*>(tile)[i] = make_uint4(0, 0, 0, 0);
  float acc[S][2][4] = {};
  const auto piece_at = [](int row, int p) { return p ^ ((row >> 2) & 1); };
  const auto stage_chunk = [&](int c, int buf) {
    unsigned char* base = smem + buf * stage;
    const long long k0 = static_cast<long long>(c) * CK;
    for (int i = threadIdx.x; i < CK * 2; i += 32 * W) {
      const int row = i >> 1, piece = i & 1;
      const long long k = k0 + row;
      const bool live = k < K;
      copy16(smem_addr(base + row * PITCH + 16 * piece_at(row, piece)), live ? B + k * NT + 8 * piece : B,
             live ? 16 : 0);
    }
    const u32 e0 = segs[c], e1 = segs[c + 1];  // in 16-byte units
    for (u32 i = e0 + threadIdx.x; i < e1; i += 32 * W)
      copy16(smem_addr(base + B_BYTES + 16 * (i - e0)), entries + i, 16);
  };
  for (int i = 0; i < NS - 1; ++i) {
    if (c_begin + i < c_end) stage_chunk(c_begin + i, i);
    commit();
  }
  int buf = 0;
  for (int c = c_begin; c < c_end; ++c, buf = buf + 1 == NS ? 0 : buf + 1) {
    wait_pending<NS - 2>();
    __syncthreads();
    if (c + NS - 1 < c_end) stage_chunk(c + NS - 1, buf == 0 ? NS - 1 : buf - 1);
    commit();
    const int n16 = segs[c + 1] - segs[c];
    const uint4* e = reinterpret_cast<const uint4*>(smem + buf * stage + B_BYTES);
#pragma unroll 2
    for (int i = threadIdx.x; i < n16; i += 32 * W) {
      const uint4 v = e[i];
      tile[v.x & 0xffff] = v.x >> 16;
      tile[v.y & 0xffff] = v.y >> 16;
      tile[v.z & 0xffff] = v.z >> 16;
      tile[v.w & 0xffff] = v.w >> 16;
    }
    __syncthreads();
    const u32 btile = smem_addr(smem + buf * stage);
#pragma unroll
    for (int q = 0; q < STEPS; ++q) {
      const int krow = 16 * q + (lane & 7) + 8 * ((lane >> 3) & 1);
      u32 b[4];
      ldsm_x4_t(b, btile + krow * PITCH + 16 * piece_at(krow, lane >> 4));
#pragma unroll
      for (int s = 0; s < S; ++s) {
        uint4* own = reinterpret_cast<uint4*>(tile) + ((warp * S + s) * STEPS + q) * 32 + lane;
        const uint4 a = *own;
        *own = make_uint4(0, 0, 0, 0);
        mma(acc[s][0], a, b[0], b[1]);
        mma(acc[s][1], a, b[2], b[3]);
      }
    }
  }
  // Epilogue: cluster reduction over splits (the stage memory holds ROWS x NT fp32 partials).
  __syncthreads();
  float* part = reinterpret_cast<float*>(smem);
#pragma unroll
  for (int s = 0; s < S; ++s)
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e2 = 0; e2 < 4; ++e2)
        part[((warp * S + s) * 16 + g + 8 * (e2 >> 1)) * NT + 8 * j + 2 * t + (e2 & 1)] = acc[s][j][e2];
  cluster_sync();
  const int lo = split * ROWS / splits, hi = (split + 1) * ROWS / splits;
  for (int i = lo * NT + threadIdx.x; i < hi * NT; i += 32 * W) {
    const long long row = static_cast<long long>(rb) * ROWS + i / NT;
    float v = 0.f;
    for (int r = 0; r < splits; ++r) v += cluster_load(smem_addr(part + i), r);
    if (row < M) C[row * NT + i % NT] = __half_as_ushort(__float2half_rn(v));
  }
  cluster_sync();
}


// v2: Flash-LLM-like pipeline: the next chunk's entries go global -> registers while the warps run the
// current chunk's mma; then they are scattered into the other of two A tiles; one barrier a chunk.
template <int W, int S, int CK, int NS, int E>
__global__ void __launch_bounds__(32 * W) scatter2_kernel(const unsigned short* __restrict__ B,
                                                          unsigned short* __restrict__ C,
                                                          const u32* __restrict__ seg_table,
                                                          const u32* __restrict__ split_table,
                                                          const uint4* __restrict__ entries, int M, int K,
                                                          int chunks, int splits, int stage_bytes) {
  constexpr int NT = 16, PITCH = 32, ROWS = 16 * W * S, STEPS = CK / 16, T = 32 * W;
  constexpr int B_BYTES = CK * PITCH;
  constexpr int TILE_BYTES = ROWS * CK * 2 + 16;
  extern __shared__ __align__(16) unsigned char smem[];
  unsigned short* tiles = reinterpret_cast<unsigned short*>(smem + NS * B_BYTES);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int rb = blockIdx.x / splits, split = blockIdx.x % splits;
  const int c_begin = split_table[rb * (splits + 1) + split], c_end = split_table[rb * (splits + 1) + split + 1];
  const u32* segs = seg_table + static_cast<long long>(rb) * chunks;
  for (int i = threadIdx.x; i < 2 * TILE_BYTES / 16; i += T)
    reinterpret_cast<uint4*>(tiles)[i] = make_uint4(0, 0, 0, 0);
  float acc[S][2][4] = {};
  const auto piece_at = [](int row, int p) { return p ^ ((row >> 2) & 1); };
  const auto stage_b = [&](int c, int buf) {
    unsigned char* base = smem + buf * B_BYTES;
    const long long k0 = static_cast<long long>(c) * CK;
    for (int i = threadIdx.x; i < CK * 2; i += T) {
      const int row = i >> 1, piece = i & 1;
      const long long k = k0 + row;
      const bool live = k < K;
      copy16(smem_addr(base + row * PITCH + 16 * piece_at(row, piece)), live ? B + k * NT + 8 * piece : B,
             live ? 16 : 0);
    }
  };
  uint4 reg[E];
  const auto load_entries = [&](int c) {
    const u32 e0 = segs[c], e1 = segs[c + 1];
#pragma unroll
    for (int j = 0; j < E; ++j) {
      const u32 i = e0 + threadIdx.x + j * T;
      reg[j] = i < e1 ? __ldg(entries + i) : make_uint4(ROWS * CK, ROWS * CK, ROWS * CK, ROWS * CK);
    }
  };
  const auto scatter = [&](unsigned short* tile) {
#pragma unroll
    for (int j = 0; j < E; ++j) {
      tile[reg[j].x & 0xffff] = reg[j].x >> 16;
      tile[reg[j].y & 0xffff] = reg[j].y >> 16;
      tile[reg[j].z & 0xffff] = reg[j].z >> 16;
      tile[reg[j].w & 0xffff] = reg[j].w >> 16;
    }
  };
  __syncthreads();
  for (int i = 0; i < NS - 1; ++i) {
    if (c_begin + i < c_end) stage_b(c_begin + i, i);
    commit();
  }
  if (c_begin < c_end) {
    load_entries(c_begin);
    scatter(tiles);
  }
  int buf = 0, cur = 0;
  for (int c = c_begin; c < c_end; ++c, buf = buf + 1 == NS ? 0 : buf + 1, cur ^= 1) {
    wait_pending<NS - 2>();
    __syncthreads();
    if (c + NS - 1 < c_end) stage_b(c + NS - 1, buf == 0 ? NS - 1 : buf - 1);
    commit();
    const bool more = c + 1 < c_end;
    if (more) load_entries(c + 1);
    unsigned short* tile = tiles + cur * (TILE_BYTES / 2);
    const u32 btile = smem_addr(smem + buf * B_BYTES);
#pragma unroll
    for (int q = 0; q < STEPS; ++q) {
      const int krow = 16 * q + (lane & 7) + 8 * ((lane >> 3) & 1);
      u32 b[4];
      ldsm_x4_t(b, btile + krow * PITCH + 16 * piece_at(krow, lane >> 4));
#pragma unroll
      for (int s = 0; s < S; ++s) {
        uint4* own = reinterpret_cast<uint4*>(tile) + ((warp * S + s) * STEPS + q) * 32 + lane;
        const uint4 a = *own;
        *own = make_uint4(0, 0, 0, 0);
        mma(acc[s][0], a, b[0], b[1]);
        mma(acc[s][1], a, b[2], b[3]);
      }
    }
    if (more) scatter(tiles + (cur ^ 1) * (TILE_BYTES / 2));
  }
  __syncthreads();
  float* part = reinterpret_cast<float*>(smem);
#pragma unroll
  for (int s = 0; s < S; ++s)
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e2 = 0; e2 < 4; ++e2)
        part[((warp * S + s) * 16 + g + 8 * (e2 >> 1)) * NT + 8 * j + 2 * t + (e2 & 1)] = acc[s][j][e2];
  cluster_sync();
  const int lo = split * ROWS / splits, hi = (split + 1) * ROWS / splits;
  for (int i = lo * NT + threadIdx.x; i < hi * NT; i += T) {
    const long long row = static_cast<long long>(rb) * ROWS + i / NT;
    float v = 0.f;
    for (int r = 0; r < splits; ++r) v += cluster_load(smem_addr(part + i), r);
    if (row < M) C[row * NT + i % NT] = __half_as_ushort(__float2half_rn(v));
  }
  cluster_sync();
}

struct Problem {
  int M, K;
  std::vector<long long> row_ptr;
  std::vector<int> col;
  std::vector<unsigned short> val;
};

static Problem make_problem(int M, int K, double density, unsigned seed) {
  Problem p{M, K, {0}, {}, {}};
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const int per_row = static_cast<int>(std::lround(density * K));
  std::vector<int> cols(K);
  for (int i = 0; i < K; ++i) cols[i] = i;
  for (int r = 0; r < M; ++r) {
    // per_row distinct random columns (partial Fisher-Yates), sorted.
    for (int i = 0; i < per_row; ++i) std::swap(cols[i], cols[i + rng() % (K - i)]);
    std::vector<int> c(cols.begin(), cols.begin() + per_row);
    std::sort(c.begin(), c.end());
    for (int x : c) {
      p.col.push_back(x);
      p.val.push_back(__half_as_ushort(__float2half(u(rng))));
    }
    p.row_ptr.push_back(static_cast<long long>(p.col.size()));
  }
  return p;
}

struct Stream {
  std::vector<u32> seg_table, split_table, entries;
  int stage_bytes = 0, chunks = 0, row_blocks = 0, splits = 1;
};

static Stream make_stream(const Problem& p, int W, int S, int CK, int splits) {
  const int ROWS = 16 * W * S, STEPS = CK / 16;
  Stream s;
  s.chunks = (p.K + CK - 1) / CK;
  s.row_blocks = (p.M + ROWS - 1) / ROWS;
  s.splits = splits;
  const u32 pad = ROWS * CK;
  std::vector<std::vector<u32>> seg(s.chunks);
  for (int rb = 0; rb < s.row_blocks; ++rb) {
    for (auto& v : seg) v.clear();
    for (int lr = 0; lr < ROWS; ++lr) {
      const int r = rb * ROWS + lr;
      if (r >= p.M) break;
      for (long long i = p.row_ptr[r]; i < p.row_ptr[r + 1]; ++i) {
        const int c = p.col[i], ch = c / CK, kk = c % CK, q = kk / 16, cc = kk % 16;
        const int strip = lr / 16, rr = lr % 16;
        const int ln = (rr % 8) * 4 + (cc % 8) / 2, reg = 2 * (cc / 8) + rr / 8;
        const u32 place = ((strip * STEPS + q) * 32 + ln) * 8 + reg * 2 + cc % 2;
        seg[ch].push_back((u32{p.val[i]} << 16) | place);
      }
    }
    std::vector<double> cost(s.chunks);
    for (int ch = 0; ch < s.chunks; ++ch) {
      s.seg_table.push_back(static_cast<u32>(s.entries.size() / 4));
      auto& v = seg[ch];
      while (v.size() % 4) v.push_back(pad);
      s.entries.insert(s.entries.end(), v.begin(), v.end());
      s.stage_bytes = std::max<int>(s.stage_bytes, static_cast<int>(v.size() * 4));
      cost[ch] = v.size() * 4.0 + CK * 16.0;
    }
    // splits by equal cost
    double total = 0;
    for (double c : cost) total += c;
    s.split_table.push_back(0);
    int c = 0;
    double sum = 0;
    for (int k = 1; k < splits; ++k) {
      const double goal = total * k / splits;
      while (c < s.chunks && sum + cost[c] / 2 <= goal) sum += cost[c++];
      s.split_table.push_back(c);
    }
    s.split_table.push_back(s.chunks);
  }
  s.seg_table.push_back(static_cast<u32>(s.entries.size() / 4));
  // seg_table is per row block: rb * chunks + c, with a trailing end; rebuild as rb*chunks + c .. +1
  s.stage_bytes = std::max(16, s.stage_bytes);
  return s;
}

struct Timer {
  cudaEvent_t a, b;
  Timer() { cudaEventCreate(&a), cudaEventCreate(&b); }
};

static void* g_flush = nullptr;
static const size_t kFlush = 256u << 20;

template <class F>
static double time_cold(F&& launch, int reps = 25) {
  Timer tm;
  std::vector<float> v;
  launch();
  CK_(cudaDeviceSynchronize());
  for (int i = 0; i < reps; ++i) {
    CK_(cudaMemsetAsync(g_flush, i & 0xff, kFlush));
    cudaEventRecord(tm.a);
    launch();
    cudaEventRecord(tm.b);
    CK_(cudaEventSynchronize(tm.b));
    float ms;
    cudaEventElapsedTime(&ms, tm.a, tm.b);
    v.push_back(ms * 1000.f);
  }
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <int W, int S, int CK, int V = 1>
static double run_config(const Problem& p, const unsigned short* dB, unsigned short* dC, int splits,
                         const std::vector<unsigned short>& hB, double& max_rel, int& stage_out, int& smem_out,
                         double& stream_mb) {
  constexpr int NS = V == 1 ? 2 : 3;
  Stream s = make_stream(p, W, S, CK, splits);
  stage_out = s.stage_bytes;
  const int ROWS = 16 * W * S;
  const int smem = V == 1 ? NS * (CK * 32 + s.stage_bytes) + ROWS * CK * 2 + 16
                          : NS * CK * 32 + 2 * (ROWS * CK * 2 + 16);
  const int per_thread = (s.stage_bytes / 16 + 32 * W - 1) / (32 * W);
  const int part = ROWS * 16 * 4;
  const int smem_total = std::max(smem, part);
  smem_out = smem_total;
  stream_mb = s.entries.size() * 4.0 / 1e6;
  u32 *dseg, *dsplit;
  uint4* dent;
  CK_(cudaMalloc(&dseg, s.seg_table.size() * 4));
  CK_(cudaMalloc(&dsplit, s.split_table.size() * 4));
  CK_(cudaMalloc(&dent, s.entries.size() * 4 + 16));
  CK_(cudaMemcpy(dseg, s.seg_table.data(), s.seg_table.size() * 4, cudaMemcpyHostToDevice));
  CK_(cudaMemcpy(dsplit, s.split_table.data(), s.split_table.size() * 4, cudaMemcpyHostToDevice));
  CK_(cudaMemcpy(dent, s.entries.data(), s.entries.size() * 4, cudaMemcpyHostToDevice));
  auto kern = V == 1 ? scatter_kernel<W, S, CK, NS>
            : per_thread <= 2 ? scatter2_kernel<W, S, CK, NS, 2>
            : per_thread <= 4 ? scatter2_kernel<W, S, CK, NS, 4>
            : per_thread <= 8 ? scatter2_kernel<W, S, CK, NS, 8>
            : per_thread <= 12 ? scatter2_kernel<W, S, CK, NS, 12> : nullptr;
  if (!kern) return -1;
  if (smem_total > 227 * 1024) return -1;
  CK_(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_total));
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(s.row_blocks * splits);
  cfg.blockDim = dim3(32 * W);
  cfg.dynamicSmemBytes = smem_total;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = splits;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  const int chunks = s.chunks, stage_bytes = s.stage_bytes, M = p.M, K = p.K;
  auto launch = [&] {
    CK_(cudaLaunchKernelEx(&cfg, kern, dB, dC, (const u32*)dseg, (const u32*)dsplit, (const uint4*)dent, M, K,
                           chunks, splits, stage_bytes));
  };
  CK_(cudaMemset(dC, 0xff, static_cast<size_t>(p.M) * 16 * 2));  // NaN poison
  launch();
  CK_(cudaDeviceSynchronize());
  std::vector<unsigned short> hC(static_cast<size_t>(p.M) * 16);
  CK_(cudaMemcpy(hC.data(), dC, hC.size() * 2, cudaMemcpyDeviceToHost));
  max_rel = 0;
  double cmax = 1e-30;
  std::vector<double> ref(static_cast<size_t>(p.M) * 16, 0.0);
  for (int r = 0; r < p.M; r += 7) {
    for (long long i = p.row_ptr[r]; i < p.row_ptr[r + 1]; ++i) {
      const double a = __half2float(__ushort_as_half(p.val[i]));
      for (int j = 0; j < 16; ++j)
        ref[static_cast<size_t>(r) * 16 + j] += a * __half2float(__ushort_as_half(hB[static_cast<size_t>(p.col[i]) * 16 + j]));
    }
    for (int j = 0; j < 16; ++j) cmax = std::max(cmax, std::fabs(ref[static_cast<size_t>(r) * 16 + j]));
  }
  for (int r = 0; r < p.M; r += 7)
    for (int j = 0; j < 16; ++j) {
      const double got = __half2float(__ushort_as_half(hC[static_cast<size_t>(r) * 16 + j]));
      const double err = std::fabs(got - ref[static_cast<size_t>(r) * 16 + j]) / cmax;
      if (!(err == err)) max_rel = 1e9;
      else max_rel = std::max(max_rel, err);
    }
  const double us = time_cold(launch);
  cudaFree(dseg), cudaFree(dsplit), cudaFree(dent);
  return us;
}

int main(int argc, char** argv) {
  const int shapes[][2] = {{4096, 4096},  {4096, 11008}, {11008, 4096}, {4096, 14336},
                           {14336, 4096}, {8192, 8192},  {8192, 28672}, {28672, 8192}};
  const double densities[] = {0.1, 0.3, 0.5};
  int sms = 0;
  CK_(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop;
  CK_(cudaGetDeviceProperties(&prop, 0));
  printf("device %s, %d SMs\n", prop.name, sms);
  CK_(cudaMalloc(&g_flush, kFlush));
  cublasHandle_t h;
  cublasCreate(&h);
  printf("%-12s %5s %10s | %-14s %6s %8s %8s %9s %7s %9s\n", "shape", "dens", "cublas_us", "config", "splits",
         "stageB", "smemB", "us", "x_cub", "max_rel");
  for (const double d : densities)
    for (const auto& sh : shapes) {
      const int M = sh[0], K = sh[1];
      Problem p = make_problem(M, K, d, 1234 + M + K);
      std::vector<unsigned short> hB(static_cast<size_t>(K) * 16);
      std::mt19937 rng(7);
      std::uniform_real_distribution<float> u(-1.f, 1.f);
      for (auto& x : hB) x = __half_as_ushort(__float2half(u(rng)));
      unsigned short *dB, *dC, *dA;
      CK_(cudaMalloc(&dB, hB.size() * 2));
      CK_(cudaMalloc(&dC, static_cast<size_t>(M) * 16 * 2));
      CK_(cudaMalloc(&dA, static_cast<size_t>(M) * K * 2));
      CK_(cudaMemcpy(dB, hB.data(), hB.size() * 2, cudaMemcpyHostToDevice));
      // dense A (row-major M x K) for cuBLAS
      {
        std::vector<unsigned short> hA(static_cast<size_t>(M) * K, 0);
        for (int r = 0; r < M; ++r)
          for (long long i = p.row_ptr[r]; i < p.row_ptr[r + 1]; ++i) hA[static_cast<size_t>(r) * K + p.col[i]] = p.val[i];
        CK_(cudaMemcpy(dA, hA.data(), hA.size() * 2, cudaMemcpyHostToDevice));
      }
      const float one = 1.f, zero = 0.f;
      // C^T (16 x M, col-major = C row-major) = B^T (16 x K) * A^T (K x M)
      auto cub = [&] {
        cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 16, M, K, &one, dB, CUDA_R_16F, 16, dA, CUDA_R_16F, K, &zero, dC,
                     CUDA_R_16F, 16, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      };
      const double cub_us = time_cold(cub);
      auto report = [&](const char* name, int W, int S, int CK, auto fn) {
        const int rows = 16 * W * S, rbs = (M + rows - 1) / rows;
        int splits = std::clamp((4 * sms + rbs - 1) / rbs, 1, 8);
        double err = 0, mb = 0;
        int stage = 0, smem = 0;
        const double us = fn(p, dB, dC, splits, hB, err, stage, smem, mb);
        printf("%5dx%-6d %5.2f %10.1f | %-14s %6d %8d %8d %9.1f %7.2f %9.1e  (stream %.1f MB)\n", M, K, 1 - d, cub_us,
               name, splits, stage, smem, us, us > 0 ? cub_us / us : 0, err, mb);
        fflush(stdout);
      };
      report("v1 w4s1c128", 4, 1, 128, run_config<4, 1, 128>);
      report("v1 w8s2c64", 8, 2, 64, run_config<8, 2, 64>);
      report("v2 w4s1c128", 4, 1, 128, run_config<4, 1, 128, 2>);
      report("v2 w4s1c64", 4, 1, 64, run_config<4, 1, 64, 2>);
      report("v2 w4s2c64", 4, 2, 64, run_config<4, 2, 64, 2>);
      report("v2 w8s1c64", 8, 1, 64, run_config<8, 1, 64, 2>);
      report("v2 w8s2c64", 8, 2, 64, run_config<8, 2, 64, 2>);
      cudaFree(dA), cudaFree(dB), cudaFree(dC);
    }
  return 0;
}
