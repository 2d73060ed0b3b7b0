// cuBLAS and cuSPARSE baselines: upload, check against the fp64 reference, then time.
#include "bench/baselines.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <memory>

#include "bench/lt_gemm.hpp"
#include "bench/vendor_handles.hpp"
#include "sparsecc/common/dtype.hpp"
#include "sparsecc/common/error.hpp"
#include "sparsecc/common/random.hpp"
#include "sparsecc/reference/spmm.hpp"

namespace sparsecc::bench {
namespace {

// One copy of every operand; the timed launches rotate among several when timing cold L2.
struct OperandSet {
  DeviceBuffer a32, a16;                    // dense A, M×K row-major, fp32 and fp16
  DeviceBuffer a32t, a16t;                  // the same, transposed (K×M row-major)
  DeviceBuffer row_ptr, row_ind, col, val;  // sparse A (int32 indices, fp32 values)
  DeviceBuffer b32, b16, c32;               // B (K×N) fp32 and fp16, C (M×N) fp32
};

struct Problem {
  std::int64_t M = 0, K = 0, N = 0, nnz = 0;
  std::vector<double> c_ref;
  std::vector<OperandSet> sets;
};

using ProblemPtr = std::shared_ptr<Problem>;

ProblemPtr prepare(const CsrMatrix& a, std::int64_t n, const BaselineOptions& options, std::size_t l2_bytes) {
  if (n < 1 || n > INT_MAX || a.rows > INT_MAX || a.cols > INT_MAX || a.nnz() > INT_MAX)
    throw UsageError(fmt::format("baselines need 1 <= N and every size below 2^31 (M {}, K {}, N {}, nnz {})",
                                 a.rows, a.cols, n, a.nnz()));
  validate(a);
  auto owned = std::make_shared<Problem>();
  Problem& p = *owned;
  p.M = a.rows, p.K = a.cols, p.N = n, p.nnz = a.nnz();
  DenseMatrix b(p.K, p.N);
  SplitMix64 rng(options.seed);
  for (double& v : b.data) v = rng.uniform_pm1();
  p.c_ref = spmm(a, b).data;

  std::vector<float> a32(static_cast<std::size_t>(p.M * p.K), 0.0f), val(a.values.size()), b32(b.data.size());
  std::vector<float> a32t(a32.size(), 0.0f);
  std::vector<std::uint16_t> a16(a32.size(), 0), a16t(a32.size(), 0), b16(b.data.size());
  std::vector<std::int32_t> row_ptr(a.row_ptr.begin(), a.row_ptr.end()), row_ind(a.values.size());
  for (std::int64_t r = 0; r < p.M; ++r) {
    for (std::int64_t i = a.row_ptr[r]; i < a.row_ptr[r + 1]; ++i) {
      std::size_t at = static_cast<std::size_t>(r * p.K + a.col_idx[i]);
      std::size_t at_t = static_cast<std::size_t>(a.col_idx[i] * p.M + r);
      a32[at] = a32t[at_t] = static_cast<float>(a.values[i]);
      a16[at] = a16t[at_t] = double_to_half_bits(a.values[i]);
      val[i] = static_cast<float>(a.values[i]);
      row_ind[i] = static_cast<std::int32_t>(r);
    }
  }
  for (std::size_t i = 0; i < b.data.size(); ++i) {
    b32[i] = static_cast<float>(b.data[i]);
    b16[i] = double_to_half_bits(b.data[i]);
  }
  // The fewest bytes one launch of any baseline touches: sparse fp32 or dense fp16.
  std::size_t c_bytes = static_cast<std::size_t>(p.M * p.N) * 4;
  std::size_t sparse = static_cast<std::size_t>(p.nnz) * 8 + row_ptr.size() * 4 + b32.size() * 4 + c_bytes;
  std::size_t half = a16.size() * 2 + b16.size() * 2 + c_bytes;
  int sets = rotation_sets(std::min(sparse, half), l2_bytes, options.timing.cold_l2);
  for (int s = 0; s < sets; ++s) {
    OperandSet o;
    o.a32 = upload(a32), o.a16 = upload(a16), o.b32 = upload(b32), o.b16 = upload(b16);
    o.a32t = upload(a32t), o.a16t = upload(a16t);
    o.row_ptr = upload(row_ptr), o.row_ind = upload(row_ind), o.col = upload(a.col_idx), o.val = upload(val);
    o.c32 = DeviceBuffer(c_bytes);
    p.sets.push_back(std::move(o));
  }
  return owned;
}

using Enqueue = std::function<void(cudaStream_t, int set)>;

// Runs `setup` (which returns the enqueue of one launch; it must hold what it uses, the problem
// included, by shared ownership), checks one launch's output against the reference and, when it
// passes, times the launches rotating over the operand sets and keeps the launch on the first set.
BaselineResult measure(const std::string& name, double tolerance, Problem& p, const BaselineOptions& options,
                       const std::function<Enqueue()>& setup) {
  BaselineResult r;
  r.name = name;
  r.tolerance = tolerance;
  try {
    Enqueue enqueue = setup();
    for (OperandSet& o : p.sets) SPARSECC_CUDA_CHECK(cudaMemset(o.c32.get(), 0xFF, o.c32.bytes()));  // NaN
    enqueue(nullptr, 0);
    SPARSECC_CUDA_CHECK(cudaDeviceSynchronize());
    SPARSECC_CUDA_CHECK(cudaGetLastError());
    std::vector<float> c(p.c_ref.size());
    p.sets[0].c32.download(c.data(), c.size() * sizeof(float));
    r.rel_error = rel_l2_error(c, p.c_ref);
    if (!(r.rel_error <= tolerance)) {
      r.note = fmt::format("check failed: rel L2 error {:.3g} above {:.0e}", r.rel_error, tolerance);
      return r;
    }
    TimingOptions timing = options.timing;
    timing.buffer_sets = static_cast<int>(p.sets.size());
    int next = 0;
    r.timing = time_steady(
        [&](cudaStream_t stream) {
          enqueue(stream, next);
          next = (next + 1) % timing.buffer_sets;
        },
        timing);
    r.us = r.timing.median_us;
    r.ok = true;
    r.enqueue = [enqueue](cudaStream_t stream) { enqueue(stream, 0); };
  } catch (const NotSupported& e) {
    r.skipped = true;
    r.note = fmt::format("not supported: {}", e.what());
  } catch (const std::exception& e) {
    r.note = e.what();
  }
  cudaGetLastError();  // a non-sticky error of this baseline must not fail the next one
  return r;
}

// The cuBLAS precisions: strict fp32, TF32 tensor cores, fp16 tensor cores (fp32 accumulate and output).
struct GemmPrecision {
  const char* name;
  bool half;
  cublasComputeType_t compute;
  double tolerance;
};

constexpr GemmPrecision kGemmPrecisions[] = {{"fp32", false, CUBLAS_COMPUTE_32F, kTolFp32},
                                             {"tf32", false, CUBLAS_COMPUTE_32F_FAST_TF32, kTolTf32},
                                             {"fp16", true, CUBLAS_COMPUTE_32F, kTolFp16}};

// The cuBLAS baselines of every precision (see BaselineOptions::cublas_algorithms), each checked and
// timed, then "cublas_<precision>": the fastest of that precision that passed.
std::vector<BaselineResult> cublas_baselines(const ProblemPtr& owned, const BaselineOptions& options) {
  Problem& p = *owned;
  auto handle = std::make_shared<CublasHandle>();
  auto lt = std::make_shared<CublasLtHandle>();
  auto workspace = std::make_shared<DeviceBuffer>(std::size_t{32} << 20);
  SPARSECC_CUBLAS_CHECK(cublasSetWorkspace(handle->h, workspace->get(), workspace->bytes()));
  SPARSECC_CUBLAS_CHECK(cublasSetMathMode(handle->h, CUBLAS_DEFAULT_MATH));
  const int m = static_cast<int>(p.N), n = static_cast<int>(p.M), k = static_cast<int>(p.K);

  // cublasGemmEx's default algorithm on A as stored: gemm(m = N, n = M, k = K) on B (ld N), A (ld K).
  auto gemm = [&](const GemmPrecision& prec) -> Enqueue {
    return [owned, handle, workspace, m, n, k, prec](cudaStream_t stream, int set) {
      const float alpha = 1.0f, beta = 0.0f;
      const OperandSet& o = owned->sets[static_cast<std::size_t>(set)];
      cudaDataType_t in = prec.half ? CUDA_R_16F : CUDA_R_32F;
      SPARSECC_CUBLAS_CHECK(cublasSetStream(handle->h, stream));
      SPARSECC_CUBLAS_CHECK(cublasGemmEx(handle->h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha,
                                         prec.half ? o.b16.get() : o.b32.get(), in, m,
                                         prec.half ? o.a16.get() : o.a32.get(), in, k, &beta, o.c32.get(),
                                         CUDA_R_32F, m, prec.compute, CUBLAS_GEMM_DEFAULT));
    };
  };
  std::vector<BaselineResult> all;
  for (const GemmPrecision& prec : kGemmPrecisions) {
    const std::string prefix = fmt::format("cublas_{}_", prec.name);
    std::vector<BaselineResult> tried;
    tried.push_back(measure(prefix + "gemmex", prec.tolerance, p, options, [&] { return gemm(prec); }));
    LtGemmShape shape;
    shape.m = p.M, shape.k = p.K, shape.n = p.N;
    shape.in = prec.half ? CUDA_R_16F : CUDA_R_32F;
    shape.compute = prec.compute;
    lt_candidates(
        lt->h, shape, workspace->bytes(), options.cublas_algorithms, prefix, prec.tolerance,
        [&](const std::string& name, const std::shared_ptr<LtGemm>& g, bool transposed, std::size_t i) {
          return measure(name, prec.tolerance, p, options, [&]() -> Enqueue {
            return [owned, lt, g, workspace, transposed, half = prec.half, i](cudaStream_t stream, int set) {
              const OperandSet& o = owned->sets[static_cast<std::size_t>(set)];
              const DeviceBuffer& w = half ? (transposed ? o.a16t : o.a16) : (transposed ? o.a32t : o.a32);
              lt_matmul(lt->h, *g, i, half ? o.b16.get() : o.b32.get(), w.get(), o.c32.get(),
                        workspace->get(), workspace->bytes(), stream);
            };
          });
        },
        tried);
    BaselineResult best = best_of(tried, prefix, "cublas_" + std::string(prec.name), prec.tolerance);
    for (BaselineResult& r : tried) all.push_back(std::move(r));
    all.push_back(std::move(best));
  }
  return all;
}

struct SpmmAlgorithm {
  const char* name;
  cusparseSpMMAlg_t alg;
  bool coo;
  bool preprocess;  // cusparseSpMM_preprocess helps CSR_ALG1 and CSR_ALG3 (DEFAULT may pick either)
};

// CSR_ALG3 is left out: with row-major B and C it produced NaN outputs on an H200 (cuSPARSE 12.6.3),
// followed by "context is destroyed" errors in later calls and a crash of the process.
constexpr SpmmAlgorithm kSpmmAlgorithms[] = {
    {"cusparse_csr_default", CUSPARSE_SPMM_ALG_DEFAULT, false, true},
    {"cusparse_csr_alg1", CUSPARSE_SPMM_CSR_ALG1, false, true},
    {"cusparse_csr_alg2", CUSPARSE_SPMM_CSR_ALG2, false, false},
    {"cusparse_coo_alg1", CUSPARSE_SPMM_COO_ALG1, true, false},
    {"cusparse_coo_alg2", CUSPARSE_SPMM_COO_ALG2, true, false},
    {"cusparse_coo_alg3", CUSPARSE_SPMM_COO_ALG3, true, false},
    {"cusparse_coo_alg4", CUSPARSE_SPMM_COO_ALG4, true, false},
};

// The sparse A of operand set `o` as a cuSPARSE COO or CSR descriptor (int32 indices, fp32 values).
void describe_a(SpMat& a, const Problem& p, const OperandSet& o, bool coo) {
  if (coo)
    SPARSECC_CUSPARSE_CHECK(cusparseCreateCoo(&a.d, p.M, p.K, p.nnz, o.row_ind.get(), o.col.get(),
                                              o.val.get(), CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO,
                                              CUDA_R_32F));
  else
    SPARSECC_CUSPARSE_CHECK(cusparseCreateCsr(&a.d, p.M, p.K, p.nnz, o.row_ptr.get(), o.col.get(),
                                              o.val.get(), CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                              CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
}

Enqueue cusparse_setup(const ProblemPtr& owned, const std::shared_ptr<CusparseHandle>& handle,
                       const SpmmAlgorithm& alg) {
  Problem& p = *owned;
  auto sets = std::make_shared<std::vector<SpmmSet>>(p.sets.size());
  // The handle may still name the stream of the previous algorithm's timing run, which is destroyed
  // by now; preprocessing on it crashes inside the driver.
  SPARSECC_CUSPARSE_CHECK(cusparseSetStream(handle->h, nullptr));
  for (std::size_t s = 0; s < p.sets.size(); ++s) {
    OperandSet& o = p.sets[s];
    SpmmSet& d = (*sets)[s];
    describe_a(d.a, p, o, alg.coo);
    prepare_spmm(handle->h, d, p.M, p.K, p.N, o.b32.get(), o.c32.get(), CUDA_R_32F, alg.alg, alg.preprocess);
  }
  SPARSECC_CUDA_CHECK(cudaDeviceSynchronize());
  return [owned, handle, sets, a = alg.alg](cudaStream_t stream, int set) {
    run_spmm(handle->h, (*sets)[static_cast<std::size_t>(set)], a, stream);
  };
}

// N = 1 (SpMV): the vendor libraries' matrix-vector routines, the fair baselines there. cuBLAS
// sgemv on the dense A (strict fp32) and cusparseSpMV with every algorithm, preprocessed.
struct SpmvSet {
  SpMat a;
  DnVec x, y;
  DeviceBuffer workspace;
};

struct SpmvAlgorithm {
  const char* name;
  cusparseSpMVAlg_t alg;
  bool coo;
};

constexpr SpmvAlgorithm kSpmvAlgorithms[] = {
    {"cusparse_spmv_csr_default", CUSPARSE_SPMV_ALG_DEFAULT, false},
    {"cusparse_spmv_csr_alg1", CUSPARSE_SPMV_CSR_ALG1, false},
    {"cusparse_spmv_csr_alg2", CUSPARSE_SPMV_CSR_ALG2, false},
    {"cusparse_spmv_coo_alg1", CUSPARSE_SPMV_COO_ALG1, true},
    {"cusparse_spmv_coo_alg2", CUSPARSE_SPMV_COO_ALG2, true},
};

Enqueue spmv_setup(const ProblemPtr& owned, const std::shared_ptr<CusparseHandle>& handle,
                   const SpmvAlgorithm& alg) {
  Problem& p = *owned;
  auto sets = std::make_shared<std::vector<SpmvSet>>(p.sets.size());
  SPARSECC_CUSPARSE_CHECK(cusparseSetStream(handle->h, nullptr));  // see cusparse_setup
  const float alpha = 1.0f, beta = 0.0f;
  const auto op = CUSPARSE_OPERATION_NON_TRANSPOSE;
  for (std::size_t s = 0; s < p.sets.size(); ++s) {
    OperandSet& o = p.sets[s];
    SpmvSet& d = (*sets)[s];
    describe_a(d.a, p, o, alg.coo);
    SPARSECC_CUSPARSE_CHECK(cusparseCreateDnVec(&d.x.d, p.K, o.b32.get(), CUDA_R_32F));
    SPARSECC_CUSPARSE_CHECK(cusparseCreateDnVec(&d.y.d, p.M, o.c32.get(), CUDA_R_32F));
    std::size_t bytes = 0;
    SPARSECC_CUSPARSE_CHECK(cusparseSpMV_bufferSize(handle->h, op, &alpha, d.a.d, d.x.d, &beta, d.y.d,
                                                    CUDA_R_32F, alg.alg, &bytes));
    d.workspace = DeviceBuffer(bytes);
    SPARSECC_CUSPARSE_CHECK(cusparseSpMV_preprocess(handle->h, op, &alpha, d.a.d, d.x.d, &beta, d.y.d,
                                                    CUDA_R_32F, alg.alg, d.workspace.get()));
  }
  SPARSECC_CUDA_CHECK(cudaDeviceSynchronize());
  return [owned, handle, sets, a = alg.alg](cudaStream_t stream, int set) {
    const float alpha = 1.0f, beta = 0.0f;
    SpmvSet& d = (*sets)[static_cast<std::size_t>(set)];
    SPARSECC_CUSPARSE_CHECK(cusparseSetStream(handle->h, stream));
    SPARSECC_CUSPARSE_CHECK(cusparseSpMV(handle->h, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, d.a.d, d.x.d,
                                         &beta, d.y.d, CUDA_R_32F, a, d.workspace.get()));
  };
}

BaselineResult gemv_baseline(const ProblemPtr& owned, const BaselineOptions& options) {
  auto handle = std::make_shared<CublasHandle>();
  return measure("cublas_gemv_fp32", kTolFp32, *owned, options, [&]() -> Enqueue {
    SPARSECC_CUBLAS_CHECK(cublasSetMathMode(handle->h, CUBLAS_DEFAULT_MATH));
    // Row-major A (M x K) is the column-major K x M matrix A^T: y = (A^T)^T x.
    return [owned, handle](cudaStream_t stream, int set) {
      const float alpha = 1.0f, beta = 0.0f;
      const Problem& p = *owned;
      const OperandSet& o = p.sets[static_cast<std::size_t>(set)];
      SPARSECC_CUBLAS_CHECK(cublasSetStream(handle->h, stream));
      SPARSECC_CUBLAS_CHECK(cublasSgemv(handle->h, CUBLAS_OP_T, static_cast<int>(p.K), static_cast<int>(p.M),
                                        &alpha, static_cast<const float*>(o.a32.get()), static_cast<int>(p.K),
                                        static_cast<const float*>(o.b32.get()), 1, &beta,
                                        static_cast<float*>(o.c32.get()), 1));
    };
  });
}

std::string version3(int major, int minor, int patch) { return fmt::format("{}.{}.{}", major, minor, patch); }

}  // namespace

std::string DeviceInfo::describe() const {
  auto mhz = [](int khz) { return khz > 0 ? fmt::format("{} MHz", khz / 1000) : std::string("n/a"); };
  return fmt::format(
      "device {}: {} (sm_{}{}, {} SMs, peak clocks SM {} / memory {}, {} MiB L2, {:.1f} GiB), driver {}.{}, "
      "runtime {}.{}, cuBLAS {}, cuSPARSE {}",
      ordinal, name, cc_major, cc_minor, sms, mhz(sm_clock_khz), mhz(mem_clock_khz), l2_bytes >> 20,
      static_cast<double>(memory_bytes) / (1 << 30), driver_version / 1000, driver_version % 1000 / 10,
      runtime_version / 1000, runtime_version % 1000 / 10, cublas_version, cusparse_version);
}

BaselineResult best_of(const std::vector<BaselineResult>& results, const std::string& prefix,
                       const std::string& name, double tolerance) {
  BaselineResult best;
  best.name = name;
  best.tolerance = tolerance;
  bool any_failed = false;
  for (const BaselineResult& r : results) {
    if (r.name.rfind(prefix, 0) != 0) continue;
    any_failed = any_failed || (!r.ok && !r.skipped);
    if (r.ok && (!best.ok || r.us < best.us)) {
      best = r;
      best.name = name;
      best.note = r.name;
    }
  }
  if (!best.ok) {
    best.skipped = !any_failed;
    best.note = fmt::format("no {} baseline passed", prefix);
  }
  return best;
}

const BaselineResult* find_ok(const std::vector<BaselineResult>& results, const std::string& name) {
  for (const auto& r : results)
    if (r.name == name && r.ok) return &r;
  return nullptr;
}

DeviceInfo query_device() {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    throw NoDeviceError(
        fmt::format("no usable CUDA device: {} ({})", cudaGetErrorName(status), cudaGetErrorString(status)));
  }
  if (count == 0) throw NoDeviceError("no CUDA device present");
  DeviceInfo info;
  SPARSECC_CUDA_CHECK(cudaGetDevice(&info.ordinal));
  cudaDeviceProp prop{};
  SPARSECC_CUDA_CHECK(cudaGetDeviceProperties(&prop, info.ordinal));
  info.name = prop.name;
  info.cc_major = prop.major, info.cc_minor = prop.minor;
  info.sms = prop.multiProcessorCount;
  info.l2_bytes = prop.l2CacheSize;
  info.memory_bytes = static_cast<std::int64_t>(prop.totalGlobalMem);
  if (cudaDeviceGetAttribute(&info.sm_clock_khz, cudaDevAttrClockRate, info.ordinal) != cudaSuccess)
    info.sm_clock_khz = 0;
  if (cudaDeviceGetAttribute(&info.mem_clock_khz, cudaDevAttrMemoryClockRate, info.ordinal) != cudaSuccess)
    info.mem_clock_khz = 0;
  cudaGetLastError();
  SPARSECC_CUDA_CHECK(cudaDriverGetVersion(&info.driver_version));
  SPARSECC_CUDA_CHECK(cudaRuntimeGetVersion(&info.runtime_version));
  int v[3] = {0, 0, 0};
  const libraryPropertyType parts[3] = {MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL};
  for (int i = 0; i < 3; ++i) SPARSECC_CUBLAS_CHECK(cublasGetProperty(parts[i], &v[i]));
  info.cublas_version = version3(v[0], v[1], v[2]);
  for (int i = 0; i < 3; ++i) SPARSECC_CUSPARSE_CHECK(cusparseGetProperty(parts[i], &v[i]));
  info.cusparse_version = version3(v[0], v[1], v[2]);
  return info;
}

std::vector<BaselineResult> run_baselines(const CsrMatrix& a, std::int64_t n,
                                          const BaselineOptions& options) {
  DeviceInfo device = query_device();
  const ProblemPtr p = prepare(a, n, options, static_cast<std::size_t>(device.l2_bytes));
  std::vector<BaselineResult> results = cublas_baselines(p, options);
  auto handle = std::make_shared<CusparseHandle>();
  for (const SpmmAlgorithm& alg : kSpmmAlgorithms)
    results.push_back(
        measure(alg.name, kTolFp32, *p, options, [&] { return cusparse_setup(p, handle, alg); }));
  if (n == 1) {
    results.push_back(gemv_baseline(p, options));
    for (const SpmvAlgorithm& alg : kSpmvAlgorithms)
      results.push_back(measure(alg.name, kTolFp32, *p, options, [&] { return spmv_setup(p, handle, alg); }));
  }
  results.push_back(best_of(results, "cusparse_", "cusparse_best", kTolFp32));
  return results;
}

}  // namespace sparsecc::bench
