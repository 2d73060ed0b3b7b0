// vector_smem_probe: whether the vector layout (templates/spmm_vector.cu) at N = 8 and 16 would run
// faster with B staged in shared memory than with B's rows read through L1, the way the committed
// kernel reads them (docs/performance/2026-11-29-compressed-vector-small-n.md, run 67).
//
// Not an executor: the vector stream's format (a row table, entries value << 16 | column) of random
// 90 % rows, fp16, fp32 sums. The L1 kernel is the template's loop (a warp a row, 16 warps a block of 16
// rows, B's rows by ld.global.nc, two column groups of 16 lanes at N = 16); the shared-memory kernels
// copy all of B (K x N, at most 200 KiB) into shared memory once a block, then persistent blocks (one an
// SM) take rows a warp at a time, B's rows by ld.shared (column groups: lanes l and l + 16, or l and
// l + 1). Streams rotated over 240 MB (cold L2), medians of 9 rounds; each kernel checked against an
// fp64 product on 64 rows first.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 tools/bench/vector_smem_probe.cu -o vector_smem_probe
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>
#define CK(x)                                                          \
  do {                                                                 \
    cudaError_t e = (x);                                               \
    if (e != cudaSuccess) {                                            \
      printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      exit(1);                                                         \
    }                                                                  \
  } while (0)
typedef unsigned int u32;

__device__ __forceinline__ uint4 ldnc(const u32* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}
__device__ __forceinline__ float h2f(u32 h) { return __half2float(__ushort_as_half((unsigned short)h)); }

// SRC 0: B through L1 (ld.global.nc), 1: B in shared memory (staged once a block, persistent blocks).
// GB: lane bit of the column group (G = N / 8 groups at N = 16): 4 -> lanes l, l + 16; 0 -> l, l + 1.
template <int N, int SRC, int GB, int U>
__global__ void __launch_bounds__(1024)
    vec(const __half* __restrict__ B, __half* __restrict__ C, const u32* __restrict__ table,
        const u32* __restrict__ data, int M, int K, int rows_per_block) {
  extern __shared__ uint4 sb[];
  constexpr int G = N / 8, NG = 8;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, W = blockDim.x >> 5;
  const int g = G == 1 ? 0 : (lane >> GB) & 1;
  const int sub = G == 1 ? lane : GB == 4 ? (lane & 15) : (lane >> 1);
  constexpr int L = 32 / G;
  if (SRC == 1) {
    const uint4* src = reinterpret_cast<const uint4*>(B);
    const int words = K * N / 8;
    for (int i = threadIdx.x; i < words; i += blockDim.x) sb[i] = src[i];
    __syncthreads();
  }
  const int first_rb = blockIdx.x, stride = gridDim.x;
  const int row_blocks = (M + rows_per_block - 1) / rows_per_block;
  for (int rb = first_rb; rb < row_blocks; rb += stride) {
    const int r0 = rb * rows_per_block, r1 = min(M, r0 + rows_per_block);
    for (int row = r0 + warp; row < r1; row += W) {
      const u32 begin = table[row], end = table[row + 1];
      float acc[NG];
#pragma unroll
      for (int c = 0; c < NG; ++c) acc[c] = 0.f;
      for (u32 at = (begin & ~3u) + 4u * sub; at < end; at += 4u * L * U) {
        uint4 q[U];
#pragma unroll
        for (int u = 0; u < U; ++u)
          q[u] = at + 4u * L * u < end ? ldnc(data + at + 4u * L * u) : make_uint4(0, 0, 0, 0);
        uint4 bw[U][4];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const u32 e[4] = {q[u].x, q[u].y, q[u].z, q[u].w};
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const u32 col = e[j] & 0xffffu;
            if (SRC == 0) {
              const u32* p = reinterpret_cast<const u32*>(B + col * N + g * 8);
              asm("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];"
                  : "=r"(bw[u][j].x), "=r"(bw[u][j].y), "=r"(bw[u][j].z), "=r"(bw[u][j].w)
                  : "l"(p));
            } else {
              bw[u][j] = sb[col * G + g];
            }
          }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const u32 e[4] = {q[u].x, q[u].y, q[u].z, q[u].w};
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const u32 i = at + 4u * L * u + j;
            const bool in = i >= begin && i < end;
            const float a = in ? h2f(e[j] >> 16) : 0.f;
            const u32 w[4] = {in ? bw[u][j].x : 0u, in ? bw[u][j].y : 0u, in ? bw[u][j].z : 0u,
                              in ? bw[u][j].w : 0u};
#pragma unroll
            for (int c = 0; c < NG; ++c)
              acc[c] = fmaf(a, h2f(c % 2 ? w[c / 2] >> 16 : w[c / 2] & 0xffff), acc[c]);
          }
        }
      }
      // reduce over the group's L lanes: sub bits. lane offset for sub bit b: GB==4 or G==1 -> 1<<b ; GB==0
      // -> 2<<b
#pragma unroll
      for (int s = 0; s < 3; ++s) {
        const int sb_bit = (G == 1 ? 16 : 8) >> s;  // sub's bit value, from the top
        const int o = (G == 1 || GB == 4) ? sb_bit : sb_bit * 2;
        const int h = 8 >> (s + 1);
        const bool up = (sub & sb_bit) != 0;
#pragma unroll
        for (int j = 0; j < h; ++j) {
          const float send = up ? acc[j] : acc[j + h], keep = up ? acc[j + h] : acc[j];
          acc[j] = keep + __shfl_xor_sync(0xffffffffu, send, o);
        }
      }
      // remaining sub bits below: (G==1: 2,1) (G==2: 1)
#pragma unroll
      for (int sb_bit = (G == 1 ? 2 : 1); sb_bit > 0; sb_bit >>= 1) {
        const int o = (G == 1 || GB == 4) ? sb_bit : sb_bit * 2;
        acc[0] += __shfl_xor_sync(0xffffffffu, acc[0], o);
      }
      const int col = g * 8 + (sub >> (G == 1 ? 2 : 1));
      if ((sub & (G == 1 ? 3 : 1)) == 0) C[(long)row * N + col] = __float2half_rn(acc[0]);
    }
  }
}

int main(int argc, char** argv) {
  int dev = 0;
  CK(cudaSetDevice(dev));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, dev));
  printf("device %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  struct Shape {
    int M, K;
  } shapes[] = {{4096, 4096}, {11008, 4096}, {14336, 4096}, {8192, 8192}, {28672, 8192}, {4096, 11008}};
  for (auto sh : shapes)
    for (int N : {8, 16}) {
      const int M = sh.M, K = sh.K;
      if ((long)K * N * 2 > 200 * 1024) {
        continue;
      }
      std::mt19937_64 rng(1);
      std::vector<u32> table(M + 1), data;
      std::vector<int> cols(K);
      for (int i = 0; i < K; ++i) cols[i] = i;
      const int per_row = K / 10;
      for (int r = 0; r < M; ++r) {
        table[r] = data.size();
        for (int i = 0; i < per_row; ++i) std::swap(cols[i], cols[i + rng() % (K - i)]);
        std::sort(cols.begin(), cols.begin() + per_row);
        for (int i = 0; i < per_row; ++i) {
          float v = (float)((rng() % 2001) - 1000) / 1000.f;
          u32 h = __half_as_ushort(__float2half(v));
          data.push_back(h << 16 | (u32)cols[i]);
        }
      }
      table[M] = data.size();
      while (data.size() % 4) data.push_back(0);
      const size_t sbytes = data.size() * 4;
      const int copies = std::max(2, (int)(240e6 / sbytes) + 1);
      std::vector<u32*> dd(copies);
      for (auto& p : dd) {
        CK(cudaMalloc(&p, sbytes));
        CK(cudaMemcpy(p, data.data(), sbytes, cudaMemcpyHostToDevice));
      }
      u32* dt;
      CK(cudaMalloc(&dt, table.size() * 4));
      CK(cudaMemcpy(dt, table.data(), table.size() * 4, cudaMemcpyHostToDevice));
      std::vector<__half> hb((size_t)K * N);
      for (auto& x : hb) x = __float2half((float)((rng() % 2001) - 1000) / 1000.f);
      __half *dB, *dC, *dC2;
      CK(cudaMalloc(&dB, hb.size() * 2));
      CK(cudaMemcpy(dB, hb.data(), hb.size() * 2, cudaMemcpyHostToDevice));
      CK(cudaMalloc(&dC, (size_t)M * N * 2));
      CK(cudaMalloc(&dC2, (size_t)M * N * 2));
      // reference on CPU for 64 rows
      auto check = [&](__half* d, const char* what) {
        std::vector<__half> hc((size_t)M * N);
        CK(cudaMemcpy(hc.data(), d, hc.size() * 2, cudaMemcpyDeviceToHost));
        double worst = 0;
        for (int r = 0; r < M; r += M / 64)
          for (int c = 0; c < N; ++c) {
            double s = 0;
            for (u32 i = table[r]; i < table[r + 1]; ++i)
              s += (double)__half2float(__ushort_as_half(data[i] >> 16)) *
                   __half2float(hb[(data[i] & 0xffff) * (size_t)N + c]);
            double got = __half2float(hc[(size_t)r * N + c]);
            worst = std::max(worst, std::abs(got - s) / std::max(1.0, std::abs(s)));
          }
        if (worst > 2e-3) printf("  %s: max err %.3g FAILED\n", what, worst);
        return worst;
      };
      auto timeit = [&](auto launch) {
        cudaEvent_t a, b;
        CK(cudaEventCreate(&a));
        CK(cudaEventCreate(&b));
        for (int i = 0; i < copies; ++i) launch(dd[i]);
        CK(cudaDeviceSynchronize());
        std::vector<float> ts;
        for (int rep = 0; rep < 9; ++rep) {
          CK(cudaEventRecord(a));
          for (int i = 0; i < copies; ++i) launch(dd[i]);
          CK(cudaEventRecord(b));
          CK(cudaEventSynchronize(b));
          float ms;
          CK(cudaEventElapsedTime(&ms, a, b));
          ts.push_back(ms * 1000 / copies);
        }
        CK(cudaGetLastError());
        std::sort(ts.begin(), ts.end());
        return ts[4];
      };
      printf("%dx%d N=%d: stream %.1f MB, %d copies\n", M, K, N, sbytes / 1e6, copies);
      const int sms = prop.multiProcessorCount;
      auto run_l1 = [&](auto kern, int W, const char* name) {
        const int rpb = 16;
        const int grid = (M + rpb - 1) / rpb;
        float t = timeit([&](u32* d) { kern<<<grid, 32 * W>>>(dB, dC, dt, d, M, K, rpb); });
        CK(cudaMemset(dC, 0xff, (size_t)M * N * 2));
        kern<<<grid, 32 * W>>>(dB, dC, dt, dd[0], M, K, rpb);
        CK(cudaDeviceSynchronize());
        printf("  %-28s %8.2f us  err %.2g\n", name, t, check(dC, name));
      };
      auto run_sm = [&](auto kern, int W, int blocks_per_sm, const char* name) {
        const size_t smem = (size_t)K * N * 2;
        CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        const int rpb = W;  // a row a warp a round
        const int grid = std::min(sms * blocks_per_sm, (M + rpb - 1) / rpb);
        float t = timeit([&](u32* d) { kern<<<grid, 32 * W, smem>>>(dB, dC2, dt, d, M, K, rpb); });
        CK(cudaMemset(dC2, 0xff, (size_t)M * N * 2));
        kern<<<grid, 32 * W, smem>>>(dB, dC2, dt, dd[0], M, K, rpb);
        CK(cudaDeviceSynchronize());
        printf("  %-28s %8.2f us  err %.2g\n", name, t, check(dC2, name));
      };
      if (N == 16) {
        run_l1(vec<16, 0, 4, 1>, 16, "L1 16w (committed)");
        run_sm(vec<16, 1, 4, 1>, 16, 1, "smem 16w hi-groups U1");
        run_sm(vec<16, 1, 0, 1>, 16, 1, "smem 16w pair-groups U1");
        run_sm(vec<16, 1, 0, 2>, 16, 1, "smem 16w pair-groups U2");
        run_sm(vec<16, 1, 0, 2>, 32, 1, "smem 32w pair-groups U2");
      } else {
        run_l1(vec<8, 0, 4, 1>, 16, "L1 16w (committed)");
        run_sm(vec<8, 1, 4, 1>, 16, 1, "smem 16w U1");
        run_sm(vec<8, 1, 4, 2>, 16, 1, "smem 16w U2");
        run_sm(vec<8, 1, 4, 2>, 32, 1, "smem 32w U2");
      }
      for (auto p : dd) CK(cudaFree(p));
      CK(cudaFree(dt));
      CK(cudaFree(dB));
      CK(cudaFree(dC));
      CK(cudaFree(dC2));
    }
  return 0;
}
