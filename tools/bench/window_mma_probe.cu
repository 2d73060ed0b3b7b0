// window_mma_probe: how fast tensor cores run condensed windows (docs/design/condensed-windows.md) on
// this GPU, against dense cuBLAS fp16 on the same problem: the measurement that decides which bound
// of the condensed-window analysis holds (docs/performance/2026-11-28-condensed-windows.md).
//
// The probe kernel is the family's skeleton, not a planned executor: windows of H rows (16 or 32) of
// an M x K matrix, each with a gathered union of `share` x K columns (random, sorted; padded to 16),
// its values packed dense in mma fragment order; B (K x N fp16, row-major) rows of the union gathered
// by cp.async into shared memory (four stages, 16-byte pieces swizzled against bank conflicts),
// fragments by ldmatrix.trans, mma.sync m16n8k16 (fp32 accumulate), C (M x N fp16). A block takes one
// window and 256 columns of N; four warps of 64 columns each.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -lcublas tools/bench/window_mma_probe.cu -o window_mma_probe
//   window_mma_probe [M K N]   (default 4096 4096 2048)
//
// It checks a small problem against an fp64 CPU product first (exit 1 above 1e-2 relative), then
// times (CUDA events, medians of 20 after warm-up) each window height and kept share and cuBLAS
// (cublasGemmEx fp16 in, fp32 compute, the default algorithm and the best of its tensor-op
// algorithms), and prints time, effective TFLOP/s of the kept work, and cuBLAS time / probe time.
#include <cublas_v2.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#define CHECK(x)                                                                               \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(2);                                                                            \
    }                                                                                          \
  } while (0)
#define CHECK_BLAS(x)                                                                  \
  do {                                                                                 \
    cublasStatus_t s_ = (x);                                                           \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                 \
      std::fprintf(stderr, "%s:%d: %s: status %d\n", __FILE__, __LINE__, #x, int(s_)); \
      std::exit(2);                                                                    \
    }                                                                                  \
  } while (0)

namespace {

constexpr int kNTile = 256;  // columns of C a block takes
constexpr int kStages = 4;   // k-steps of B in flight
constexpr int kRowBytes = kNTile * 2;
constexpr int kStepBytes = 16 * kRowBytes;  // 16 gathered rows of B

// The 16-byte piece `chunk` of row `row` of a stage, swizzled so that ldmatrix's 8 rows of one
// column of pieces fall in 8 different bank groups.
__device__ __forceinline__ int swizzle(int row, int chunk) {
  return row * kRowBytes + ((chunk ^ (row & 7)) << 4);
}

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// windows: W windows of H rows; window w has steps[w + 1] - steps[w] k-steps of 16 columns (cols,
// k-step major), its values (H/16 fragments a k-step, each 32 lanes x 4 words) from vals at
// steps[w] * (H/16) * 128 words, and its rows rows[w * H .. w * H + H).
template <int H>
__global__ void __launch_bounds__(128)
    window_kernel(const __half* __restrict__ B, __half* __restrict__ C, const int* __restrict__ steps,
                  const int* __restrict__ cols, const uint4* __restrict__ vals, const int* __restrict__ rows,
                  int N) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int F = H / 16;  // m16 fragments a window
  const int w = blockIdx.y, n0 = blockIdx.x * kNTile;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int s0 = steps[w], s1 = steps[w + 1], nsteps = s1 - s0;
  float acc[F][8][4] = {};

  // Stage s: the 16 gathered rows of k-step `step` (512 pieces, four a thread).
  const auto load = [&](int step, int stage) {
    unsigned char* base = smem + stage * kStepBytes;
    for (int p = threadIdx.x; p < 16 * (kRowBytes / 16); p += 128) {
      const int r = p / (kRowBytes / 16), chunk = p % (kRowBytes / 16);
      const int k = cols[(s0 + step) * 16 + r];
      cp_async16(base + swizzle(r, chunk), B + static_cast<size_t>(k) * N + n0 + chunk * 8);
    }
  };
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < nsteps) load(s, s);
    cp_commit();
  }
  for (int step = 0; step < nsteps; ++step) {
    cp_wait<kStages - 2>();
    __syncthreads();
    if (step + kStages - 1 < nsteps) load(step + kStages - 1, (step + kStages - 1) % kStages);
    cp_commit();
    uint4 a[F];
    for (int f = 0; f < F; ++f) a[f] = vals[(static_cast<size_t>(s0 + step) * F + f) * 32 + lane];
    const unsigned char* base = smem + (step % kStages) * kStepBytes;
    for (int t = 0; t < 4; ++t) {  // 16 columns of this warp's 64 a time: two n8 tiles
      // ldmatrix.x4.trans: matrices (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15).
      const int m = lane >> 3, r = (lane & 7) + ((m & 1) << 3);
      const int chunk = (warp * 64 + t * 16) / 8 + (m >> 1);
      const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(base + swizzle(r, chunk)));
      unsigned b0, b1, b2, b3;
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(b0), "=r"(b1), "=r"(b2), "=r"(b3)
                   : "r"(addr));
      for (int f = 0; f < F; ++f)
        for (int h = 0; h < 2; ++h) {
          float* d = acc[f][t * 2 + h];
          const unsigned x0 = h ? b2 : b0, x1 = h ? b3 : b1;
          asm volatile(
              "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, "
              "%9}, "
              "{%0, %1, %2, %3};\n"
              : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
              : "r"(a[f].x), "r"(a[f].y), "r"(a[f].z), "r"(a[f].w), "r"(x0), "r"(x1));
        }
    }
  }
  // C: fragment rows lane/4 and lane/4 + 8 of each m16, columns 2 (lane % 4) and + 1 of each n8.
  for (int f = 0; f < F; ++f)
    for (int j = 0; j < 8; ++j)
      for (int hr = 0; hr < 2; ++hr) {
        const int row = rows[w * H + f * 16 + (lane >> 2) + hr * 8];
        const int col = n0 + warp * 64 + j * 8 + (lane & 3) * 2;
        *reinterpret_cast<__half2*>(C + static_cast<size_t>(row) * N + col) =
            __floats2half2_rn(acc[f][j][hr * 2], acc[f][j][hr * 2 + 1]);
      }
}

struct Windows {
  int h = 16, windows = 0;
  std::vector<int> steps, cols, rows;
  std::vector<uint32_t> vals;  // fragment order
  std::vector<float> dense;    // M x K, the values as the kernel sees them (fp16-rounded), for the check
  double kept_macs_per_n = 0;  // sum of H x padded union
};

uint32_t pack(float lo, float hi) {
  const __half a = __float2half_rn(lo), b = __float2half_rn(hi);
  return static_cast<uint32_t>(__half_as_ushort(a)) | (static_cast<uint32_t>(__half_as_ushort(b)) << 16);
}

// Windows of h rows over an M x K matrix whose every window keeps `share` of K (random columns);
// every kept (row, column) holds a value (the packing is what the kernel streams, not a real mask).
Windows make_windows(int M, int K, int h, double share, unsigned seed, bool keep_dense) {
  Windows w;
  w.h = h;
  w.windows = M / h;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> val(-1.0f, 1.0f);
  const int width = std::max(16, static_cast<int>(std::lround(share * K / 16.0)) * 16);
  std::vector<int> all(K);
  for (int k = 0; k < K; ++k) all[k] = k;
  if (keep_dense) w.dense.assign(static_cast<size_t>(M) * K, 0.0f);
  w.steps.push_back(0);
  for (int i = 0; i < w.windows; ++i) {
    std::shuffle(all.begin(), all.end(), rng);
    std::vector<int> u(all.begin(), all.begin() + width);
    std::sort(u.begin(), u.end());
    w.cols.insert(w.cols.end(), u.begin(), u.end());
    w.steps.push_back(w.steps.back() + width / 16);
    for (int r = 0; r < h; ++r) w.rows.push_back(i * h + r);
    // Values: element (r, c) of the window over its union, in mma A-fragment order per k-step.
    std::vector<float> v(static_cast<size_t>(h) * width);
    for (float& x : v) x = __half2float(__float2half_rn(val(rng)));
    if (keep_dense)
      for (int r = 0; r < h; ++r)
        for (int c = 0; c < width; ++c)
          w.dense[static_cast<size_t>(i * h + r) * K + u[c]] = v[static_cast<size_t>(r) * width + c];
    for (int s = 0; s < width / 16; ++s)
      for (int f = 0; f < h / 16; ++f)
        for (int lane = 0; lane < 32; ++lane) {
          const int r0 = f * 16 + lane / 4, c0 = s * 16 + (lane % 4) * 2;
          const auto at = [&](int r, int c) { return v[static_cast<size_t>(r) * width + c]; };
          // a0: (r0, c0..c0+1), a1: (r0+8, c0..), a2: (r0, c0+8..), a3: (r0+8, c0+8..)
          w.vals.push_back(pack(at(r0, c0), at(r0, c0 + 1)));
          w.vals.push_back(pack(at(r0 + 8, c0), at(r0 + 8, c0 + 1)));
          w.vals.push_back(pack(at(r0, c0 + 8), at(r0, c0 + 9)));
          w.vals.push_back(pack(at(r0 + 8, c0 + 8), at(r0 + 8, c0 + 9)));
        }
  }
  w.kept_macs_per_n = static_cast<double>(h) * width * w.windows;
  return w;
}

struct Device {
  int *steps = nullptr, *cols = nullptr, *rows = nullptr;
  uint4* vals = nullptr;
  void upload(const Windows& w) {
    CHECK(cudaMalloc(&steps, w.steps.size() * 4));
    CHECK(cudaMalloc(&cols, w.cols.size() * 4));
    CHECK(cudaMalloc(&rows, w.rows.size() * 4));
    CHECK(cudaMalloc(&vals, w.vals.size() * 4));
    CHECK(cudaMemcpy(steps, w.steps.data(), w.steps.size() * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(cols, w.cols.data(), w.cols.size() * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(rows, w.rows.data(), w.rows.size() * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(vals, w.vals.data(), w.vals.size() * 4, cudaMemcpyHostToDevice));
  }
  void release() {
    cudaFree(steps);
    cudaFree(cols);
    cudaFree(rows);
    cudaFree(vals);
  }
};

void launch(const Windows& w, const Device& d, const __half* B, __half* C, int N) {
  const dim3 grid(N / kNTile, w.windows);
  const int shared = kStages * kStepBytes;
  if (w.h == 16)
    window_kernel<16><<<grid, 128, shared>>>(B, C, d.steps, d.cols, d.vals, d.rows, N);
  else
    window_kernel<32><<<grid, 128, shared>>>(B, C, d.steps, d.cols, d.vals, d.rows, N);
  CHECK(cudaGetLastError());
}

template <class F>
float median_ms(F&& f) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) f();
  std::vector<float> t;
  for (int i = 0; i < 20; ++i) {
    CHECK(cudaEventRecord(a));
    f();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// The probe against an fp64 product on a small problem.
bool check(int h) {
  const int M = 64, K = 512, N = 512;
  const Windows w = make_windows(M, K, h, 0.4, 7, true);
  std::vector<__half> b(static_cast<size_t>(K) * N);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> val(-1.0f, 1.0f);
  for (__half& x : b) x = __float2half_rn(val(rng));
  Device d;
  d.upload(w);
  __half *B, *C;
  CHECK(cudaMalloc(&B, b.size() * 2));
  CHECK(cudaMalloc(&C, static_cast<size_t>(M) * N * 2));
  CHECK(cudaMemcpy(B, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemset(C, 0xff, static_cast<size_t>(M) * N * 2));  // NaN
  CHECK(cudaFuncSetAttribute(window_kernel<16>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             kStages * kStepBytes));
  CHECK(cudaFuncSetAttribute(window_kernel<32>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             kStages * kStepBytes));
  launch(w, d, B, C, N);
  std::vector<__half> c(static_cast<size_t>(M) * N);
  CHECK(cudaMemcpy(c.data(), C, c.size() * 2, cudaMemcpyDeviceToHost));
  double worst = 0, scale = 0;
  for (int r = 0; r < M; ++r)
    for (int j = 0; j < N; ++j) {
      double ref = 0;
      for (int k = 0; k < K; ++k)
        ref +=
            double(w.dense[static_cast<size_t>(r) * K + k]) * __half2float(b[static_cast<size_t>(k) * N + j]);
      const double got = __half2float(c[static_cast<size_t>(r) * N + j]);
      scale = std::max(scale, std::fabs(ref));
      worst = std::isnan(got) ? INFINITY : std::max(worst, std::fabs(got - ref));
    }
  d.release();
  cudaFree(B);
  cudaFree(C);
  const double rel = worst / scale;
  std::printf("check H = %d (64 x 512 x 512, 40 %% kept): max relative error %.3g %s\n", h, rel,
              rel < 1e-2 ? "ok" : "FAILED");
  return rel < 1e-2;
}

}  // namespace

int main(int argc, char** argv) {
  const int M = argc > 3 ? std::atoi(argv[1]) : 4096, K = argc > 3 ? std::atoi(argv[2]) : 4096,
            N = argc > 3 ? std::atoi(argv[3]) : 2048;
  if (M % 32 || K % 16 || N % kNTile) {
    std::fprintf(stderr, "window_mma_probe: M must be a multiple of 32, K of 16, N of %d\n", kNTile);
    return 2;
  }
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs; M %d, K %d, N %d, fp16, fp32 accumulation\n", prop.name, prop.multiProcessorCount,
              M, K, N);
  if (!check(16) || !check(32)) return 1;

  std::vector<__half> hb(static_cast<size_t>(K) * N), ha(static_cast<size_t>(M) * K);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> val(-1.0f, 1.0f);
  for (__half& x : hb) x = __float2half_rn(val(rng));
  for (__half& x : ha) x = __float2half_rn(val(rng));
  __half *A, *B, *C;
  CHECK(cudaMalloc(&A, ha.size() * 2));
  CHECK(cudaMalloc(&B, hb.size() * 2));
  CHECK(cudaMalloc(&C, static_cast<size_t>(M) * N * 2));
  CHECK(cudaMemcpy(A, ha.data(), ha.size() * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(B, hb.data(), hb.size() * 2, cudaMemcpyHostToDevice));

  // cuBLAS: C (M x N, row-major) = A (M x K) B (K x N) as the column-major C^T = B^T A^T.
  cublasHandle_t blas;
  CHECK_BLAS(cublasCreate(&blas));
  const float one = 1.0f, zero = 0.0f;
  float blas_ms = 1e30f;
  int best_algo = -1;
  for (int algo = -1; algo <= 23; ++algo) {  // CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99 is "default"
    const cublasGemmAlgo_t a = algo < 0 ? CUBLAS_GEMM_DEFAULT_TENSOR_OP
                                        : static_cast<cublasGemmAlgo_t>(CUBLAS_GEMM_ALGO0_TENSOR_OP + algo);
    const auto gemm = [&] {
      return cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, B, CUDA_R_16F, N, A, CUDA_R_16F, K,
                          &zero, C, CUDA_R_16F, N, CUBLAS_COMPUTE_32F, a);
    };
    if (gemm() != CUBLAS_STATUS_SUCCESS) continue;
    const float ms = median_ms([&] { gemm(); });
    if (ms < blas_ms) {
      blas_ms = ms;
      best_algo = algo;
    }
  }
  const double dense_flop = 2.0 * M * K * N;
  std::printf("cuBLAS fp16 (best of the default and 24 tensor-op algorithms: %d): %.1f us, %.0f TFLOP/s\n",
              best_algo, blas_ms * 1e3, dense_flop / (blas_ms * 1e-3) * 1e-12);
  std::printf("%4s %6s %10s %12s %14s %10s\n", "H", "kept", "us", "TFLOP/s kept", "x cuBLAS", "efficiency");
  CHECK(cudaFuncSetAttribute(window_kernel<16>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             kStages * kStepBytes));
  CHECK(cudaFuncSetAttribute(window_kernel<32>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             kStages * kStepBytes));
  for (const int h : {16, 32})
    for (const double share : {0.3, 0.5, 0.67, 0.85, 1.0}) {
      const Windows w = make_windows(M, K, h, share, 11, false);
      Device d;
      d.upload(w);
      const float ms = median_ms([&] { launch(w, d, B, C, N); });
      const double kept = 2.0 * w.kept_macs_per_n * N;
      const double tflops = kept / (ms * 1e-3) * 1e-12;
      // Efficiency: the probe's rate on its kept work over cuBLAS's rate on the dense work.
      std::printf("%4d %5.0f%% %10.1f %12.0f %13.2fx %9.0f%%\n", h,
                  100.0 * w.kept_macs_per_n / (double(M) * K), ms * 1e3, tflops, blas_ms / ms,
                  100.0 * tflops / (dense_flop / (blas_ms * 1e-3) * 1e-12));
      d.release();
    }
  cublasDestroy(blas);
  return 0;
}
